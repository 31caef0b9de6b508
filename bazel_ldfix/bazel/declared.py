"""What Bazel declares for a test, against what an earlier build left in ``bazel-out``.

A test's RUNPATH reaches ``$ORIGIN/../_solib_<cpu>/<dir>``, and ``$ORIGIN`` is where the
executable really is: ``bazel-out/<config>/bin``, a directory Bazel never empties. A library
an earlier build staged there (before a BUILD change was reverted, on another branch) stays
until ``bazel clean``, and a local run finds it by accident. Bazel declares what the test may
use: its runfiles manifest (``<test>.runfiles_manifest``), which is also the test action's
declared inputs, what a remote executor or a clean checkout gets. A file of a ``_solib_``
directory the test's RUNPATH reaches that the manifest does not list is a leftover, and a
library the loader model finds there is one the test loads only by accident.

The check is cheap when there is nothing to find: the directories are listed and the
manifest read; the loader model runs only when some file there is not declared.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.bazel import runfiles
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.search import Environment


@dataclass(frozen=True)
class Leftover:
    """A library a test loads from a file Bazel does not declare for it."""

    soname: str
    path: str           # the file the model found: <bin>/_solib_<cpu>/<dir>/<name>


def undeclared(executable: str) -> frozenset[str]:
    """The files of the ``_solib_`` directories ``executable``'s RUNPATH reaches that its
    runfiles manifest does not list (normalized paths; empty for a test that is not an
    ELF program under ``bin``, or that has no manifest)."""
    real = os.path.realpath(executable)
    at = real.rfind("/bin/")
    if at < 0:
        return frozenset()
    bindir = real[: at + len("/bin")]
    try:
        info = elf.read_elf(real)
    except BadInputError:
        return frozenset()
    entries = runfiles.read_manifest(runfiles.manifest_of(executable))
    if entries is None:
        return frozenset()
    declared = {rest for e in entries
                if (rest := e.path.partition("/")[2]).startswith("_solib_")}
    out: set[str] = set()
    for directory in _solib_dirs(info, real, bindir):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if os.path.relpath(path, bindir) not in declared:
                out.add(os.path.normpath(path))
    return frozenset(out)


def leftovers(executable: str, library_path: str | None = None) -> tuple[Leftover, ...]:
    """The libraries ``executable`` would load only from undeclared files."""
    from bazel_ldfix.loader.resolve import LoaderFactory

    stale = undeclared(executable)
    if not stale:
        return ()
    real = os.path.realpath(executable)
    info = elf.read_elf(real)
    loaders = LoaderFactory()
    env = Environment(library_path, os.path.dirname(real), loaders.cache_for(info))
    resolution = loaders.make_loader(info, env).resolve(real, info=info)
    out: dict[str, Leftover] = {}
    for lib in resolution.libraries:
        if lib.path is not None and os.path.normpath(lib.path) in stale:
            out.setdefault(lib.name, Leftover(lib.name, lib.path))
    return tuple(out.values())


def _solib_dirs(info: elf.ElfInfo, real: str, bindir: str) -> list[str]:
    """The ``_solib_`` directories under ``bindir`` that the RUNPATH (or RPATH) reaches,
    ``$ORIGIN`` being the executable's real directory."""
    origin = os.path.dirname(real)
    out: list[str] = []
    for value in (info.runpath, info.rpath):
        for entry in (value or "").split(":"):
            path = os.path.normpath(entry.replace("${ORIGIN}", origin).replace(
                "$ORIGIN", origin))
            if path.startswith(bindir + "/_solib_") and path not in out:
                out.append(path)
    return out


def words(label: str, found: tuple[Leftover, ...]) -> str:
    """One line: the test passes here only through files Bazel does not declare."""
    names = ", ".join(f"{f.soname} ({f.path})" for f in found)
    return (f"{label} loads {names} from a file no rule declares for it now (left in "
            "bazel-out by an earlier build): it passes here by accident, and fails under "
            "remote execution and after `bazel clean`; `bazel-ldfix fix` makes the BUILD "
            "change")

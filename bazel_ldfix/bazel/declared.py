"""What Bazel declares for a test, against what an earlier build left in ``bazel-out``.

A test's RUNPATH reaches ``$ORIGIN/../_solib_<cpu>/<dir>``, and ``$ORIGIN`` is where the
executable really is: ``bazel-out/<config>/bin``, a directory Bazel never empties. A library
an earlier build staged there (before a BUILD change was reverted, on another branch) stays
until ``bazel clean``, and a local run finds it by accident. Bazel declares what the test may
use: its runfiles manifest (``<test>.runfiles_manifest``), which is also the test action's
declared inputs, what a remote executor or a clean checkout gets. A file of a ``_solib_``
directory the test's RUNPATH reaches that the manifest does not list is a leftover, and a
library the loader model finds there is one the test loads only by accident.

The check is cheap when there is nothing to find: the manifest is read and its ``_solib_``
directories listed (once per command); the loader model runs only when some file there is
not declared.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.bazel import runfiles
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.resolution import Environment


@dataclass(frozen=True)
class Leftover:
    """A library a test loads from a file Bazel does not declare for it."""

    soname: str
    path: str           # the file the model found: <bin>/_solib_<cpu>/<dir>/<name>


def undeclared(executable: str, listed: dict[str, tuple[str, list[str]]] | None = None,
               *, declarer: str | None = None) -> frozenset[str]:
    """The files of the test's ``_solib_`` directories that its runfiles manifest does
    not list (by real directory; empty when there is no manifest).

    ``declarer``: the executable whose runfiles manifest declares what ``executable`` may
    use, when that is not its own: the test's, for a program of its runfiles (Bazel makes
    no manifest for a ``cc_binary`` that only a test's ``data`` names).

    The directories are those of the ``_solib_`` files the manifest declares: the test's
    RUNPATH names the directories of the libraries it links, and Bazel stages each of
    those libraries in its runfiles. Each manifest line gives the file's path in
    ``bazel-out`` (its target), so neither the executable nor a symlink is read.
    ``listed`` keeps each directory's listing for the next test of the same command.
    """
    entries = runfiles.read_manifest(runfiles.manifest_of(declarer or executable))
    if not entries:
        return frozenset()
    declared: dict[str, set[str]] = {}
    for e in entries:
        rest = e.path.partition("/")[2]
        if rest.startswith("_solib_") and e.target and "/bin/_solib_" in e.target:
            directory, _, name = e.target.rpartition("/")
            declared.setdefault(directory, set()).add(name)
    out: set[str] = set()
    listed = {} if listed is None else listed
    for directory, names in declared.items():
        seen = listed.get(directory)
        if seen is None:
            # By its real path: the model finds files through the executable's real path.
            try:
                seen = listed[directory] = (os.path.realpath(directory),
                                            os.listdir(directory))
            except OSError:
                seen = listed[directory] = (directory, [])
        real, found = seen
        out.update(os.path.join(real, n) for n in found if n not in names)
    return frozenset(out)


def leftovers(executable: str, library_path: str | None = None,
              listed: dict[str, tuple[str, list[str]]] | None = None,
              *, declarer: str | None = None) -> tuple[Leftover, ...]:
    """The libraries ``executable`` would load only from undeclared files (none for a test
    that is not an ELF program); ``declarer`` as for :func:`undeclared`."""
    from bazel_ldfix.loader.resolve import LoaderFactory

    stale = undeclared(executable, listed, declarer=declarer)
    if not stale:
        return ()
    real = os.path.realpath(executable)
    try:
        info = elf.read_elf(real)
    except BadInputError:
        return ()
    loaders = LoaderFactory()
    env = Environment(library_path, os.path.dirname(real), loaders.cache_for(info))
    resolution = loaders.make_loader(info, env).resolve(real, info=info)
    out: dict[str, Leftover] = {}
    for lib in resolution.libraries:
        if lib.path is not None and among(lib.path, stale):
            out.setdefault(lib.name, Leftover(lib.name, lib.path))
    return tuple(out.values())


def among(path: str, stale: frozenset[str]) -> bool:
    """Whether the file ``path`` names (its directory's real path, its own name) is one of
    ``stale`` (from :func:`undeclared`)."""
    if not stale:
        return False
    directory, _, name = os.path.normpath(path).rpartition("/")
    return os.path.join(os.path.realpath(directory), name) in stale

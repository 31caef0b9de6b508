"""The loader model run on what Bazel would stage after a change, before the change is made.

Bazel stages each imported file in ``<bin>/_solib_<cpu>/<dir>/<name>``, where ``<dir>``
comes from the import's label and the file's directory (unchanged when a versioned file of
the same directory is imported) and ``<name>`` is the imported file's own name. The test's
RUNPATH reaches those directories through ``$ORIGIN``. So a temporary tree holding a copy of
the test executable at its place under ``bin`` and the ``_solib_`` directories (links to the
same files, less those the test's runfiles manifest does not declare, plus the names the
change adds) is what the loader would see, and the model resolves the copy there. Nothing
is run; the copy is only read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable

from bazel_ldfix import elf
from bazel_ldfix.bazel import declaredinputs
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.resolution import Environment


def missing_after(executable: str, added: Iterable[tuple[str, str]],
                  library_path: str | None, *, declarer: str | None = None
                  ) -> tuple[str, ...] | None:
    """The names the test would still miss once ``added`` are staged, or None when the
    test is not an ELF program under a ``bin`` directory (nothing to model).

    ``added`` holds ``(staged, file)``: ``_solib_<cpu>/<dir>/<name>`` as Bazel would stage
    it, and the file that name would lead to. ``executable`` may be a program the test
    runs from its runfiles; ``declarer`` is then the test, whose runfiles manifest says
    what Bazel declares (:func:`declaredinputs.undeclared`).
    """
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.loader.closure import LoaderFactory

    real = os.path.realpath(executable)
    at = real.rfind("/bin/")
    if at < 0:
        return None
    try:
        info = elf.read_elf(real)
    except BadInputError:
        return None
    bindir, rel = real[: at + len("/bin")], real[at + len("/bin/"):]
    with tempfile.TemporaryDirectory(prefix="bazel-ldfix-stage-") as tmp:
        copy = os.path.join(tmp, "bin", rel)
        os.makedirs(os.path.dirname(copy))
        try:
            os.link(real, copy)
        except OSError:
            shutil.copyfile(real, copy)     # another file system
        stale = declaredinputs.undeclared(executable, declarer=declarer)
        for solib in _listdir(bindir):
            if not solib.startswith("_solib_"):
                continue
            for directory in _listdir(os.path.join(bindir, solib)):
                source = os.path.join(bindir, solib, directory)
                target = os.path.join(tmp, "bin", solib, directory)
                os.makedirs(target, exist_ok=True)
                for entry in _listdir(source):
                    if declaredinputs.among(os.path.join(source, entry), stale):
                        continue    # left by an earlier build: Bazel stages it no more
                    os.symlink(os.path.realpath(os.path.join(source, entry)),
                               os.path.join(target, entry))
        for staged, file in added:
            link = os.path.join(tmp, "bin", staged)
            os.makedirs(os.path.dirname(link), exist_ok=True)
            if not os.path.lexists(link):
                os.symlink(os.path.realpath(file), link)
        loaders = LoaderFactory()
        env = Environment(library_path, os.path.dirname(copy), loaders.cache_for(info))
        resolution = loaders.make_loader(info, env).resolve(copy, info=info)
        return resolution.missing


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []

"""The shared objects of a test's runfiles tree, from its MANIFEST or a walk, and the
directory the test runs in."""

from __future__ import annotations

import os
import re
import stat
import struct
from collections.abc import Sequence

from bazel_ldfix import elf
from bazel_ldfix.bazel import runfiles
from bazel_ldfix.errors import (
    LdfixError,
)
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.verify import runs_as_program
from bazel_ldfix.outputbase import index
from bazel_ldfix.repair import fallback
from bazel_ldfix.repair.fallback import Skipped
from bazel_ldfix.repair.results import TestInput

# What one hostile file can make the reader or the model raise: reported as a skipped file.
# Anything else is a bug, and `bazel-ldfix test` falls back to the unchanged `bazel test`.
PER_FILE_ERRORS = (LdfixError, OSError, ValueError, IndexError, struct.error)


def tree_listing(executable: str, memo: Memo, *, read: bool = False
                  ) -> runfiles.TreeListing | None:
    """:func:`runfiles.tree_listing`, each symlink target looked at once per command.
    ``read``: the executable was just opened as a regular file (the target of the tree's
    link to it, when that link names it by this path, is then known to be no directory)."""
    targets = memo.remember("runfiles-targets", None, runfiles.Targets)
    if read and executable.startswith("/"):
        targets.plain.add(executable)
    if not memo.watching:
        return runfiles.tree_listing(executable, targets=targets,
                                     mount_names=memo.mounts().names)
    # The statuses of the tree's own files and directories are kept as one fact (a
    # thousand trees have some ten thousand directories); what it reads elsewhere (the
    # links' targets) as facts of their own.
    statuses: list[tuple[str, os.stat_result]] = []

    def seen(kind: str, path: str, st: os.stat_result | None) -> None:
        if st is not None:
            statuses.append((path, st))     # the tree's own, in the order read
        else:
            memo.keep(kind, path)           # read here: a target's status, an access

    listing = runfiles.tree_listing(executable, targets=targets,
                                    mount_names=memo.mounts().names, seen=seen)
    if listing is not None:
        memo.keep_tree(executable, statuses)
    return listing


def runfiles_libraries(runfiles_dir: str, expect: elf.ElfHeader, memo: Memo | None = None,
                        listing: runfiles.TreeListing | None = None
                        ) -> tuple[list[str], list[Skipped]]:
    """Shared objects in a runfiles tree that the loader of ``expect`` would accept, and
    the files named like libraries that it would not (each with the reason).

    The files are those a walk of the tree finds, or those of ``listing`` (the same paths,
    read from the tree's MANIFEST), taken in sorted order: of two paths to one file, the
    first is kept.
    """
    if listing is None and not os.path.isdir(runfiles_dir):
        return [], []
    memo = memo or Memo()
    if listing is not None:
        names = [path for path in listing.files
                 if ".so" in path and index.looks_like_library(path.rpartition("/")[2])]
        return examined([f"{runfiles_dir}/{path}" for path in names], expect, memo,
                         [listing.targets[path] for path in names])
    paths = sorted(path for found in index.walk(runfiles_dir, mounts=memo.mounts()).values()
                   for path in found)
    return examined(paths, expect, memo)


def runfiles_programs(runfiles_dir: str, executable: str, expect: elf.ElfHeader,
                      memo: Memo, listing: runfiles.TreeListing | None = None) -> list[str]:
    """The programs of a runfiles tree that a test can run (a ``cc_binary`` in its
    ``data``, which an ``sh_test`` or a ``py_test`` starts): each file, once by real path,
    that is not named like a library, has an execute bit, and is an ELF executable or PIE
    of ``expect``'s class and machine; the test's own ``executable`` is not one of them.

    Each is only read, never run. The test starts it as a process of its own, whose
    loader begins anew from that program: its DT_NEEDED, its RPATH or RUNPATH, and its
    ``$ORIGIN``. Files are taken in sorted order, as :func:`runfiles_libraries` takes them.
    """
    # The tests of a workspace share their programs, and most of their runfiles: each
    # file is looked at once per command, by the target its links name (a MANIFEST's) or
    # by its real path (a walk's), and remembered as its real path ("": no program).
    verdicts: dict[str, str] = memo.remember("runfiles-programs", expect, dict)
    own = memo.realpath(executable)
    out: list[str] = []
    seen = {own}
    if listing is not None:
        targets = listing.targets
        for rel in listing.files:
            if index.looks_like_library(rel.rpartition("/")[2]):
                continue
            target = targets.get(rel, "")
            path = f"{runfiles_dir}/{rel}"
            linked = target.startswith("/")
            real = verdicts.get(target if linked else path)
            if real is None:
                real = memo.link_realpath(path, target) if linked else memo.realpath(path)
                real = verdicts[target if linked else path] = \
                    real if _is_program(real, expect, memo) else ""
            if real and real not in seen:
                seen.add(real)
                out.append(path)
        return out
    if not os.path.isdir(runfiles_dir):
        return []
    paths = sorted(path for found in index.walk(
        runfiles_dir, lambda name: not index.looks_like_library(name),
        mounts=memo.mounts()).values() for path in found)
    for path in paths:
        real = memo.realpath(path)
        verdict = verdicts.get(real)
        if verdict is None:
            verdict = verdicts[real] = real if _is_program(real, expect, memo) else ""
        if verdict and real not in seen:
            seen.add(real)
            out.append(path)
    return out


def _is_program(path: str, expect: elf.ElfHeader, memo: Memo) -> bool:
    """Whether ``path`` is a program a test like ``expect`` could start: a regular file
    with an execute bit, an ELF executable or PIE of the same class and machine (the
    kernel would refuse any other, so no loader of it is started)."""
    try:
        st = memo.stat(path)
        if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
            return False
        header = memo.read_header(path)
        if (header.elf_class, header.machine) != (expect.elf_class, expect.machine):
            return False
        if header.type == elf.ET_EXEC:
            return True
        return header.type == elf.ET_DYN and runs_as_program(memo.read_elf(path))
    except PER_FILE_ERRORS:
        return False


def examined(paths: Sequence[str], expect: elf.ElfHeader, memo: Memo,
              targets: Sequence[str] | None = None) -> tuple[list[str], list[Skipped]]:
    """Of ``paths``, each file once (by real path, the first path kept), those the loader
    of ``expect`` would accept, and the others with the reason.

    ``targets``: each path's symlink target, from the ``MANIFEST`` of a tree it was shown
    to list (:func:`runfiles.tree_listing`; "" for an empty file). A link to an absolute
    target is then known without reading it: its real path is the target's, and a file
    the loader of ``expect`` accepted through one link to a target is accepted through
    every other (what is refused is examined again, through its own path, for its words).
    """
    out: list[str] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    accepted: set[str] | None = memo.remember("accepted-targets", expect, set) \
        if targets is not None else None
    for at, path in enumerate(paths):
        target = targets[at] if targets is not None else ""
        if target.startswith("/") and path.startswith("/"):
            real = memo.link_realpath(path, target)
        else:
            target = ""
            real = memo.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        if target and accepted is not None and target in accepted:
            out.append(path)
            continue
        verdict = fallback.examine(path, expect, memo)
        if isinstance(verdict, Skipped):
            skipped.append(verdict)
        else:
            out.append(path)
            if target and accepted is not None:
                accepted.add(target)
    return out, skipped


def manifest_libraries(executable: str, expect: elf.ElfHeader, memo: Memo | None = None
                        ) -> tuple[list[str], list[Skipped], list[str]]:
    """Shared objects the runfiles manifest stages that the loader of ``expect`` would
    accept, the staged files it would not (with the reason), and the staged shared objects
    that are not on disk."""
    memo = memo or Memo()
    entries = runfiles.read_manifest(runfiles.manifest_of(executable))
    staged = [entry.target for entry in entries or ()
              if entry.target is not None and SHARED_NAME.search(os.path.basename(entry.path))]
    absent = [target for target in staged if not os.path.exists(target)]
    gone = set(absent)
    out, skipped = examined([t for t in staged if t not in gone], expect, memo)
    return out, skipped, absent


SHARED_NAME = re.compile(r"\.so(?:\.[0-9][^/]*)?$")


def test_cwd(test: TestInput, runfiles_dir: str,
              listing: runfiles.TreeListing | None = None) -> str:
    """Bazel starts a test in ``<runfiles>/<workspace name>``: the first directory of the
    tree's root that holds the test's own path (from ``listing`` when there is one)."""
    package_path = test.label.split("//", 1)[-1].replace(":", "/").lstrip("/")
    if listing is not None and all(part not in ("", ".", "..")
                                   for part in package_path.split("/")):
        paths = listing.paths
        for name in listing.top:
            if f"{name}/{package_path}" in paths:   # listing.lexists
                return f"{runfiles_dir}/{name}"     # a plain name, as os.path.join gives
        return runfiles_dir
    try:
        names = sorted(os.listdir(runfiles_dir))
    except OSError:
        return os.path.dirname(test.executable)
    for name in names:
        if os.path.lexists(os.path.join(runfiles_dir, name, package_path)):
            return os.path.join(runfiles_dir, name)
    return runfiles_dir

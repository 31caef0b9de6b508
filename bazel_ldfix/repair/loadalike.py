"""Tests that load alike: one resolution, moved to the others' paths.

A monorepo's tests come in families: the ``cc_test``s of a package that link the same
libraries have executables with the same dynamic section, in the same directory, and
runfiles trees that differ only in the test's own entry. Their loads differ only in the
paths of their runfiles trees (the objects staged there, a ``$ORIGIN`` inside the tree, the
working directory) and of their executables. So one of them is resolved, and for each twin
the result is the same with those paths moved.

Twins are told apart by a :class:`Shape`: the executable's dynamic facts (everything the
loader reads of it but its path), the directory the program's ``$ORIGIN`` names, the working
directory and the staged objects relative to the tree, and a digest of the runfiles
manifest the tree was built from, the test's own entry set aside. A tree without a manifest
(not Bazel's), or with files the model sets aside, has no shape, and its test is always
resolved on its own.

A result is moved only when nothing in it can name the first test's paths in a way a move
would get wrong (:func:`movable`); after the move, every object staged in the tree and every
moved path that was found must be the same file in the twin's tree
(:meth:`Mover.same_files`). Otherwise the twin is resolved on its own. What the digest
cannot see is a file added by hand to a tree after Bazel made it under a name that is not a
shared object's (the staged objects are compared file by file).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import os
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.bazel import runfiles
from bazel_ldfix.fs.memo import Memo


@dataclass(frozen=True)
class Shape:
    """What one test's load depends on besides its own paths; see the module's docstring."""

    key: Hashable
    root: str          # the runfiles tree, with a trailing "/"
    executable: str
    staged: tuple[str, ...] = ()   # the shared objects of the tree, as the plan lists them

    @property
    def own_name(self) -> str:
        return os.path.basename(self.executable)


def shape(executable: str, info: elf.ElfInfo | None, host: elf.ElfHeader | None, cwd: str,
          extras: Sequence[str], skipped: Sequence[str], memo: Memo, *,
          digest: bytes | None = None, keys: dict[Hashable, Hashable] | None = None
          ) -> Shape | None:
    """The test's :class:`Shape`; None when its tree has no manifest to compare, or
    holds files the model set aside (rare, and their reasons name them).

    ``digest``: the :func:`manifest_digest` of the tree's ``MANIFEST`` when it was read
    already (else it is read here); ``keys``: the keys of the shapes made so far, so that
    twins share one copy of theirs."""
    if skipped:
        return None
    tree = executable + ".runfiles"
    root = tree + "/"
    if digest is None:
        digest = _manifest_digest(tree, executable, memo)
        if digest is None:
            return None
    facts = _facts(info) if info is not None else None

    def rel(path: str) -> str:
        return "\0" + path[len(root):] if path.startswith(root) else path

    origin = os.path.dirname(memo.realpath(executable))
    key: Hashable = (facts, host, origin, digest, rel(cwd) if cwd != tree else "\0",
                     tuple(rel(p) for p in extras))
    if keys is not None:
        key = keys.setdefault(key, key)
    return Shape(key, root, executable, tuple(extras))


# Every field of an object's ELF facts but its path.
_FACTS = tuple(f.name for f in dataclasses.fields(elf.ElfInfo) if f.name != "path")


def _facts(info: elf.ElfInfo) -> tuple[object, ...]:
    """What the loader reads of an object, its path aside."""
    return tuple([getattr(info, name) for name in _FACTS])


def _manifest_digest(tree: str, executable: str, memo: Memo) -> bytes | None:
    """:func:`manifest_digest` of the manifest the tree was made from (the copy Bazel
    leaves in it, else the one beside the executable when there is no tree)."""
    memo.opaque()   # a read not kept as a fact (see Memo.facts)
    path = os.path.join(tree, "MANIFEST") if os.path.isdir(tree) else \
        runfiles.manifest_of(executable)
    read = runfiles.read_regular(path)
    if read is None:
        return None
    return manifest_digest(read[1], executable, memo)


def manifest_digest(data: bytes, executable: str, memo: Memo) -> bytes:
    """A digest of the bytes of a runfiles manifest, the lines naming the executable
    itself reduced to their directory."""
    digest = hashlib.blake2b(digest_size=16)
    # The lines whose target (after their last space) is the executable: found by
    # searching for " <executable>" at a line's end, which is where the last space is
    # when the name holds none (a name with a space or a newline is no line's target).
    own: dict[int, tuple[int, bytes]] = {}  # line start -> (line end, line instead)
    for name in {os.fsencode(executable), os.fsencode(memo.realpath(executable))}:
        if b" " in name or b"\n" in name:
            continue
        needle = b" " + name
        at = data.find(needle)
        while at >= 0:
            end = at + len(needle)
            if end == len(data) or data[end] == 0x0A:
                start = data.rfind(b"\n", 0, at) + 1
                own[start] = (end, b"\0self " + data[start:at].rpartition(b"/")[0])
            at = data.find(needle, at + 1)
    done = 0
    for start in sorted(own):
        end, line = own[start]
        digest.update(data[done:start])
        digest.update(line)
        done = end
    digest.update(data[done:])
    digest.update(b"\n")
    return digest.digest()


class Mentions:
    """Whether any of some paths (search directories, files named in full) names a test's
    own files: starts with its executable's path, as its runfiles tree's path does.

    Only a path that starts so can be moved wrongly (a move only rewrites such paths); a
    path that reaches the tree another way (``/x/../tree``) is kept as it is, the same
    for every twin. Sorted once, each test is a binary search.
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self._sorted = sorted({p for p in paths if p})

    def name(self, shape: Shape) -> bool:
        at = bisect.bisect_left(self._sorted, shape.executable)
        return at < len(self._sorted) and self._sorted[at].startswith(shape.executable)


def movable(paths: Mentions, words: str, shape: Shape) -> bool:
    """Whether a result can be moved from or to ``shape``'s test: none of the ``paths`` it
    was found through names that test's files, nor do its messages (``words``)."""
    return not paths.name(shape) and shape.executable not in words


class Mover:
    """Moves the paths of one test's result to its twin's."""

    def __init__(self, source: Shape, target: Shape) -> None:
        self.source = source
        self.target = target
        self._root = source.root
        self._cut = len(source.root)
        self.found: list[tuple[str, str]] = []   # (source path, moved path) under the tree

    def path(self, path: str) -> str:
        if path.startswith(self._root):
            return self.target.root + path[self._cut:]
        if path == self.source.executable:
            return self.target.executable
        return path

    def found_path(self, path: str) -> str:
        """A path the loader took: moved, and remembered for :meth:`same_files`."""
        moved = self.path(path)
        if moved != path and path.startswith(self._root):
            self.found.append((path, moved))
        return moved

    def same_files(self, memo: Memo) -> bool:
        """Whether each object the first test took in its tree, and each object staged
        there, is the same file in the twin's (a tree changed by hand after Bazel made it
        is caught here)."""
        pairs = dict.fromkeys([*self.found, *zip(self.source.staged, self.target.staged,
                                                 strict=True)])
        for path, moved in pairs:
            real = memo.realpath(path)
            if memo.realpath(moved) == real:
                continue    # the same path: Bazel's trees are links to the same files
            key = memo.file_key(path)
            if key is None or memo.file_key(moved) != key:
                return False
        return True

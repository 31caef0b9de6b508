"""One test's outcome, kept with what could name its own files, to be moved to its twins
(:mod:`bazel_ldfix.repair.loadalike`)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.resolution import Via
from bazel_ldfix.repair import loadalike
from bazel_ldfix.repair.scanresult import Outcome

# How a found object's path came from the test's own paths (its tree, its working
# directory, a $ORIGIN) or from paths looked at apart for the move (see Models._resolve);
# the others name places outside the test (the cache, the system directories).
MOVABLE_VIA = frozenset({Via.RPATH, Via.RUNPATH, Via.LD_LIBRARY_PATH, Via.PATH})


def named_paths(info: elf.ElfInfo | None) -> tuple[str, ...]:
    """What an object names as places to load from: its search paths, its interpreter,
    and its DT_NEEDED entries that are paths."""
    if info is None:
        return ()
    return (*(info.rpath or "").split(":"), *(info.runpath or "").split(":"),
            info.interp or "", *(name for name in info.needed if "/" in name))


@dataclass(frozen=True)
class Clues:
    """What in one resolution could name a test's own files (see Models._resolve)."""

    paths: loadalike.Mentions       # search paths and files the objects name, cache hits
    words: str                  # messages
    needed: frozenset[str]      # every DT_NEEDED name of the objects listed

    def movable(self, shape: loadalike.Shape) -> bool:
        return loadalike.movable(self.paths, self.words, shape) and \
            shape.own_name not in self.needed


@dataclass(frozen=True)
class Template:
    """One test's outcome, kept to be moved to its twins (:mod:`loadalike`)."""

    outcome: Outcome
    shape: loadalike.Shape
    clues: Clues

    @functools.cached_property
    def _moving(self) -> tuple[int, ...]:
        """Which entries name the test's own paths (the others are the same for a twin)."""
        source = self.shape
        root, executable = source.root, source.executable

        def own(path: str) -> bool:
            return path.startswith(root) or path == executable

        return tuple(at for at, (path, name, requesters) in enumerate(self.outcome.entries)
                     if (path is not None and own(path)) or own(name)
                     or any(own(r) for r in requesters))

    def moved_to(self, shape: loadalike.Shape, memo: Memo) -> Outcome | None:
        """The outcome for the twin of ``shape``; None when it cannot be moved there."""
        if not self.clues.movable(shape):
            return None
        mover = loadalike.Mover(self.shape, shape)
        move = mover.path
        outcome = self.outcome
        entries = list(outcome.entries)
        for at in self._moving:
            path, name, requesters = entries[at]
            entries[at] = (mover.found_path(path) if path is not None else None, move(name),
                           tuple(move(r) for r in requesters))
        skipped = tuple(dataclasses.replace(s, path=move(s.path)) for s in outcome.skipped)
        if not mover.same_files(memo):
            return None
        return Outcome(outcome.header, tuple(entries), outcome.error, skipped,
                        outcome.program)

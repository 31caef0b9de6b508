"""Where shared objects live under an output_base, and which copy a test should get.

One walk collects every file whose name looks like a shared object into an index
(name -> paths). Symlinked directories are followed, each directory (by device and inode)
once, so symlinked external repositories are searched and symlink cycles end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError


@dataclass(frozen=True)
class PassedOver:
    path: str
    reason: str


@dataclass(frozen=True)
class Choice:
    """The directory chosen for one soname, and every other candidate with the reason."""

    soname: str
    dir: str | None
    path: str | None
    passed_over: tuple[PassedOver, ...]


def looks_like_library(name: str) -> bool:
    """``libfoo.so``, ``libfoo.so.1.2``: what the loader could be asked for by SONAME."""
    return ".so" in name and (name.endswith(".so") or ".so." in name)


def walk(root: str, wanted: Callable[[str], bool] = looks_like_library,
         on_error: Callable[[str, OSError], None] | None = None) -> dict[str, list[str]]:
    """Every file under ``root`` whose name ``wanted`` accepts, as name -> paths.

    Paths are as reached from ``root`` (through symlinks, not resolved). Directories are
    visited in sorted order, so the result is deterministic.
    """
    found: dict[str, list[str]] = {}
    try:
        st = os.stat(root)
    except OSError as exc:
        raise BadInputError(f"{root}: {exc.strerror}") from None
    seen: set[tuple[int, int]] = set()
    # Depth first, in sorted order; a directory reached twice (through a symlink) is
    # walked where it is reached first.
    stack = [(root, (st.st_dev, st.st_ino))]
    while stack:
        directory, key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError as exc:
            if on_error:
                on_error(directory, exc)
            continue
        for entry in entries:
            try:
                if entry.is_dir():  # follows symlinks
                    info = entry.stat(follow_symlinks=entry.is_symlink())
                    stack.append((entry.path, (info.st_dev, info.st_ino)))
                elif wanted(entry.name):
                    found.setdefault(entry.name, []).append(entry.path)
            except OSError as exc:
                if on_error:
                    on_error(entry.path, exc)
    for paths in found.values():
        paths.sort()
    return found


def check_candidate(path: str, expect: elf.ElfHeader) -> str | None:
    """Why the loader would not take ``path`` for a program like ``expect`` (None: it would).

    The loader's own decision (``loader.verify``), plus one rule of this search: only a
    shared object is worth pointing LD_LIBRARY_PATH at.
    """
    from bazel_ldfix.loader import verify

    verdict = verify(path, expect)
    if verdict.info is not None:
        return None if verdict.info.header.type == elf.ET_DYN else "not a shared object"
    if verdict.fatal:
        return f"not loadable: {verdict.reason}"
    return verdict.reason or "not loadable"


def choose(soname: str, candidates: Iterable[str], expect: elf.ElfHeader,
           preferred: Sequence[str] = ()) -> Choice:
    """Pick the directory a test should search for ``soname``.

    Candidates the loader would skip or fail on are passed over first. Among the rest, a
    directory in ``preferred`` (the directories of the libraries the test was linked
    against) wins, in the order given; otherwise the shortest path, then the first in
    sort order. The same file reached through two paths counts once.
    """
    passed: list[PassedOver] = []
    good: list[str] = []
    files: dict[tuple[int, int], str] = {}
    for path in sorted(set(candidates)):
        reason = check_candidate(path, expect)
        if reason is not None:
            passed.append(PassedOver(path, reason))
            continue
        st = os.stat(path)
        file_id = (st.st_dev, st.st_ino)
        if file_id in files:
            passed.append(PassedOver(path, f"the same file as {files[file_id]}"))
            continue
        files[file_id] = path
        good.append(path)
    if not good:
        return Choice(soname, None, None, tuple(passed))
    rank = {d: i for i, d in enumerate(reversed(preferred))}

    def order(path: str) -> tuple[int, int, str]:
        directory = os.path.dirname(path)
        return (-rank.get(directory, -1), path.count("/"), path)

    good.sort(key=order)
    best = good[0]
    why = ("beside a library the test links" if os.path.dirname(best) in rank
           else "chosen by the shortest path")
    for other in good[1:]:
        passed.append(PassedOver(other, f"another copy was preferred ({why}): {best}"))
    return Choice(soname, os.path.dirname(best), best, tuple(passed))


def locate(sonames: Iterable[str], roots: Sequence[str], expect: elf.ElfHeader,
           preferred: Sequence[str] = (),
           on_error: Callable[[str, OSError], None] | None = None) -> dict[str, Choice]:
    """Find each soname: first beside the ``preferred`` directories, then by one walk.

    Most versioned files sit beside the library the test links (the target of its
    ``_solib_*`` symlink), so the walk only happens for names still missing.
    """
    names = list(dict.fromkeys(sonames))
    result: dict[str, Choice] = {}
    for name in names:
        near = [os.path.join(d, name) for d in preferred if os.path.isfile(os.path.join(d, name))]
        if near:
            choice = choose(name, near, expect, preferred)
            if choice.dir is not None:
                result[name] = choice
    rest = {n for n in names if n not in result}
    if rest:
        index: dict[str, list[str]] = {}
        for root in roots:
            if os.path.isdir(root):
                for name, paths in walk(root, rest.__contains__, on_error).items():
                    index.setdefault(name, []).extend(paths)
        for name in sorted(rest):
            result[name] = choose(name, index.get(name, ()), expect, preferred)
    return {n: result[n] for n in names}


def preferred_dirs(paths: Iterable[str]) -> tuple[str, ...]:
    """The real directories behind libraries (``_solib_*`` entries are symlinks)."""
    out: dict[str, None] = {}
    for path in paths:
        out.setdefault(os.path.dirname(os.path.realpath(path)), None)
    return tuple(out)

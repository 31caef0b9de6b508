"""Where shared objects live under an output_base, and which copy a test should get.

One walk collects every file whose name looks like a shared object into an index
(name -> directories). Symlinked directories are followed, each directory (by device and
inode) once, so symlinked external repositories are searched and symlink cycles end.
Nothing is pruned by name: any directory can be put on LD_LIBRARY_PATH, so none can be
skipped for what it is called; only directories already walked are.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, NotElfError
from bazel_ldfix.fs.mounts import Mounts
from bazel_ldfix.loader import cuda as cudafiles
from bazel_ldfix.loader.cuda import NO_HOST_DRIVER, CudaKind, HostDriver
from bazel_ldfix.loader.resolution import PassedOver, PassReason
from bazel_ldfix.loader.verify import verify_in
from bazel_ldfix.outputbase import checked

if TYPE_CHECKING:
    from bazel_ldfix.fs.memo import Memo
    from bazel_ldfix.store import Store

#: ``progress(files_scanned, repository)``, called during a walk: first ``(0, "")``, then
#: every few hundred directories, last with ``repository`` None when the walk ends.
ProgressFn = Callable[[int, "str | None"], None]
OnError = Callable[[str, OSError], None]


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


# -- directory identity ---------------------------------------------------------------------

# -- the walk -------------------------------------------------------------------------------

_PROGRESS_EVERY = 256  # directories between two progress calls


def scan(root: str, wanted: Callable[[str], bool] = looks_like_library,
         on_error: OnError | None = None, *, progress: ProgressFn | None = None,
         mounts: Mounts | None = None) -> dict[str, list[str]]:
    """Every file under ``root`` whose name ``wanted`` accepts, as name -> directories.

    One ``os.scandir`` pass, depth first, each directory's subdirectories in sorted order.
    Symlinked directories are followed; a directory reached twice (through a symlink) is
    walked where it is reached first, so the result is deterministic and cycles end.
    Directories are as reached from ``root`` (through symlinks, not resolved), sorted.

    A directory is known by (device, inode). readdir gives the inode and the file type of
    every entry without a stat; only symlinks (to follow them), possible mount points and
    directories on filesystems where readdir's inode cannot be trusted are stat'ed (see
    :class:`Mounts`). ``find -L`` stats every entry.
    """
    try:
        st = os.stat(root)
    except OSError as exc:
        raise BadInputError(f"{root}: {exc.strerror}") from None
    if mounts is None:
        mounts = Mounts.read()
    uniform, mount_names = mounts.uniform, mounts.names
    found: dict[str, list[str]] = {}
    seen: set[tuple[int, int]] = set()
    files = walked = 0
    # (path, device, inode, repository; None for the root): the device is also that of
    # the children that are neither symlinks nor mount points.
    stack: list[tuple[str, int, int, str | None]] = [(root, st.st_dev, st.st_ino, None)]
    if progress is not None:
        progress(0, "")
    while stack:
        directory, dev, ino, repo = stack.pop()
        if (dev, ino) in seen:
            continue
        seen.add((dev, ino))
        careful = dev not in uniform
        subdirs: list[tuple[str, str, int, int]] = []
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    files += 1
                    try:
                        if entry.is_dir():  # follows symlinks; d_type for the others
                            name = entry.name
                            if entry.is_symlink():
                                info = entry.stat()
                                subdirs.append((name, entry.path, info.st_dev, info.st_ino))
                            elif careful or name in mount_names:
                                info = entry.stat(follow_symlinks=False)
                                subdirs.append((name, entry.path, info.st_dev, info.st_ino))
                            else:
                                subdirs.append((name, entry.path, dev, entry.inode()))
                        elif wanted(entry.name):
                            found.setdefault(entry.name, []).append(directory)
                    except OSError as exc:
                        if on_error:
                            on_error(entry.path, exc)
        except OSError as exc:
            if on_error:
                on_error(directory, exc)
            continue
        # Depth first in sorted order: push in reverse, so the first name is walked first.
        subdirs.sort(reverse=True)
        if repo is None:  # the root: each subdirectory is a repository
            stack.extend((path, d, i, name) for name, path, d, i in subdirs)
        else:
            stack.extend((path, d, i, repo) for _name, path, d, i in subdirs)
        walked += 1
        if progress is not None and walked % _PROGRESS_EVERY == 0:
            progress(files, repo or "")
    if progress is not None:
        progress(files, None)
    for dirs in found.values():
        dirs.sort()
    return found


def walk(root: str, wanted: Callable[[str], bool] = looks_like_library,
         on_error: OnError | None = None, *, progress: ProgressFn | None = None,
         mounts: Mounts | None = None) -> dict[str, list[str]]:
    """Every file under ``root`` whose name ``wanted`` accepts, as name -> paths.

    Paths are as reached from ``root`` (through symlinks, not resolved), sorted; see
    :func:`scan` for the walk.
    """
    found = scan(root, wanted, on_error, progress=progress, mounts=mounts)
    return {name: sorted(os.path.join(d, name) for d in dirs) for name, dirs in found.items()}


class Progress:
    """Progress of a long walk on a terminal: files scanned and the current repository.

    Silent unless ``stream`` is a terminal, and until the walk has taken ``delay`` seconds;
    at most ten updates a second; the line is erased when the walk ends.
    """

    def __init__(self, stream: TextIO, delay: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.delay = delay
        self.clock = clock
        self.active = stream.isatty()
        self.started: float | None = None
        self.shown = 0.0

    def __call__(self, files: int, repository: str | None) -> None:
        if not self.active:
            return
        now = self.clock()
        if self.started is None:
            self.started, self.shown = now, 0.0
            return
        if repository is None:
            if self.shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            self.started = None
            return
        if now - self.started < self.delay or now - self.shown < 0.1:
            return
        self.shown = now
        where = f" (in {repository})" if repository else ""
        self.stream.write(f"\r\x1b[Kbazel-ldfix: scanning {files:,} files{where}")
        self.stream.flush()


# -- choosing among candidates --------------------------------------------------------------

def check_candidate(path: str, expect: elf.ElfHeader, memo: Memo | None = None,
                    cuda: HostDriver = NO_HOST_DRIVER) -> PassedOver | None:
    """Why the loader would not take ``path`` for a program like ``expect`` (None: it would).

    The loader's own decision (``loader.verify``, once per file with a ``memo``), plus two
    rules of this search: only a shared object is worth pointing LD_LIBRARY_PATH at, and
    never a CUDA stub or a compat driver this host (``cuda``) cannot use
    (:mod:`bazel_ldfix.loader.cuda`).
    """
    verdict = verify_in(memo, path, expect)
    if verdict.info is not None:
        if verdict.info.header.type != elf.ET_DYN:
            return PassedOver(path, PassReason.NOT_SHARED_OBJECT, "not a shared object")
        real = memo.realpath(path) if memo else os.path.realpath(path)
        found = cudafiles.classify(path, real, cuda, verdict.info)
        if found is None or found.usable:
            return None
        kind = (PassReason.CUDA_STUB if found.kind is CudaKind.STUB
                else PassReason.CUDA_COMPAT)
        return PassedOver(path, kind, found.reason)
    if verdict.fatal:
        return PassedOver(path, PassReason.NOT_LOADABLE, f"not loadable: {verdict.reason}")
    return PassedOver(path, PassReason.NOT_LOADABLE, verdict.reason or "not loadable")


def choose(soname: str, candidates: Iterable[str], expect: elf.ElfHeader,
           preferred: Sequence[str] = (), memo: Memo | None = None,
           cuda: HostDriver = NO_HOST_DRIVER) -> Choice:
    """Pick the directory a test should search for ``soname``.

    Candidates the loader would skip or fail on are passed over first. Among the rest, a
    directory in ``preferred`` (the directories of the libraries the test was linked
    against) wins, in the order given; otherwise the shortest path, then the first in
    sort order. The same file reached through two paths counts once.
    """
    passed: list[PassedOver] = []
    good: list[str] = []
    for path in sorted(set(candidates)):
        refused = check_candidate(path, expect, memo, cuda)
        if refused is None:
            good.append(path)
        else:
            passed.append(refused)
    if not good:
        return Choice(soname, None, None, tuple(passed))
    # A directory ranks by where it stands in ``preferred``, as named there, else by its
    # real path (a walk reaches directories through symlinked repositories).
    realpath = memo.realpath if memo else os.path.realpath
    exact, real = (memo.remember("ranks", tuple(preferred), lambda: _ranks(preferred, realpath))
                   if memo else _ranks(preferred, realpath))

    def rank(path: str) -> int:
        directory = os.path.dirname(path)
        return exact.get(directory, real.get(realpath(directory), len(preferred)))

    good.sort(key=lambda p: (rank(p), p.count("/"), p))
    kept: list[str] = []
    files: dict[tuple[int, int], str] = {}
    status = memo.stat if memo else os.stat
    for path in good:  # the same file through two paths counts once, where it ranks best
        st = status(path)
        file_id = (st.st_dev, st.st_ino)
        if file_id in files:
            passed.append(PassedOver(path, PassReason.SAME_FILE,
                                      f"the same file as {files[file_id]}"))
            continue
        files[file_id] = path
        kept.append(path)
    best = kept[0]
    why = ("beside a library the test links" if rank(best) < len(preferred)
           else "chosen by the shortest path")
    for other in kept[1:]:
        passed.append(PassedOver(other, PassReason.NOT_PREFERRED,
                                 f"another copy was preferred ({why}): {best}"))
    return Choice(soname, os.path.dirname(best), best, tuple(passed))


def with_others(choice: Choice, paths: Iterable[str], expect: elf.ElfHeader,
                memo: Memo | None = None, cuda: HostDriver = NO_HOST_DRIVER) -> Choice:
    """``choice`` with every other copy in ``paths`` it did not look at (it was found
    beside the test's libraries, so nothing was walked) passed over, with the reason."""
    if choice.path is None:
        return choice
    seen = {choice.path, *(p.path for p in choice.passed_over)}
    status = memo.stat if memo else os.stat
    try:
        st = status(choice.path)
        chosen = (st.st_dev, st.st_ino)
    except OSError:
        return choice
    passed = list(choice.passed_over)
    for path in sorted(set(paths) - seen):
        refused = check_candidate(path, expect, memo, cuda)
        if refused is not None:
            passed.append(refused)
            continue
        try:
            st = status(path)
        except OSError:
            continue
        passed.append(PassedOver(path, PassReason.SAME_FILE, f"the same file as {choice.path}")
                      if (st.st_dev, st.st_ino) == chosen else
                      PassedOver(path, PassReason.NOT_PREFERRED, "another copy was preferred "
                                 f"(beside a library the test links): {choice.path}"))
    return dataclasses.replace(choice, passed_over=tuple(passed))


def _ranks(preferred: Sequence[str], realpath: Callable[[str], str]
           ) -> tuple[dict[str, int], dict[str, int]]:
    """Each preferred directory's rank, by its name as given and by its real path."""
    exact = {d: i for i, d in reversed(list(enumerate(preferred)))}
    real: dict[str, int] = {}
    for i, d in enumerate(preferred):
        real.setdefault(realpath(d), i)
    return exact, real


# -- locating -------------------------------------------------------------------------------

def candidates(sonames: Iterable[str], roots: Sequence[str], *, store: Store | None = None,
               on_error: OnError | None = None, progress: ProgressFn | None = None,
               mounts: Mounts | None = None, memo: Memo | None = None,
               cached_only: bool = False) -> dict[str, list[str]]:
    """Every file named like one of ``sonames`` under ``roots``, as name -> sorted paths.

    Without ``store``, one walk per root collects only these names. With it, the index
    of each root (every library-like name) comes from the store when the cache is valid
    (see :mod:`bazel_ldfix.outputbase.indexcache`), else from one walk that rewrites it. A cached
    path that no longer exists makes the cache stale, and the root is walked again.
    ``cached_only``: a root without a valid cached index is not walked (it adds nothing).
    """
    names = set(sonames)
    out: dict[str, list[str]] = {n: [] for n in sorted(names)}
    if not names:
        return out
    for root in roots:
        if memo is not None:
            # Kept as the root's index state (indexcache.state, which registers how that
            # fact is read): the same names are found while it holds, short of a change
            # deep inside a repository that Bazel did not make (what the cached index
            # cannot see either).
            from bazel_ldfix.outputbase import indexcache

            memo.keep("dir", root)
            memo.keep("index", root)
        if not os.path.isdir(root):
            continue
        found: Mapping[str, list[str]]
        if cached_only:
            # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
            from bazel_ldfix.outputbase import indexcache

            hit = indexcache.load(store, root, indexcache.state(root), names) \
                if store else None
            found = hit or {}
        elif store is None:
            found = scan(root, names.__contains__, on_error, progress=progress, mounts=mounts)
        else:
            found = _cached_scan(root, names, store, on_error, progress, mounts)
        for name, dirs in found.items():
            if name in names:
                out[name] += [os.path.join(d, name) for d in dirs]
    return {n: sorted(paths) for n, paths in out.items()}


def _cached_scan(root: str, names: set[str], store: Store, on_error: OnError | None,
                 progress: ProgressFn | None, mounts: Mounts | None) -> Mapping[str, list[str]]:
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.outputbase import indexcache

    state = indexcache.state(root)
    hit = indexcache.load(store, root, state, names)
    if hit is not None and all(os.path.lexists(os.path.join(d, n))
                               for n, dirs in hit.items() for d in dirs):
        return hit
    found = scan(root, looks_like_library, on_error, progress=progress, mounts=mounts)
    indexcache.save(store, root, state, found)
    return found


def locate(sonames: Iterable[str], roots: Sequence[str], expect: elf.ElfHeader,
           preferred: Sequence[str] = (),
           on_error: OnError | None = None, *, store: Store | None = None,
           progress: ProgressFn | None = None, memo: Memo | None = None,
           cuda: HostDriver = NO_HOST_DRIVER) -> dict[str, Choice]:
    """Find each soname: first beside the ``preferred`` directories, then by one walk.

    Most versioned files sit beside the library the test links (the target of its
    ``_solib_*`` symlink, see :func:`preferred_dirs`; the directories of its loaded
    libraries, see :func:`preferred_dirs`), so the walk (or the cached index, with
    ``store``) is only consulted for names still missing; when none is, nothing is
    walked at all. ``progress`` sees the walk, if there is one (see :class:`Progress`).
    """
    names = list(dict.fromkeys(sonames))
    result: dict[str, Choice] = {}
    beside: dict[str, list[str]] = {}
    if memo is not None:
        # One listing per preferred directory, rather than one stat per name and directory;
        # the names a listing may hold are found by intersecting sets (``Listing.lacks``:
        # a name listed under any case, "." and ".."), so a thousand names against a
        # thousand directories cost what the directories hold, not their product.
        by_fold: dict[str, list[str]] = {}
        for n in names:
            by_fold.setdefault(n.casefold(), []).append(n)
        always = [n for n in names if n in (".", "..")]
        for d in preferred:
            listing = memo.listing(d)
            if listing.names is None:
                maybe: Iterable[str] = names
            elif listing.missing_errno:
                maybe = ()
            else:
                maybe = [*always, *(n for f in by_fold.keys() & listing.folded
                                    for n in by_fold[f] if n not in always)]
            for name in maybe:
                beside.setdefault(name, []).append(d)
    for name in names:
        isfile = memo.isfile if memo else os.path.isfile
        near = [os.path.join(d, name) for d in (beside.get(name, ()) if memo else preferred)
                if isfile(os.path.join(d, name))]
        if near:
            choice = choose(name, near, expect, preferred, memo, cuda)
            if choice.dir is not None:
                result[name] = choice
    rest = [n for n in names if n not in result]
    if rest:
        found = candidates(rest, roots, store=store, on_error=on_error,
                           progress=progress, memo=memo)
        for name in sorted(rest):
            result[name] = choose(name, found[name], expect, preferred, memo, cuda)
    return {n: result[n] for n in names}


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except (OSError, ValueError):
        return None


def preferred_dirs(paths: Iterable[str],
                   realpath: Callable[[str], str] = os.path.realpath,
                   readlink: Callable[[str], str | None] | None = None) -> tuple[str, ...]:
    """The directories to look in first for what the libraries at ``paths`` need.

    Each library's symlink chain is followed a link at a time, and each directory is kept
    as the link names it, then the real one. A test's ``_solib_*`` entry links to the file
    under ``output_base/external`` (a path that reads well in a --test_env), whose directory
    holds the versioned file as a rule; the unversioned "dev" link may lead on into another
    directory, where the file really is.
    """
    out: dict[str, None] = {}
    for path in paths:
        hop = path
        for _ in range(40):  # the kernel gives up (ELOOP) after 40 links in a chain
            target = (readlink or _readlink)(hop)
            if target is None:
                break  # not a link (or gone): the chain ends here
            hop = os.path.join(os.path.dirname(hop), target)
            out.setdefault(os.path.dirname(hop), None)
        out.setdefault(os.path.dirname(realpath(path)), None)
    return tuple(out)


def test_dirs(staged: Iterable[str], loaded: Iterable[str],
              chain: Callable[[str], Sequence[str]] | None = None) -> tuple[str, ...]:
    """The directories to look in first for what one test misses, best first.

    This is the one place that decides it, for the repair, ``diagnose`` and ``locate``:
    the directories the test's ``_solib_*`` entries lead to (what its BUILD imports), then
    those of its other staged libraries and of the libraries it loads (``loaded``), each
    path's symlink chain followed by ``chain`` (:func:`preferred_dirs` of one path).
    """
    follow = chain or (lambda p: preferred_dirs([p]))
    out: dict[str, None] = {}
    later = []
    for paths in (loaded, staged):
        for path in paths:
            if "/_solib_" in path:
                for directory in follow(path):
                    if directory not in out:
                        out[directory] = None
            else:
                later.append(path)
    for path in later:
        for directory in follow(path):
            if directory not in out:
                out[directory] = None
    return tuple(out)


def renamed(soname: str, dirs: Sequence[str], expect: elf.ElfHeader, memo: Memo,
            cuda: HostDriver = NO_HOST_DRIVER) -> Choice | None:
    """A library in ``dirs`` whose SONAME is ``soname`` though no file is named so (a
    ``libfoo-3.17.0.so`` whose SONAME is ``libfoo.so.3``): the loader, which searches by
    file name, never finds it, so only a link of that name can give it.

    A SONAME that does not look like a library's name (TensorRT's builder resource says
    ``do_not_link_against_nvinfer_builder_resource``) is never given this way.
    """
    if not looks_like_library(soname) or soname.startswith("do_not_link"):
        return None
    found: list[str] = []
    for directory in dirs:
        names = memo.listing(directory).names or frozenset()
        for name in sorted(names):
            path = os.path.join(directory, name)
            if name == soname or not looks_like_library(name) or not memo.isfile(path):
                continue
            if check_candidate(path, expect, memo, cuda) is not None:
                continue
            try:
                if memo.read_elf(path).soname == soname:
                    found.append(path)
            except BadInputError:
                continue
    if not found:
        return None
    # The file itself rather than Bazel's staging links to it (the same file, by the name
    # a person finds it under).
    best = next((p for p in found if "/_solib_" not in p and ".runfiles/" not in p), found[0])
    real = memo.realpath(best)
    passed = tuple(PassedOver(p, PassReason.SAME_FILE, f"the same file as {best}")
                   if memo.realpath(p) == real else
                   PassedOver(p, PassReason.NOT_PREFERRED, f"another copy was preferred: {best}")
                   for p in found if p != best)
    return Choice(soname, os.path.dirname(best), best, passed)


# -- every copy, for `bazel-ldfix locate` ---------------------------------------------------

@dataclass(frozen=True)
class Copy:
    """One file named like a soname: its ELF class and machine, and whether it would load."""

    path: str
    dir: str
    elf_class: int | None   # elf.ELFCLASS32 or ELFCLASS64; None: not an ELF file
    machine: int | None     # e_machine; None: not an ELF file
    reason: str | None      # why a program like the one given could not load it; None: it could
    # Why a copy that would load is not the one the repair takes (None: it is, or it
    # would not load).
    passed: str | None = None

    @property
    def class_name(self) -> str | None:
        if self.elf_class is None:
            return None
        return {elf.ELFCLASS32: "ELFCLASS32", elf.ELFCLASS64: "ELFCLASS64"}.get(
            self.elf_class, f"ELFCLASS{self.elf_class}")

    @property
    def machine_name(self) -> str | None:
        return None if self.machine is None else elf.machine_name(self.machine)


def copies(sonames: Iterable[str], roots: Sequence[str], expect: elf.ElfHeader, *,
           preferred: Sequence[str] = (), store: Store | None = None,
           on_error: OnError | None = None, progress: ProgressFn | None = None,
           cuda: HostDriver = NO_HOST_DRIVER) -> dict[str, tuple[Copy, ...]]:
    """Every copy of each soname under ``roots``, best first, ranked as the repair ranks
    them (:func:`choose`): a copy a program like ``expect`` would load (class, machine and
    the loader's other checks), one in ``preferred`` first (:func:`test_dirs`: where what
    the tests import leads), then the shortest path, then sort order. Each other copy that
    would load says why it is not the one. A soname found nowhere maps to ``()``.
    """
    names = list(dict.fromkeys(sonames))
    found = candidates(names, roots, store=store, on_error=on_error, progress=progress)
    out: dict[str, tuple[Copy, ...]] = {}
    for name in names:
        choice = choose(name, found[name], expect, preferred, cuda=cuda)
        why = {p.path: p.reason for p in choice.passed_over
               if p.kind in (PassReason.NOT_PREFERRED, PassReason.SAME_FILE)}
        order = {p.path: at for at, p in enumerate(choice.passed_over)}
        listed = [dataclasses.replace(_copy(path, expect, cuda), passed=why.get(path))
                  for path in found[name]]
        listed.sort(key=lambda c: (c.path != choice.path, c.reason is not None,
                                   order.get(c.path, 0), c.path.count("/"), c.path))
        out[name] = tuple(listed)
    return out


def _copy(path: str, expect: elf.ElfHeader, cuda: HostDriver = NO_HOST_DRIVER) -> Copy:
    try:
        header: elf.ElfHeader | None = elf.read_header(path)
    except (NotElfError, BadInputError):
        header = None
    return Copy(path, os.path.dirname(path),
                None if header is None else header.elf_class,
                None if header is None else header.machine,
                _reason(check_candidate(path, expect, cuda=cuda)))


def _reason(refused: PassedOver | None) -> str | None:
    return None if refused is None else refused.reason


def external_root(output_base: str) -> str:
    """``output_base/external``, where the fetched repositories are; BadInputError, in the
    user's words, when there is none to search."""
    root = os.path.join(checked(output_base), "external")
    if not os.path.isdir(root):
        # What a Bazel server writes into its output_base on start (Bazel 4 to 8).
        started = any(os.path.lexists(os.path.join(output_base, n))
                      for n in ("server", "install"))
        if not started:
            raise BadInputError(f"{root} does not exist: is {output_base} a Bazel "
                                "output_base?")
        raise BadInputError(f"no external repository has been fetched into {output_base} yet "
                            "(it has no external/ directory): build or fetch first, e.g. "
                            "`bazel fetch //...`, then run locate again")
    return root

"""What one command learns about files, remembered for the rest of that command.

A monorepo's tests share a handful of libraries: the same files are checked by the loader
model again and again, once per test that loads them. What depends only on a file is
remembered here, keyed by the file's identity (device, inode, size, modification time), so
the same file reached through another path (a runfiles symlink, a ``_solib_*`` link) is
read once, and a file replaced while the command runs is read again:

* its ELF facts (``elf.read_elf``, ``elf.read_header``, ``elf.version_definitions``);
* through :meth:`Memo.per_file`, what a layer above derives from one file alone (the
  loader's verdict on it as a candidate for a kind of program);
* a directory's listing, so that a name that is not there is known to be absent without an
  ``open`` (the loader model tries every name in every hwcaps subdirectory of every search
  directory), and real paths;
* through :meth:`Memo.remember`, what the loader model derives from these alone: a search
  list's directories, a search of them for a name.

Listings, real paths and searches are by path: like the rest of one repair, they take the
directories as they were when first looked at. A memo lives as long as one command; nothing
is written anywhere. Failures are not remembered (they carry the path in their words, and
they are rare): each one is met anew.

What the memo keeps while it watches is :mod:`bazel_ldfix.fs.facts`.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from bazel_ldfix import elf
from bazel_ldfix.fs.facts import (
    PROBES,
    Facts,
    Listing,
    fact_of,
    formatted,
    holds,
    identity,
    is_dir,
    list_now,
    read_link,
    regular_status,
    tree_fact,
)
from bazel_ldfix.fs.mounts import Mounts

FileKey = tuple[int, int, int, int]   # st_dev, st_ino, st_size, st_mtime_ns


_PARENTS = 4   # how far up a listing already known can tell that a directory is absent


_T = TypeVar("_T")


def file_key(path: str) -> FileKey | None:
    """The identity of the regular file at ``path`` (symlinks followed); None otherwise."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class Memo:
    """Per-command memory of file facts; see the module's docstring."""

    def __init__(self) -> None:
        self._elf: dict[FileKey, elf.ElfInfo] = {}
        self._layouts = elf.Layouts()   # the executables of twin tests are read as one
        self._headers: dict[FileKey, elf.ElfHeader] = {}
        self._versions: dict[FileKey, tuple[str, ...]] = {}
        self._listings: dict[str, Listing] = {}
        self._parents: dict[str, str] = {}   # a directory -> its real parent ("": none)
        self._mounts: Mounts | None = None
        self._tables: dict[str, dict[Hashable, Any]] = {}
        self._real: dict[str, str] = {}
        self._relative: dict[int, tuple[tuple[str, ...], bool]] = {}
        # While another process may be changing what is read (see watch): each fact read.
        self._watched: Facts | None = None
        self._moved = False     # a fact read twice while watched, differently
        self._opaque = False    # something was read that is not kept as a fact
        self.hits = 0
        self.misses = 0

    def remember(self, table: str, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, once per ``key`` in ``table``: for results that are a function
        of the key and of files this command does not change (a search of directories)."""
        entries = self._tables.setdefault(table, {})
        try:
            found: _T = entries[key]
        except KeyError:
            self.misses += 1
            found = entries[key] = compute()
            return found
        self.hits += 1
        return found

    def file_key(self, path: str) -> FileKey | None:
        """:func:`file_key`, through the real path: a runfiles path is a chain of
        symlinks that ``stat`` would follow anew each time."""
        real = self.realpath(path)
        st, fact = regular_status(real)
        if self._watched is not None:
            self._keep_fact("key", real, fact)
        return None if st is None else (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def watch(self) -> None:
        """From now on, keep each fact this memo reads of the file system and remembers
        (a directory's names, a link's target, whether a path is a directory, which file
        a path names, ...), for :meth:`still_true` and :meth:`facts`: while Bazel builds,
        a directory it writes into later may be read before it has everything; and a
        repair is only given again while everything it read is as it was."""
        self._watched = {}
        self._moved = False

    def _keep(self, kind: str, path: str, value: object) -> None:
        self._keep_fact(kind, path, fact_of(kind, value))

    def _keep_fact(self, kind: str, path: str, fact: str) -> None:
        assert self._watched is not None
        facts = self._watched.get(kind)
        if facts is None:
            facts = self._watched[kind] = {}
        if facts.setdefault(path, fact) != fact:
            self._moved = True

    def keep(self, kind: str, path: str) -> None:
        """Keep a fact the caller read itself (one of :data:`PROBES`), as it is now. A kind
        that no one registered cannot be read again: what was read is then not all kept."""
        if self._watched is not None and path not in self._watched.get(kind, ()):
            probe = PROBES.get(kind)
            if probe is None:
                self.opaque()
                return
            self._keep_fact(kind, path, probe(path))

    def keep_as(self, kind: str, path: str, fact: str) -> None:
        """Keep a fact the caller read itself, as it was then (what ``PROBES[kind]`` gave):
        kept twice differently, the facts are no longer :meth:`facts`."""
        if self._watched is not None:
            self._keep_fact(kind, path, fact)

    @property
    def watching(self) -> bool:
        return self._watched is not None

    def keep_tree(self, executable: str, statuses: Sequence[tuple[str, os.stat_result]]
                  ) -> None:
        """Keep, as one fact, the statuses :func:`runfiles.tree_listing` read of the
        executable's runfiles tree: its input manifest's, its ``MANIFEST``'s (the link
        itself), then its directories' (see :func:`tree`)."""
        if self._watched is None:
            return
        root = executable + ".runfiles"
        dirs = [path[len(root) + 1:] if path != root else "" for path, _ in statuses[2:]]
        if len(statuses) >= 2 and all(path == root or path.startswith(root + "/")
                                      for path, _ in statuses[2:]):
            self._keep_fact("tree", "\0".join([executable, *dirs]),
                            tree_fact([st for _, st in statuses]))
        else:
            self.opaque()

    def stat(self, path: str) -> os.stat_result:
        """``os.stat``, its status kept (its error is raised, and kept too)."""
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            self.keep("stat", path)
            raise
        if self._watched is not None:
            self._keep_fact("stat", path, formatted(st))
        return st

    def isfile(self, path: str) -> bool:
        found = os.path.isfile(path)
        if self._watched is not None:
            self._keep("isfile", path, found)
        return found

    def readlink(self, path: str) -> str | None:
        """Where the link ``path`` points; None: not a link, or not there."""
        return self._readlink(path)

    def still_true(self) -> bool:
        """Whether each fact kept since :meth:`watch` still holds (then everything this
        memo remembers does); they are kept on."""
        return not self._moved and holds(self._watched or {})

    def facts(self) -> Facts | None:
        """Every fact kept since :meth:`watch`, each as it was first read; None when one
        was read twice, differently, or something was read that is not kept as a fact
        (see :meth:`opaque`), or none are kept."""
        if self._moved or self._opaque or self._watched is None:
            return None
        return {kind: dict(facts) for kind, facts in self._watched.items()}

    def opaque(self) -> None:
        """Say that what is being read is not kept as facts (a walk of a directory tree, a
        manifest read whole): :meth:`facts` can no longer tell all that was read."""
        self._opaque = True

    def _by_file(self, table: dict[FileKey, _T], path: str, read: Callable[[str], _T]) -> _T:
        key = self.file_key(path)
        if key is None:
            return read(path)   # not a regular file: its error (or answer) as it comes
        found = table.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        value = read(path)
        table[key] = value
        return value

    def read_elf(self, path: str) -> elf.ElfInfo:
        """``elf.read_elf``, once per file. The result's ``path`` is the first one read.

        The file is opened first, and known by the status of what was opened (what
        :meth:`file_key` would find there, without following its path twice)."""
        # The errors of elf.read_elf, for what is not a regular file (kept: a missing
        # interpreter that appears later changes the load).
        try:
            fd, st = elf.open_regular_stat(path)
        except Exception:
            self.keep("key", path)
            raise
        try:
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if self._watched is not None:
                self._keep_fact("key", path, identity(st))
            found = self._elf.get(key)
            if found is not None:
                self.hits += 1
                return found
            self.misses += 1
            value = self._elf[key] = elf.read_elf_fd(fd, path, size=st.st_size,
                                                     layouts=self._layouts)
            return value
        finally:
            os.close(fd)

    def read_header(self, path: str) -> elf.ElfHeader:
        return self._by_file(self._headers, path, elf.read_header)

    def version_definitions(self, path: str) -> tuple[str, ...]:
        return self._by_file(self._versions, path, elf.version_definitions)

    def per_file(self, table: str, extra: Hashable, path: str,
                 read: Callable[[str], _T]) -> _T:
        """``read(path)``, once per file (its identity) and ``extra`` in ``table``: for what
        depends only on the file's bytes and on ``extra`` (the loader's verdict on it for
        one kind of program)."""
        key = self.file_key(path)
        if key is None:
            return read(path)   # not a regular file: its error (or answer) as it comes
        entries = self._tables.setdefault(table, {})
        full = (key, extra)
        try:
            found: _T = entries[full]
        except KeyError:
            self.misses += 1
            found = entries[full] = read(path)
            return found
        self.hits += 1
        return found

    def listing(self, directory: str) -> Listing:
        """The names in ``directory`` (symlinks followed), listed once."""
        found = self._listings.get(directory)
        if found is not None:
            return found
        same = self._without_dotdot(directory)
        if same is not None:
            listing = self._listings[directory] = self.listing(same)
            return listing
        absent = self._absent_below(directory)
        if absent:
            listing = self._listings[directory] = Listing(False, frozenset(), frozenset(),
                                                          absent)
            return listing
        listing = self._listings[directory] = list_now(directory)
        if self._watched is not None:
            self._keep("list", directory, listing)
        return listing

    def _absent_below(self, directory: str) -> int:
        """The errno of a walk to ``directory`` that a listing already known of one of its
        nearest parents decides (0: none does): below a directory that is not there the
        walk fails as it does there, and a name a directory lacks is not there (ENOENT)."""
        path = directory.rstrip("/")
        for _ in range(_PARENTS):
            path, _, name = path.rpartition("/")
            if not path or name in ("", ".", ".."):
                return 0
            known = self._listings.get(path) or self._listings.get(path + "/")
            if known is not None:
                if known.missing_errno:
                    return known.missing_errno
                return errno.ENOENT if known.lacks(name) else 0
        return 0

    def _without_dotdot(self, directory: str) -> str | None:
        """The same directory as ``directory`` without its last ``..``, or None.

        ``HEAD/../REST`` names what ``REST`` names in the parent of the directory ``HEAD``
        leads to: the kernel takes ``..`` from the directory it reached, after following
        the links. When ``HEAD`` is a directory, that parent is the one of its real path;
        otherwise the walk fails there (or takes another turn) and only opening tells.
        The search paths made from ``$ORIGIN/../`` in the programs of every package of a
        repository name the same few directories: each is listed once.
        """
        head, sep, rest = directory.rpartition("/../")
        if not sep or not head.startswith("/"):
            return None
        parent = self._parents.get(head)
        if parent is None:
            a_dir = is_dir(head)
            if self._watched is not None:
                self._keep("dir", head, a_dir)
            parent = self._parents[head] = \
                os.path.dirname(self.realpath(head)) if a_dir else ""
        return os.path.join(parent, rest) if parent else None

    def relative(self, dirs: tuple[str, ...]) -> bool:
        """Whether a search list names a directory relative to the working directory
        (known per list object: the lists come from the memo and live as long as it)."""
        entry = self._relative.get(id(dirs))
        if entry is not None and entry[0] is dirs:
            return entry[1]
        flag = any(not d.startswith("/") for d in dirs)
        self._relative[id(dirs)] = (dirs, flag)
        return flag

    def realpath(self, path: str) -> str:
        """``os.path.realpath``, with the real path of every directory found once.

        Tests' runfiles trees are thousands of symlinks into the same few directories;
        ``os.path.realpath`` would ``lstat`` every component of every one of them. As
        there, a component that does not exist is kept as it is, and ``..`` applies to
        what the components before it resolved to.
        """
        if not path.startswith("/"):
            path = os.path.join(os.getcwd(), path)
        found = self._real.get(path)
        if found is None:
            try:
                found = self._resolve(path, 0)
            except _Loop:
                found = os.path.realpath(path)   # realpath says where it stops
                if self._watched is not None:
                    self._keep("real", path, found)
            self._real[path] = found
        return found

    def link_realpath(self, path: str, target: str) -> str:
        """:meth:`realpath` of ``path``, a symlink known to name the absolute ``target``
        (a link of a runfiles tree its ``MANIFEST`` was shown to list): the target's real
        path, found once for every link to it, without reading the link."""
        found = self._real.get(path)
        if found is None:
            found = self._real.get(target)
            if found is None:
                try:
                    found = self._real[target] = self._resolve(target, 1)
                except _Loop:
                    found = os.path.realpath(path)
                    if self._watched is not None:
                        self._keep("real", path, found)
            self._real[path] = found
        return found

    def _resolve(self, path: str, depth: int) -> str:
        # A runfiles path is a new chain of directories ending in a symlink to an absolute
        # path, which many tests share: where that symlink points does not depend on how
        # its directories resolve, so one readlink of the whole path replaces one per new
        # directory, and the target's real path is found once.
        plain = "/." not in path and "//" not in path
        parent = self._real.get(path.rpartition("/")[0]) if plain else None
        if parent is not None:
            # A path in a directory already resolved (a test's executable beside the
            # others of its package): only its own name is left to resolve.
            return self._walk(parent, path.rpartition("/")[2], depth)
        if depth < 40 and plain:
            target = self._readlink(path) or ""
            if target.startswith("/"):
                found = self._real.get(target)
                if found is None:
                    found = self._real[target] = self._resolve(target, depth + 1)
                return found
        return self._walk("/", path, depth)

    def _walk(self, real: str, rest: str, depth: int) -> str:
        for name in rest.split("/"):
            if not name or name == ".":
                continue
            if name == "..":
                real = os.path.dirname(real)
                continue
            here = f"{real}/{name}" if real != "/" else "/" + name   # os.path.join
            known = self._real.get(here)
            if known is not None:
                real = known
                continue
            target = self._readlink(here)
            if target is None:
                self._real[here] = real = here   # not a link, or not there
                continue
            if depth >= 40:
                raise _Loop
            resolved = self._walk("/" if target.startswith("/") else real, target, depth + 1)
            self._real[here] = real = resolved
        return real

    def _readlink(self, path: str) -> str | None:
        target = read_link(path)
        if self._watched is not None:
            self._keep("link", path, target)
        return target

    def mounts(self) -> Mounts:
        """The mount table, read once (for walks of runfiles trees)."""
        if self._mounts is None:
            self._mounts = Mounts.read()
            if self._watched is not None:
                self._keep("mounts", "", "\0".join(sorted(self._mounts.names)))
        return self._mounts


class _Loop(Exception):
    """A chain of symlinks longer than the kernel follows."""

"""The facts a memo keeps of the file system while it watches (:meth:`Memo.watch
<bazel_ldfix.fs.memo.Memo.watch>`), and how each kind is read again to tell whether it still
holds.

A fact is a string, whatever its kind, so that it can be kept on disk. The kinds of the file
system itself are defined here; a layer above that keeps a fact of its own (the loader's
answers, the state of an output_base's index) registers how it is read again
(:func:`register`). A kind that no one registered never holds: what depended on it is made
anew.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bazel_ldfix.fs.mounts import Mounts

#: What a memo kept of the file system (kind -> path -> the fact, see PROBES).
Facts = dict[str, dict[str, str]]
#: How one kind of fact is read now: the path (or question) in, the fact out.
Probe = Callable[[str], str]
#: A file changed less than this long before it was read may change again without a
#: change of its times (their granularity): what was read of it is not kept for later.
SETTLE_NS = 2_000_000_000


@dataclass(frozen=True)
class Listing:
    """What a directory holds, as far as opening a plain name in it goes."""

    is_dir: bool
    names: frozenset[str] | None    # None: could not be listed (only opening can tell)
    folded: frozenset[str] = frozenset()
    missing_errno: int = 0          # ENOENT, ENOTDIR: the directory is not there at all

    def lacks(self, name: str) -> bool:
        """Whether opening ``name`` here certainly fails with ENOENT.

        A name listed under another case is left to ``open``: on a case-insensitive
        filesystem (vfat, an ext4 casefold directory) it opens.
        """
        if self.missing_errno:
            return True
        if self.names is None or name in (".", "..") or name in self.names:
            return False
        return name.casefold() not in self.folded


def holds(facts: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether each fact, as :meth:`Memo.facts` gives them, still holds."""
    for kind, kept in facts.items():
        probe = PROBES.get(kind)
        if probe is None:
            return False
        for path, value in kept.items():
            if probe(path) != value:
                return False
    return True


def is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def list_now(directory: str) -> Listing:
    """The names in ``directory`` as read now."""
    try:
        names = os.listdir(directory)
        return Listing(True, frozenset(names), frozenset(n.casefold() for n in names))
    except (FileNotFoundError, NotADirectoryError) as exc:
        return Listing(False, frozenset(), frozenset(), exc.errno or errno.ENOENT)
    except (OSError, ValueError):
        # Unreadable (EACCES), a loop, ...: a name may still open; only trying tells.
        return Listing(is_dir(directory), None)


def read_link(path: str) -> str | None:
    """Where the link ``path`` points; None: not a link, or not there."""
    try:
        return os.readlink(path)
    except (OSError, ValueError):
        return None


def fact_of(kind: str, value: object) -> str:
    """A fact as kept: a string, whatever its kind (kept facts are written to disk)."""
    if kind == "list":
        assert isinstance(value, Listing)
        return listed(value)
    if kind in ("dir", "isfile", "access"):
        return "1" if value else "0"
    if kind == "link":
        return "\0" if value is None else str(value)
    return str(value)


def listed(listing: Listing) -> str:
    # Here: +10 ms CPU on `resolve` at the top (benchmarks/START.md).
    import hashlib

    names = "" if listing.names is None else "\0".join(sorted(listing.names))
    digest = hashlib.blake2b(os.fsencode(names), digest_size=16).hexdigest()
    return f"{int(listing.is_dir)}:{listing.missing_errno}:{listing.names is not None}:{digest}"


def status(path: str) -> str:
    st = stat_or_errno(path)
    return f"!{st}" if isinstance(st, int) else formatted(st)


def identity(st: os.stat_result) -> str:
    """Which regular file a path names: its device and inode, and its size, modification
    and change times (a copy that keeps the modification time changes the change time,
    which no one can set back)."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def regular_status(path: str) -> tuple[os.stat_result | None, str]:
    """The status of the regular file at ``path`` (None for anything else), and the fact
    kept of it: its identity; for no regular file, what is there instead, which the loader
    tells apart (nothing, or a dangling symlink: the search goes on; a directory: the load
    stops, it cannot be read; a FIFO: the load would block), as ``!`` and the errno of
    ``stat`` or the file's type."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as exc:
        return None, f"!{getattr(exc, 'errno', None) or 0}"
    if not stat.S_ISREG(st.st_mode):
        return None, f"!type {stat.S_IFMT(st.st_mode):o}"
    return st, identity(st)


def regular(path: str) -> str:
    return regular_status(path)[1]


def regular_identity(path: str) -> str:
    """The fact a memo keeps of which regular file ``path`` is (``PROBES["key"]``)."""
    return regular(path)


def tree(question: str) -> str:
    """The fact :meth:`Memo.keep_tree` keeps of a runfiles tree, as it is now."""
    executable, *dirs = question.split("\0")
    root = executable + ".runfiles"
    return tree_fact([stat_or_errno(executable + ".runfiles_manifest"),
                       stat_or_errno(root + "/MANIFEST", follow=False),
                       *(stat_or_errno(f"{root}/{d}" if d else root) for d in dirs)])


def stat_or_errno(path: str, *, follow: bool = True) -> os.stat_result | int:
    try:
        return os.stat(path, follow_symlinks=follow)
    except (OSError, ValueError) as exc:
        return getattr(exc, "errno", 0) or -1


def tree_fact(statuses: Sequence[os.stat_result | int]) -> str:
    """The newest timestamp among the statuses (for replay.settled), and their digest."""
    # Here: +10 ms CPU on `resolve` at the top (benchmarks/START.md).
    import hashlib

    newest = 0
    parts = []
    for st in statuses:
        if isinstance(st, int):
            parts.append(f"!{st}")
            continue
        parts.append(formatted(st))
        newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    digest = hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()
    return f"{newest}:{digest}"


def formatted(st: os.stat_result) -> str:
    return (f"{st.st_dev}:{st.st_ino}:{st.st_mode}:{st.st_uid}:{st.st_gid}:{st.st_size}:"
            f"{st.st_mtime_ns}:{st.st_ctime_ns}")


def _mount_names(_: str) -> str:
    return "\0".join(sorted(Mounts.read().names))





#: How each kind of fact is read now (a path in, a string out, as :func:`fact_of` keeps it).
PROBES: dict[str, Probe] = {
    "list": lambda path: listed(list_now(path)),
    "link": lambda path: fact_of("link", read_link(path)),
    "dir": lambda path: fact_of("dir", is_dir(path)),
    "real": os.path.realpath,
    "key": regular,
    "stat": status,
    "isfile": lambda path: fact_of("isfile", os.path.isfile(path)),
    "mounts": _mount_names,
    "tree": tree,
    "access": lambda path: fact_of("access", os.access(
        path, os.R_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids)),
}


def register(kind: str, probe: Probe) -> None:
    """How a layer above reads its own kind of fact again (the first registration stays)."""
    PROBES.setdefault(kind, probe)

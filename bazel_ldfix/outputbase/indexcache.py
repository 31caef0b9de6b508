"""The index of an output_base's ``external/``, kept on disk between runs.

Bazel changes ``external/`` in three ways: it adds a repository, removes one, or re-fetches
one (deletes the directory and writes it anew, or points the symlink elsewhere), and each
time it writes the repository's ``@<name>.marker`` file. So a cached index is valid while
``external/`` itself, every entry in it (inode and mtime; for a symlink, also the inode and
mtime of the directory it points at) and every marker file (inode, mtime, size) are as they
were when the walk started: one ``lstat`` per entry of ``external/`` instead of a walk.

Timestamps are coarse (a clock tick; a second on some filesystems), and an inode number
freed by a re-fetch is often reused at once. So, as git does with its index, an index is
only written when every timestamp in its state is older than :data:`SETTLE_NS`: a change
within the same tick could otherwise leave the state as it was.

What the state cannot see is a change deep inside a repository that Bazel did not make (an
edited ``local_repository``). A cached path that no longer exists is caught by the caller,
which walks again; ``--no-cache`` bypasses the cache.

The record (:attr:`Record.INDEX <bazel_ldfix.store.Record.INDEX>`, one per root): a line,
``root NUL length-of-state LF``, the state, then one entry per name, ``NUL NUL name (NUL
directory)...``, directories relative to the root. No name or directory is empty or holds
a NUL, so ``NUL NUL name NUL`` after the state finds an entry without parsing the others.

It is kept in the per-user store (:mod:`bazel_ldfix.store`), which believes it only whole
and of this version; an index that does not name this root and state, or with an entry
that leaves the root (an absolute path, a ``..``), is ignored too, and the walk is done
again.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bazel_ldfix.fs import facts
from bazel_ldfix.fs.facts import SETTLE_NS
from bazel_ldfix.store import Record, Store


@dataclass(frozen=True)
class State:
    """What the validity of an index of ``external/`` depends on, byte for byte.

    Kept whole rather than hashed: comparing a few hundred kilobytes costs nothing, and
    two different states can never compare equal.
    """

    key: bytes
    settled: bool  # every timestamp in it is older than SETTLE_NS: safe to write an index


def state(root: str, now_ns: int | None = None) -> State:
    """The state of ``root`` (``output_base/external``) on which its index depends."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    try:
        # Entries are stat'ed relative to the open directory: no path walk per entry.
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return State(b"unreadable %d" % (exc.errno or 0), False)
    try:
        st = os.fstat(fd)
        names = sorted(os.listdir(fd))
        parts = [b"%d %d %d\0" % (st.st_dev, st.st_ino, st.st_mtime_ns)]
        newest = st.st_mtime_ns
        for name in names:
            encoded = os.fsencode(name)
            try:
                ls = os.stat(name, dir_fd=fd, follow_symlinks=False)
                mode = ls.st_mode
                parts.append(b"%s\0%o %d %d %d\0" % (encoded, mode, ls.st_ino, ls.st_mtime_ns,
                                                     ls.st_size if stat.S_ISREG(mode) else 0))
                newest = max(newest, ls.st_mtime_ns)
                if stat.S_ISLNK(mode):
                    target = os.stat(name, dir_fd=fd)
                    parts.append(b"-> %d %d %d\0" % (target.st_dev, target.st_ino,
                                                     target.st_mtime_ns))
                    newest = max(newest, target.st_mtime_ns)
            except OSError as exc:
                parts.append(b"%s\0error %d\0" % (encoded, exc.errno or 0))
    except OSError as exc:
        return State(b"unreadable %d" % (exc.errno or 0), False)
    finally:
        os.close(fd)
    return State(b"".join(parts), newest < now_ns - SETTLE_NS)


def _header(root: str, current: State) -> bytes:
    return b"%s\0%d\n%s" % (os.fsencode(root), len(current.key), current.key)


def save(store: Store, root: str, current: State,
         found: Mapping[str, Iterable[str]]) -> bool:
    """Write the index (name -> directories under ``root``); False if it was not written.

    Not written when the state has not settled, or when the file cannot be written (no
    error: the next run walks again). The file is replaced atomically, so a concurrent
    reader sees the old index or the new one.
    """
    if not current.settled:
        return False
    prefix = root.rstrip("/") + "/"
    parts = [_header(root, current)]
    for name in sorted(found):
        parts.append(b"\0\0" + os.fsencode(name))
        for d in found[name]:
            rel = "." if d == root else d[len(prefix):] if d.startswith(prefix) else None
            if rel is None:
                raise ValueError(f"{d} is not under {root}")
            parts.append(b"\0" + os.fsencode(rel))
    return store.keep(Record.INDEX, root, parts)  # the file names its root


def load(store: Store, root: str, current: State,
         names: Iterable[str]) -> dict[str, list[str]] | None:
    """name -> directories for ``names`` from a valid cached index; None without one.

    A name the index does not hold maps to ``[]``: it is nowhere under ``root``.
    """
    data = store.recall(Record.INDEX, root)
    header = _header(root, current)
    if data is None or not data.startswith(header):
        return None
    out: dict[str, list[str]] = {}
    for name in names:
        key = b"\0\0" + os.fsencode(name) + b"\0"
        at = data.find(key, len(header))
        if at < 0:
            out[name] = []
            continue
        end = data.find(b"\0\0", at + 2)
        record = data[at + len(key): end if end >= 0 else len(data)]
        dirs = []
        for rel in record.split(b"\0"):
            if not _inside(rel):
                return None
            dirs.append(root if rel == b"." else os.path.join(root, os.fsdecode(rel)))
        out[name] = dirs
    return out


def _inside(rel: bytes) -> bool:
    """A record's directory stays under the root: relative, no ``..``, nothing empty."""
    if rel == b".":
        return True
    parts = rel.split(b"/")
    return bool(rel) and not rel.startswith(b"/") and all(
        p not in (b"", b".", b"..") for p in parts)


def _index_fact(root: str) -> str:
    """The fact a memo keeps of an index's state (see :func:`state`), as it is now."""
    return hashlib.blake2b(state(root).key, digest_size=16).hexdigest()


facts.register("index", _index_fact)

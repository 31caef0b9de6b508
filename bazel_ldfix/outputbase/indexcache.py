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

The file: a header line, ``root NUL length-of-state LF``, the state, then one record per
name, ``NUL NUL name (NUL directory)...``, directories relative to the root, then the
trailer ``NUL NUL NUL end <length> <crc32> LF`` over everything before it. No name or
directory is empty or holds a NUL, so ``NUL NUL name NUL`` after the state finds a record
without parsing the others.

The file lives in the per-user directory (:mod:`bazel_ldfix.userdir`) and is believed only
as a whole: a file another user could have written, one cut short (the trailer), or one
with a record that leaves the root (an absolute path, a ``..``) is ignored, and the walk
is done again.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bazel_ldfix import userdir
from bazel_ldfix.fs import facts
from bazel_ldfix.fs.facts import SETTLE_NS

MAGIC = b"bazel-ldfix index 2 (names: index.looks_like_library)\n"
# An index of 100,000 library files with 100-byte paths is some 10 MB.
MAX_SIZE = 1 << 26
#: How old every timestamp of a state must be before an index is written with it.


@dataclass(frozen=True)
class State:
    """What the validity of an index of ``external/`` depends on, byte for byte.

    Kept whole rather than hashed: comparing a few hundred kilobytes costs nothing, and
    two different states can never compare equal.
    """

    key: bytes
    settled: bool  # every timestamp in it is older than SETTLE_NS: safe to write an index


def default_dir(env: Mapping[str, str]) -> str | None:
    """The per-user cache directory (None: none can be trusted, so nothing is cached)."""
    return userdir.cache_root(env)


def cache_file(cache_dir: str, root: str) -> str:
    """One file per root (``output_base/external``), named by a checksum of its path.

    Two roots with the same checksum take turns in one file: the file names its root.
    """
    base = os.path.basename(os.path.dirname(root.rstrip("/")))[:40]
    return os.path.join(cache_dir, f"index-{base}-{zlib.crc32(os.fsencode(root)):08x}")


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
    return b"%s%s\0%d\n%s" % (MAGIC, os.fsencode(root), len(current.key), current.key)


def save(cache_dir: str, root: str, current: State,
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
    if userdir.private_dir(cache_dir) is None:
        return False
    return userdir.write_private(cache_file(cache_dir, root), userdir.seal(b"".join(parts)))


def load(cache_dir: str, root: str, current: State,
         names: Iterable[str]) -> dict[str, list[str]] | None:
    """name -> directories for ``names`` from a valid cached index; None without one.

    A name the index does not hold maps to ``[]``: it is nowhere under ``root``.
    """
    if userdir.private_dir(cache_dir, create=False) is None:
        return None
    data = userdir.read_private(cache_file(cache_dir, root), MAX_SIZE)
    if data is None:
        return None
    data = userdir.unseal(data)
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

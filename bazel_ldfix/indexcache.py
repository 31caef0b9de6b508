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
name, ``NUL NUL name (NUL directory)...``, directories relative to the root. No name or
directory is empty or holds a NUL, so ``NUL NUL name NUL`` after the state finds a record
without parsing the others.
"""

from __future__ import annotations

import os
import stat
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAGIC = b"bazel-ldfix index 1 (names: index.looks_like_library)\n"
_DIRNAME = "bazel-ldfix"
#: How old every timestamp of a state must be before an index is written with it.
SETTLE_NS = 2_000_000_000


@dataclass(frozen=True)
class State:
    """What the validity of an index of ``external/`` depends on, byte for byte.

    Kept whole rather than hashed: comparing a few hundred kilobytes costs nothing, and
    two different states can never compare equal.
    """

    key: bytes
    settled: bool  # every timestamp in it is older than SETTLE_NS: safe to write an index


def default_dir(output_base: str, env: Mapping[str, str]) -> str:
    """``$XDG_CACHE_HOME/bazel-ldfix``, else ``bazel-ldfix-cache`` beside the output_base."""
    xdg = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, _DIRNAME)
    parent = os.path.dirname(os.path.abspath(output_base).rstrip("/")) or "/"
    return os.path.join(parent, f"{_DIRNAME}-cache")


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
    import tempfile  # here: only a walk writes, and a warm run should not pay for it

    prefix = root.rstrip("/") + "/"
    parts = [_header(root, current)]
    for name in sorted(found):
        parts.append(b"\0\0" + os.fsencode(name))
        for d in found[name]:
            rel = "." if d == root else d[len(prefix):] if d.startswith(prefix) else None
            if rel is None:
                raise ValueError(f"{d} is not under {root}")
            parts.append(b"\0" + os.fsencode(rel))
    path = cache_file(cache_dir, root)
    try:
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".index-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(b"".join(parts))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def load(cache_dir: str, root: str, current: State,
         names: Iterable[str]) -> dict[str, list[str]] | None:
    """name -> directories for ``names`` from a valid cached index; None without one.

    A name the index does not hold maps to ``[]``: it is nowhere under ``root``.
    """
    try:
        with open(cache_file(cache_dir, root), "rb") as f:
            data = f.read()
    except OSError:
        return None
    header = _header(root, current)
    if not data.startswith(header):
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
        out[name] = [root if rel == b"." else os.path.join(root, os.fsdecode(rel))
                     for rel in record.split(b"\0")]
    return out

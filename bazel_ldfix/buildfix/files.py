"""The files ``fix`` edits: read whole, written back with nothing lost but what it changes.

A file is read whole, by its real size; a file larger than :data:`MAX_SOURCE` is refused
with a message, never cut. What was read is kept with the file's identity (device, inode),
owner, group, mode and times, so that two names of one file are one file, and a change
made since the read is seen.

Each file is written in one of two ways, keeping owner, group and mode:

- replaced: the new text goes to a temporary file in the same directory, which gets the
  file's owner, group and mode, then takes the file's name by a rename. No one ever reads
  a half-written file. Just before the rename, the file under that name is read again: it
  must still be the file read (same identity) with the same bytes, or nothing is renamed.
- rewritten in place, where a rename would lose something: a file with other hard links
  (a rename would leave them holding the old text), or one whose owner or group cannot be
  given to a new file (a file of another user, edited by its group). A backup copy of the
  old bytes is written beside it first and removed once the file holds the new text; the
  file is opened and checked (identity and bytes) just before it is written.
"""

from __future__ import annotations

import contextlib
import enum
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from bazel_ldfix.errors import CannotEditError
from bazel_ldfix.fs.bounded import read_at_most

MAX_SOURCE = 64 << 20   # bytes: a BUILD or WORKSPACE file larger than this is refused
_PREFIX = ".bazel-ldfix-"


@dataclass(frozen=True)
class Snapshot:
    """One file as it was read (or written): its bytes and what a new file must keep."""

    path: str           # the name it was read by
    real: str           # the file itself (symlinks resolved when it was read)
    device: int
    inode: int
    uid: int
    gid: int
    mode: int           # permission bits (with set-id and sticky bits)
    links: int          # hard links
    atime_ns: int
    mtime_ns: int
    data: bytes

    @property
    def identity(self) -> tuple[int, int]:
        return self.device, self.inode

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "surrogateescape")


class How(enum.Enum):
    REPLACED = "replaced"       # a new file renamed over the old one
    IN_PLACE = "in place"       # the same file rewritten (hard links, another owner)


@dataclass(frozen=True)
class Written:
    """A file ``save`` wrote: as it was read, and as it is now."""

    before: Snapshot
    after: Snapshot
    how: How


def read(path: str) -> Snapshot:
    """The whole file at ``path`` (symlinks followed), or CannotEditError saying why not."""
    real = os.path.realpath(path)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise CannotEditError(f"cannot read {path}: {exc.strerror}; nothing changed"
                              ) from None
    try:
        return _snapshot(fd, path, real)
    finally:
        os.close(fd)


def _snapshot(fd: int, path: str, real: str) -> Snapshot:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise CannotEditError(f"{path} is not a regular file; nothing changed")
    if st.st_size > MAX_SOURCE:
        raise CannotEditError(f"{path} is {st.st_size} bytes, more than the {MAX_SOURCE} "
                              "bytes `fix` reads; change it by hand; nothing changed")
    data = read_at_most(fd, MAX_SOURCE)     # a file that grows while it is read stops
    if len(data) > MAX_SOURCE:
        raise CannotEditError(f"{path} grew past {MAX_SOURCE} bytes while it was read; "
                              "nothing changed")
    return Snapshot(path, real, st.st_dev, st.st_ino, st.st_uid, st.st_gid,
                    stat.S_IMODE(st.st_mode), st.st_nlink, st.st_atime_ns, st.st_mtime_ns,
                    data)


def check_writable(path: str, output_base: str | None) -> None:
    """CannotEditError when ``path`` is not a file ``fix`` may write: under the
    output_base (through a symlink too), missing, read-only, in a read-only directory."""
    real = os.path.realpath(path)
    if output_base:
        base = os.path.realpath(output_base)
        if real == base or real.startswith(base + os.sep):
            raise CannotEditError(f"{path} is under the output_base ({output_base}), which "
                                  "Bazel rewrites; nothing changed")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise CannotEditError(f"{path} does not exist; nothing changed") from None
    except OSError as exc:
        raise CannotEditError(f"cannot read {path}: {exc.strerror}; nothing changed"
                              ) from None
    if not stat.S_ISREG(st.st_mode):
        raise CannotEditError(f"{path} is not a regular file; nothing changed")
    # The mode bits as well as access(2): root may write anything, but a file made
    # read-only says it is not to be edited.
    if not os.access(real, os.W_OK) or not st.st_mode & 0o222 \
            or not os.access(os.path.dirname(real), os.W_OK):
        raise CannotEditError(f"{path} is read-only (the file or its directory); nothing "
                              "changed")


def save(edits: Sequence[tuple[Snapshot, bytes]], output_base: str | None = None
         ) -> list[Written]:
    """Write each file its new bytes; all of them or none.

    Every file is checked first (writable, still as read). If one cannot be written, or
    was changed since it was read, the files already written get their old bytes back and
    CannotEditError says which file and why.
    """
    for before, _ in edits:
        check_writable(before.path, output_base)
        _unchanged(before, before)
    done: list[Written] = []
    for before, data in edits:
        try:
            done.append(_write(before, before, data))
        except (CannotEditError, OSError) as exc:
            problems = restore(done)
            where = f"; {'; '.join(problems)}" if problems else ""
            if isinstance(exc, OSError):
                raise CannotEditError(f"cannot write {before.path}: {exc.strerror}; "
                                      f"nothing changed{where}") from None
            raise CannotEditError(f"{exc}{where}") from None
    return done


def restore(written: Sequence[Written]) -> list[str]:
    """Put back the bytes (and times) each file had before ``save``; what could not be put
    back, in words (a file changed since it was written is left as it is)."""
    problems = []
    for w in reversed(written):
        try:
            back = _write(w.after, w.before, w.before.data)
            os.utime(back.after.real, ns=(w.before.atime_ns, w.before.mtime_ns))
        except (CannotEditError, OSError) as exc:
            problems.append(f"{w.before.path} was not restored: {exc}")
    return problems


def _unchanged(expected: Snapshot, read_as: Snapshot) -> None:
    """CannotEditError unless the file is still ``expected`` (identity and bytes)."""
    try:
        now = read(expected.real)
    except CannotEditError:
        now = None
    if now is None or now.identity != expected.identity or now.data != expected.data:
        raise CannotEditError(f"{read_as.path} changed since it was read; nothing written "
                              "to it")


def _write(current: Snapshot, keep: Snapshot, data: bytes) -> Written:
    """Give the file ``current`` the bytes ``data`` and the owner, group and mode of
    ``keep``, by a rename when that loses nothing, else in place."""
    if current.links == 1:
        written = _replace(current, keep, data)
        if written is not None:
            return written
    return _in_place(current, keep, data)


def _replace(current: Snapshot, keep: Snapshot, data: bytes) -> Written | None:
    """Replace the file by a new one; None when the new file cannot get ``keep``'s owner
    and group (the caller then writes in place)."""
    directory = os.path.dirname(current.real)
    fd, tmp = tempfile.mkstemp(prefix=_PREFIX, dir=directory)
    try:
        try:
            st = os.fstat(fd)
            if (st.st_uid, st.st_gid) != (keep.uid, keep.gid):
                os.fchown(fd, keep.uid, keep.gid)
        except PermissionError:
            os.close(fd)
            os.unlink(tmp)
            return None
        _write_all(fd, data)
        os.fchmod(fd, keep.mode)       # after fchown, which clears the set-id bits
        os.fsync(fd)
        _unchanged(current, keep)
        os.rename(tmp, current.real)
        os.lseek(fd, 0, os.SEEK_SET)
        new = _snapshot(fd, keep.path, current.real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    _sync_directory(directory)
    return Written(current, new, How.REPLACED)


def _in_place(current: Snapshot, keep: Snapshot, data: bytes) -> Written:
    """Rewrite the file itself, after a backup copy of its bytes beside it."""
    directory = os.path.dirname(current.real)
    backup_fd, backup = tempfile.mkstemp(
        prefix=f"{_PREFIX}backup-{os.path.basename(current.real)}-", dir=directory)
    try:
        _write_all(backup_fd, current.data)
        os.fsync(backup_fd)
    finally:
        os.close(backup_fd)
    try:
        fd = os.open(current.real, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        os.unlink(backup)
        raise
    try:
        now = _snapshot(fd, current.path, current.real)
        if now.identity != current.identity or now.data != current.data:
            os.unlink(backup)
            raise CannotEditError(f"{keep.path} changed since it was read; nothing written "
                                  "to it")
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        except OSError as exc:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                _write_all(fd, current.data)
                os.ftruncate(fd, len(current.data))
                os.fsync(fd)
            except OSError:
                raise CannotEditError(f"cannot write {keep.path}: {exc.strerror}; its old "
                                      f"text is kept in {backup}") from None
            os.unlink(backup)
            raise
        os.lseek(fd, 0, os.SEEK_SET)
        new = _snapshot(fd, keep.path, current.real)
    finally:
        os.close(fd)
    os.unlink(backup)
    return Written(current, new, How.IN_PLACE)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _sync_directory(directory: str) -> None:
    """Make the rename itself durable (best effort: some file systems refuse)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

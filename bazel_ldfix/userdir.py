"""The one per-user directory the tool keeps state in, and how its files are read and written.

What is read back from here steers the tool (where libraries are, which flags Bazel gets),
so nothing in it is believed unless only this user could have written it:

- the directory is ``$XDG_CACHE_HOME/bazel-ldfix`` (an absolute value only, as the XDG
  specification says), else ``$HOME/.cache/bazel-ldfix`` (``HOME`` from the environment,
  else the password database), else ``bazel-ldfix-<uid>`` in the system's temporary
  directory; it is created mode 0700, and used only if it is a real directory (not a
  symlink) owned by this user and writable by nobody else;
- a file is opened with ``O_NOFOLLOW`` (a planted symlink to ``/dev/zero`` is not
  followed) and ``O_NONBLOCK`` (a planted FIFO is not waited on), and read only if it is a
  regular file owned by this user, writable by nobody else and no larger than its cap;
- a file is written to a fresh temporary name in the same directory and renamed over the
  old one, and the temporary file is removed whatever fails (a full disk leaves nothing);
- a file is believed only whole: :func:`seal` ends it with a trailer giving the length and
  CRC-32 of what comes before, which :func:`unseal` checks (a file cut short is ignored).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping

from bazel_ldfix.fs.bounded import read_at_most

NAME = "bazel-ldfix"
_TRAILER = b"\0\0\0end "


def cache_root(env: Mapping[str, str]) -> str | None:
    """The per-user directory, created if need be; None when none can be trusted."""
    return private_dir(cache_path(env)[0])


def cache_path(env: Mapping[str, str]) -> tuple[str, str]:
    """Where the per-user directory is (nothing is created), and what named it, in words
    for a message: ``$XDG_CACHE_HOME``, ``$HOME``, ``the password database`` or ``the
    temporary directory``."""
    xdg = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, NAME), "$XDG_CACHE_HOME"
    home, source = env.get("HOME", ""), "$HOME"
    if not home:
        home, source = _home_from_passwd(), "the password database"
    if os.path.isabs(home):
        return os.path.join(home, ".cache", NAME), source
    return (os.path.join(tempfile.gettempdir(), f"{NAME}-{os.geteuid()}"),
            "the temporary directory")


def _home_from_passwd() -> str:
    # Here: at the top, CPU ms before Bazel starts: test +295, fix +123 (benchmarks/START.md).
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return ""


def private_dir(path: str, *, create: bool = True) -> str | None:
    """``path``, created mode 0700 (with its parents) if missing and ``create``; None
    unless it is a real directory owned by this user that nobody else can write."""
    try:
        if create:
            os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    return path if _private(st) and stat.S_ISDIR(st.st_mode) else None


def _private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_private(path: str, max_size: int) -> bytes | None:
    """The bytes of ``path``, or None if it is missing, not trusted or larger than
    ``max_size`` (see the module's rules)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > max_size:
            return None
        data = read_at_most(fd, max_size)
        return data if len(data) <= max_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def write_private(path: str, data: bytes | Iterable[bytes]) -> bool:
    """Replace ``path`` with ``data`` (or its chunks, in order) atomically; False (and
    nothing left behind) on error.

    The directory of ``path`` must be one :func:`private_dir` returned.
    """
    directory = os.path.dirname(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")  # mode 0600
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in (data,) if isinstance(data, bytes) else data:
                f.write(chunk)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    except BaseException:
        os.unlink(tmp)
        raise
    return True


def seal(body: bytes) -> bytes:
    """``body`` with the trailer :func:`unseal` checks: ``NUL NUL NUL end <length> <crc32> LF``."""
    return body + _TRAILER + b"%d %08x\n" % (len(body), zlib.crc32(body))


def sealed(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks of a body, then :func:`seal`'s trailer: a large body is never whole in
    memory."""
    length, crc = 0, 0
    for chunk in chunks:
        length += len(chunk)
        crc = zlib.crc32(chunk, crc)
        yield chunk
    yield _TRAILER + b"%d %08x\n" % (length, crc)


def unseal(data: bytes) -> bytes | None:
    """The body of what :func:`seal` wrote; None for anything else (a file cut short)."""
    at = data.rfind(_TRAILER)
    if at < 0 or not data.endswith(b"\n"):
        return None
    body = data[:at]
    try:
        length, crc = data[at + len(_TRAILER):-1].split(b" ")
        whole = int(length) == len(body) and int(crc, 16) == zlib.crc32(body)
    except ValueError:
        return None
    return body if whole else None

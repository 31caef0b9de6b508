"""The per-user store: where each record kept between runs lives, whether it can be
trusted, and its versioned format.

The tool keeps a few kinds of records between runs (:class:`Record`): the index of an
output_base's ``external/``, the rules' answer to the ``env`` query, the flag and the
repair of the last run of a command, and the values a ``bazel test`` gave its tests.
What is read back steers the tool (where libraries are, which flags Bazel gets), so
nothing here is believed unless only this user could have written it, whole, in this
version's format:

- the directory is ``$XDG_CACHE_HOME/bazel-ldfix`` (an absolute value only, as the XDG
  specification says), else ``$HOME/.cache/bazel-ldfix`` (``HOME`` from the environment,
  else the password database), else ``bazel-ldfix-<uid>`` in the system's temporary
  directory; it and each record's directory in it are created mode 0700, and used only if
  they are real directories (not symlinks) owned by this user and writable by nobody else;
- each record is one file, ``<record>/<digest of its key>``: only this module names files;
- a file is opened with ``O_NOFOLLOW`` (a planted symlink to ``/dev/zero`` is not
  followed) and ``O_NONBLOCK`` (a planted FIFO is not waited on), and read only if it is a
  regular file owned by this user, writable by nobody else and no larger than its
  record's cap;
- a file is one header line, ``bazel-ldfix <record> <version>``, the body, and a trailer
  giving the length and CRC-32 of all before it. A file cut short, of another record or of
  another version is ignored, as if there were none, and the next :meth:`Store.keep`
  replaces it;
- a file is written to a fresh temporary name in the same directory and renamed over the
  old one, and the temporary file is removed whatever fails (a full disk, a body over the
  record's cap leave nothing).

The links directories of the repair live here too (:meth:`Store.links_dir`);
:mod:`bazel_ldfix.linkdir` makes and checks what is inside.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from bazel_ldfix.fs.bounded import read_at_most

NAME = "bazel-ldfix"
LINKS = "links"
_TRAILER = b"\0\0\0end "
_KEY_DIGEST = 32


class Record(enum.Enum):
    """A kind of record: its directory, the version of its format, the largest file of it
    that is believed, and how many are kept (None: as many as are written).

    A change to what a record's body holds, or means, takes a new version: files of the
    old one are then ignored and made again.
    """

    INDEX = ("index", 3, 1 << 26, None)
    """The index of an output_base's ``external/`` (:mod:`bazel_ldfix.outputbase.indexcache`).
    Its names are those ``index.looks_like_library`` takes: a change to that is a new version.
    100,000 library files with 100-byte paths are some 10 MB."""
    RULES = ("rules", 2, 1 << 24, None)
    """The rules' answer to the ``env`` query (:mod:`bazel_ldfix.bazel.rulecache`)."""
    FLAGS = ("flags", 2, 1 << 20, None)
    """The flag the last repair of a command added (:mod:`bazel_ldfix.repair.keptrepair`)."""
    REPAIR = ("repair", 3, 1 << 27, 32)
    """The last repair of a command with the facts it read (:mod:`bazel_ldfix.repair.replay`):
    10,000 tests' are some 10 MB. The 32 most recently written are kept, a workspace's
    commands coming and going."""
    RAN_WITH = ("ran-with", 2, 16 << 20, None)
    """The values a ``bazel test`` gave its tests (:mod:`bazel_ldfix.diagnosis.runvalues`)."""
    OWN_COMMAND = ("own-command", 1, 1 << 12, None)
    """Which command of the tool's own ran the last Bazel command, one that runs no test
    (:mod:`bazel_ldfix.diagnosis.runvalues`)."""

    def __init__(self, directory: str, version: int, max_size: int, most: int | None) -> None:
        self.directory = directory
        self.version = version
        self.max_size = max_size
        self.most = most

    @property
    def header(self) -> bytes:
        """The first line of each file of this record, in this version."""
        return b"%s %s %d\n" % (NAME.encode(), self.directory.encode(), self.version)


def place(env: Mapping[str, str]) -> tuple[str, str]:
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
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return ""


def of_env(env: Mapping[str, str]) -> Store | None:
    """The store of the user ``env`` describes (:func:`place`), its directory created if
    need be; None when it cannot be trusted."""
    return at(place(env)[0])


def at(root: str) -> Store | None:
    """The store in ``root``, created mode 0700 (with its parents) if missing; None unless
    it is a real directory owned by this user that nobody else can write."""
    return Store(root) if _private_dir(root) is not None else None


@dataclass(frozen=True)
class Store:
    """The per-user directory, trusted when it was opened (:func:`at`); each use checks it
    again, and the record's directory in it."""

    root: str

    def path(self, record: Record, key: str) -> str:
        """The file of ``record`` kept for ``key`` (any text: its digest names the file).

        A file names its record and version, not its key: a record whose body may not
        match its key (two keys of one digest) keeps the key in its body and checks it.
        """
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
        return os.path.join(self.root, record.directory, digest[:_KEY_DIGEST])

    def keep(self, record: Record, key: str, body: bytes | Iterable[bytes]) -> bool:
        """Replace the file of ``record`` for ``key`` with ``body`` (or its chunks, in
        order: a large body is never whole in memory); False, and nothing left behind,
        when it cannot be written or would be larger than the record's cap.

        Of a record with a number to keep, the oldest files beyond it are removed.
        """
        directory = self._directory(record, create=True)
        if directory is None:
            return False
        chunks = (body,) if isinstance(body, bytes) else body
        written = _replace(self.path(record, key),
                           _sealed(_capped([record.header], chunks, limit=record.max_size)))
        if written and record.most is not None:
            _prune(directory, record.most)
        return written

    def recall(self, record: Record, key: str) -> bytes | None:
        """The body last kept of ``record`` for ``key``; None when there is none to
        believe (see the module's rules)."""
        if self._directory(record, create=False) is None:
            return None
        data = _read_private(self.path(record, key), record.max_size)
        whole = _unseal(data) if data is not None else None
        if whole is None or not whole.startswith(record.header):
            return None
        return whole[len(record.header):]

    def forget(self, record: Record, key: str) -> None:
        """Remove the file of ``record`` for ``key``, if there is one (best effort)."""
        if self._directory(record, create=False) is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path(record, key))

    def links_dir(self) -> str | None:
        """The directory the repair makes its links directories in, created if need be;
        None when it cannot be trusted (the same rules as the store's)."""
        if _private_dir(self.root, create=False) is None:
            return None
        return _private_dir(os.path.join(self.root, LINKS))

    def _directory(self, record: Record, *, create: bool) -> str | None:
        if _private_dir(self.root, create=False) is None:
            return None
        return _private_dir(os.path.join(self.root, record.directory), create=create)


@dataclass(frozen=True)
class Unusable:
    """A directory of the store that cannot be made or trusted, and why."""

    path: str
    reason: str             # the system's words (``Permission denied``), or what it is

    def words(self) -> str:
        return f"cannot make the per-user directory {self.path} ({self.reason})"


# What makes the per-user directory usable again (XDG_CACHE_HOME comes first, :func:`place`).
WAY_OUT = "set XDG_CACHE_HOME to a writable directory"


def why_not_private(path: str) -> str:
    """Why :func:`_private_dir` refuses ``path``, in words for a message: the system's
    reason it cannot be made (``Permission denied``, ``Not a directory``), or what it is."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid != os.geteuid():
        return "owned by another user"
    if not _private(st):
        return "others can write to it"
    return "usable"


def _private_dir(path: str, *, create: bool = True) -> str | None:
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


def _read_private(path: str, max_size: int) -> bytes | None:
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


class _TooLarge(Exception):
    """A body that would make a file larger than its record's cap: it is not written."""


def _capped(*parts: Iterable[bytes], limit: int) -> Iterator[bytes]:
    # The trailer is at most some 40 bytes; a file over the cap would never be read back.
    total = 0
    for chunks in parts:
        for chunk in chunks:
            total += len(chunk)
            if total > limit - 64:
                raise _TooLarge
            yield chunk


def _replace(path: str, chunks: Iterable[bytes]) -> bool:
    """Replace ``path`` with ``chunks`` atomically; False (and nothing left behind) on
    error. Its directory is one :func:`_private_dir` returned."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")  # mode 0600
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, path)
    except (OSError, _TooLarge):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    except BaseException:
        os.unlink(tmp)
        raise
    return True


def _sealed(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks, then a trailer over them: ``NUL NUL NUL end <length> <crc32> LF``."""
    length, crc = 0, 0
    for chunk in chunks:
        length += len(chunk)
        crc = zlib.crc32(chunk, crc)
        yield chunk
    yield _TRAILER + b"%d %08x\n" % (length, crc)


def _unseal(data: bytes) -> bytes | None:
    """What :func:`_sealed` wrote before its trailer; None for anything else (a file cut
    short, a byte changed)."""
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


def _prune(directory: str, keep: int) -> None:
    """Remove all but the ``keep`` most recently written files of ``directory``."""
    try:
        with os.scandir(directory) as entries:
            found = [(entry.stat(follow_symlinks=False).st_mtime_ns, entry.path)
                     for entry in entries if entry.is_file(follow_symlinks=False)]
    except OSError:
        return
    for _, old in sorted(found, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            os.unlink(old)

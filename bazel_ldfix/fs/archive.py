"""Reading a package as a CI ships it: a directory, a zip (a wheel) or a tar archive.

The package is outside data. Its format is decided by its bytes, never its name. Nothing of
it is written by the name it gives: a member worth reading is copied into a private
temporary directory under a number, so a name such as ``../../etc/profile`` cannot reach
anything. Every size a member claims is checked against the archive's real size before a
byte of it is read, the bytes read in all are bounded, and so is the number of members.
Links are followed only inside the package, by the package's own names.

Which members are worth reading is the caller's choice (``keep``): this layer knows files,
not what an ELF object is.
"""

from __future__ import annotations

import bz2
import contextlib
import enum
import errno
import functools
import gzip
import io
import lzma
import os
import posixpath
import shutil
import stat
import struct
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from bazel_ldfix.errors import BadInputError

HEAD = 8                  # the bytes ``keep`` is shown of each member
_CHUNK = 1 << 20
_MAX_LINK = 4096          # PATH_MAX: a link target longer than this is no link
_MAX_HOPS = 40            # Linux's MAXSYMLINKS: more links in one path is a loop

# A member's name and its first bytes: whether its bytes are read.
Keep = Callable[[str, bytes], bool]


class Format(str, enum.Enum):
    DIRECTORY = "directory"
    ZIP = "zip"
    TAR = "tar"
    TAR_GZ = "tar.gz"
    TAR_XZ = "tar.xz"
    TAR_BZ2 = "tar.bz2"

    @property
    def words(self) -> str:
        return "a directory" if self is Format.DIRECTORY else f"a {self.value} archive"


class LinkProblem(str, enum.Enum):
    """Why a link of the package is not followed."""

    OUTSIDE = "outside"      # its target leaves the package (an absolute path, or ../ past the top)
    LOOP = "loop"            # more than 40 links in one path
    DANGLING = "dangling"    # its target is not in the package
    NOT_A_FILE = "not-a-file"  # its target is a directory or a special file

    @property
    def words(self) -> str:
        return _LINK_WORDS[self]


_LINK_WORDS = {
    LinkProblem.OUTSIDE: "leaves the package: not followed",
    LinkProblem.LOOP: "a loop of links: not followed",
    LinkProblem.DANGLING: "its target is not in the package",
    LinkProblem.NOT_A_FILE: "its target is not a regular file",
}


@dataclass(frozen=True)
class Limits:
    """How much of a package is read at most; past any of these it is refused as bad input."""

    members: int = 100_000            # entries (files, links, directories)
    member_bytes: int = 4 << 30       # the size one member may claim
    total_bytes: int = 16 << 30       # member bytes read in all (decompressed)
    ratio: int = 200                  # decompressed bytes per compressed byte
    ratio_floor: int = 1 << 20        # below this many bytes the ratio is not applied


@dataclass(frozen=True)
class Member:
    """A regular file of the package whose bytes were kept."""

    name: str      # its path inside the package, normalized: lib/libx.so
    path: str      # where its bytes are: in the package directory, or the private copy
    size: int


@dataclass(frozen=True)
class Link:
    """A link of the package (a symbolic link, or a hard link of a tar archive)."""

    name: str
    target: str                    # as the link gives it
    resolved: str | None           # the regular file's name it leads to, inside the package
    problem: LinkProblem | None    # why it leads nowhere; None when it is followed


@dataclass(frozen=True)
class Package:
    path: str
    format: Format
    entries: int                   # every member listed, of every type
    files: tuple[Member, ...]      # the regular files kept, by name
    regular: frozenset[str]        # the names of every regular file, kept or not
    links: tuple[Link, ...]
    bytes_read: int                # member bytes read (decompressed)

    def names_of(self, member: str) -> tuple[str, ...]:
        """``member``'s own name, then every link's that leads to it."""
        return (member, *self._leading_to.get(member, ()))

    @functools.cached_property
    def _leading_to(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for link in self.links:
            if link.resolved is not None:
                out.setdefault(link.resolved, []).append(link.name)
        return {name: tuple(names) for name, names in out.items()}


@contextlib.contextmanager
def opened(path: str, keep: Keep, limits: Limits | None = None) -> Iterator[Package]:
    """The package at ``path``, its kept members readable until the block ends.

    Raises :class:`BadInputError` for what is no package, or a package past ``limits``, or
    a member name that leaves the package, with one line that names the member.
    """
    limits = limits or Limits()
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        yield _directory(path, keep, limits)
        return
    if not stat.S_ISREG(st.st_mode):
        raise BadInputError(f"{path}: not a regular file or directory")
    work = tempfile.mkdtemp(prefix="bazel-ldfix-package-")  # mode 0700: this user's alone
    try:
        with _open_regular(path) as raw:
            fmt = _format_of(raw, path)
            reader = _Reader(path, work, keep, limits, os.fstat(raw.fileno()).st_size)
            try:
                if fmt is Format.ZIP:
                    reader.zip(raw)
                else:
                    reader.tar(raw, fmt)
            except BadInputError:
                raise
            except (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError,
                    OSError, lzma.LZMAError, zlib.error, struct.error, RuntimeError,
                    ValueError, NotImplementedError) as exc:
                # A corrupt stream, a CRC that does not match, an encrypted member, a
                # compression method zipfile lacks: the archive cannot be read as a whole.
                raise BadInputError(f"{path}: corrupt {fmt.value} archive ({exc})") from None
        yield reader.package(fmt)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _open_regular(path: str) -> IO[bytes]:
    try:
        # O_NONBLOCK: a path swapped for a FIFO after the stat does not block the open.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BadInputError(f"{path}: not a regular file or directory")
    return os.fdopen(fd, "rb")


def _format_of(raw: IO[bytes], path: str) -> Format:
    head = raw.read(512)
    raw.seek(0)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return Format.ZIP
    if head[:2] == b"\x1f\x8b":
        return Format.TAR_GZ
    if head[:6] == b"\xfd7zXZ\x00":
        return Format.TAR_XZ
    if head[:3] == b"BZh":
        return Format.TAR_BZ2
    if len(head) == 512 and head[257:262] == b"ustar":
        return Format.TAR
    raise BadInputError(f"{path}: not a directory, a zip or wheel, or a tar archive "
                        "(.tar, .tar.gz, .tgz, .tar.xz, .tar.bz2)")


def member_name(name: str, package: str) -> str:
    """A member's name, normalized; :class:`BadInputError` for one that leaves the package."""
    text = name
    if text.startswith("/") or "\0" in text:
        raise BadInputError(f"{package}: member {name!r} has an absolute name")
    normal = posixpath.normpath(text)
    if normal == ".." or normal.startswith("../"):
        raise BadInputError(f"{package}: member {name!r} leaves the package (../)")
    return "" if normal == "." else normal


# -- following links inside the package ----------------------------------------------------

def _resolve(name: str, regular: frozenset[str], links: dict[str, tuple[str, bool]],
             directories: frozenset[str]) -> tuple[str | None, LinkProblem | None]:
    """Where ``name`` leads, by the package's own names: (a regular file, None) or
    (None, why not). ``links`` maps a link's name to its target and whether the target is
    read from the top of the package (a tar hard link) or from the link's directory."""
    done: list[str] = []
    todo = name.split("/")
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return None, LinkProblem.OUTSIDE
            done.pop()
            continue
        current = "/".join([*done, part])
        if current in links:
            hops += 1
            if hops > _MAX_HOPS:
                return None, LinkProblem.LOOP
            target, from_top = links[current]
            if target.startswith("/"):
                return None, LinkProblem.OUTSIDE
            if from_top:
                done = []
            todo = target.split("/") + todo
            continue
        done.append(part)
    final = "/".join(done)
    if not final:
        return None, LinkProblem.NOT_A_FILE
    if final in regular:
        return final, None
    if final in directories:
        return None, LinkProblem.NOT_A_FILE
    return None, LinkProblem.DANGLING


def _links(raw: dict[str, tuple[str, bool]], regular: frozenset[str],
           directories: frozenset[str]) -> tuple[Link, ...]:
    # A zip need not list its directories: every parent of a member is one.
    every = set(directories)
    for name in (*regular, *raw):
        parent = posixpath.dirname(name)
        while parent and parent not in every:
            every.add(parent)
            parent = posixpath.dirname(parent)
    known = frozenset(every)
    out = []
    for name in sorted(raw):
        resolved, problem = _resolve(name, regular, raw, known)
        out.append(Link(name, raw[name][0], resolved, problem))
    return tuple(out)


# -- a directory ---------------------------------------------------------------------------

def _directory(root: str, keep: Keep, limits: Limits) -> Package:
    files: list[Member] = []
    regular: set[str] = set()
    directories: set[str] = set()
    links: dict[str, tuple[str, bool]] = {}
    seen: dict[tuple[int, int], str] = {}   # a hard link is the file it links, not a copy
    entries = 0
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            listing = sorted(os.scandir(os.path.join(root, rel) if rel else root),
                             key=lambda e: e.name)
        except OSError as exc:
            raise BadInputError(f"{os.path.join(root, rel)}: {exc.strerror or exc}") from None
        for entry in listing:
            entries += 1
            if entries > limits.members:
                raise BadInputError(f"{root}: more than {limits.members} entries")
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_symlink():
                    links[name] = (os.readlink(entry.path), False)
                elif entry.is_dir(follow_symlinks=False):
                    directories.add(name)
                    stack.append(name)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    first = seen.setdefault((st.st_dev, st.st_ino), name)
                    if first != name:
                        links[name] = (first, True)
                        continue
                    regular.add(name)
                    if keep(name, _head(entry.path)):
                        files.append(Member(name, entry.path, st.st_size))
            except OSError as exc:
                raise BadInputError(f"{entry.path}: {exc.strerror or exc}") from None
    frozen = frozenset(regular)
    return Package(root, Format.DIRECTORY, entries, tuple(sorted(files, key=lambda m: m.name)),
                   frozen, _links(links, frozen, frozenset(directories)), 0)


def _head(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return b""
    try:
        return os.pread(fd, HEAD, 0) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            return b""
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# -- archives ------------------------------------------------------------------------------

class _Counted(io.RawIOBase):
    """The decompressed stream of a tar archive, counted: refused past the total bound, and
    past ``ratio`` times the compressed size (a decompression bomb)."""

    def __init__(self, stream: io.BufferedIOBase | IO[bytes], path: str, limits: Limits,
                 compressed: int | None) -> None:
        self._stream = stream
        self._path = path
        self._limits = limits
        self._compressed = compressed
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.count += n
        if self.count > self._limits.total_bytes:
            raise BadInputError(f"{self._path}: more than {self._limits.total_bytes} bytes "
                                "of members")
        if (self._compressed is not None and self.count > self._limits.ratio_floor
                and self.count > self._limits.ratio * self._compressed):
            raise BadInputError(
                f"{self._path}: decompresses to more than {self._limits.ratio} times its "
                f"size ({self._compressed} bytes): a decompression bomb")
        return n


_MAX_HEADER = 1 << 20     # a pax or GNU long-name header larger than this is no header
_HEADER_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                 tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)


class _HeaderTooLarge(tarfile.TarError):
    pass


class _BoundedTarInfo(tarfile.TarInfo):
    """A member header whose extended headers (pax, GNU long names) are bounded: tarfile
    reads those into memory whole, by the size they claim."""

    def _proc_member(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_TYPES and self.size > _MAX_HEADER:
            raise _HeaderTooLarge(f"an extended header claims {self.size} bytes, more than "
                                  f"{_MAX_HEADER}")
        return super()._proc_member(tarfile)  # type: ignore[misc, no-any-return]


class _Reader:
    """One archive's members, read once in order, the kept ones copied under numbers."""

    def __init__(self, path: str, work: str, keep: Keep, limits: Limits, size: int) -> None:
        self.path = path
        self.work = work
        self.keep = keep
        self.limits = limits
        self.size = size
        self.files: list[Member] = []
        self.regular: set[str] = set()
        self.directories: set[str] = set()
        self.links: dict[str, tuple[str, bool]] = {}
        self.entries = 0
        self.bytes_read = 0

    def package(self, fmt: Format) -> Package:
        regular = frozenset(self.regular)
        return Package(self.path, fmt, self.entries,
                       tuple(sorted(self.files, key=lambda m: m.name)), regular,
                       _links(self.links, regular, frozenset(self.directories)),
                       self.bytes_read)

    def _name(self, raw: str) -> str | None:
        """The member's name; None for the package's top itself (``./``)."""
        self.entries += 1
        if self.entries > self.limits.members:
            raise BadInputError(f"{self.path}: more than {self.limits.members} members")
        name = member_name(raw, self.path)
        if name and (name in self.regular or name in self.links):
            raise BadInputError(f"{self.path}: member {name!r} appears twice: which one is "
                                "unpacked depends on the tool")
        return name or None

    def _claim(self, name: str, claimed: int, most: int) -> None:
        """Refuse a member before reading it: larger than one member may be, than the
        archive can hold, or than what is left of the total bound."""
        if claimed > self.limits.member_bytes:
            raise BadInputError(f"{self.path}: member {name!r} claims {claimed} bytes, more "
                                f"than {self.limits.member_bytes}")
        if claimed > most:
            raise BadInputError(f"{self.path}: member {name!r} claims {claimed} bytes, more "
                                f"than the archive's {self.size} bytes can hold")
        if self.bytes_read + claimed > self.limits.total_bytes:
            raise BadInputError(f"{self.path}: more than {self.limits.total_bytes} bytes of "
                                "members")

    def _copy(self, name: str, head: bytes, rest: IO[bytes], claimed: int) -> None:
        """Keep the member when asked: its bytes, never more than it claimed, in a file of
        the private directory named by its number."""
        self.regular.add(name)
        self.bytes_read += len(head)
        if not self.keep(name, head):
            return
        target = os.path.join(self.work, f"{len(self.files):07d}")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        written = len(head)
        with os.fdopen(fd, "wb") as out:
            out.write(head)
            while True:
                chunk = rest.read(min(_CHUNK, claimed - written + 1))
                if not chunk:
                    break
                written += len(chunk)
                if written > claimed:
                    raise BadInputError(f"{self.path}: member {name!r} holds more than the "
                                        f"{claimed} bytes it claims")
                out.write(chunk)
        self.bytes_read += written - len(head)
        self.files.append(Member(name, target, written))

    def _link(self, name: str, target: str, from_top: bool) -> None:
        if len(target) > _MAX_LINK or not target:
            raise BadInputError(f"{self.path}: member {name!r} is a link with no usable "
                                "target")
        self.links[name] = (target, from_top)

    # -- zip ---------------------------------------------------------------------------

    def zip(self, raw: IO[bytes]) -> None:
        with zipfile.ZipFile(raw) as archive:
            infos = archive.infolist()
            if len(infos) > self.limits.members:
                raise BadInputError(f"{self.path}: more than {self.limits.members} members")
            for info in infos:
                name = self._name(info.filename)
                if name is None:
                    continue
                mode = info.external_attr >> 16
                # The member's compressed bytes must lie inside the archive, and what they
                # decompress to is bounded by the ratio (a zip bomb).
                if info.header_offset + info.compress_size > self.size:
                    raise BadInputError(f"{self.path}: member {name!r} runs past the end of "
                                        "the archive")
                most = (info.compress_size if info.compress_type == zipfile.ZIP_STORED
                        else max(self.limits.ratio * info.compress_size,
                                 self.limits.ratio_floor))
                if info.file_size > most and info.compress_type != zipfile.ZIP_STORED:
                    raise BadInputError(
                        f"{self.path}: member {name!r} claims {info.file_size} bytes from "
                        f"{info.compress_size} compressed, more than {self.limits.ratio} "
                        "times: a zip bomb")
                self._claim(name, info.file_size, most)
                if stat.S_ISLNK(mode):
                    with archive.open(info) as stream:
                        target = stream.read(_MAX_LINK + 1)
                    self._link(name, target.decode("utf-8", "surrogateescape"), False)
                elif info.is_dir():
                    self.directories.add(name)
                else:
                    with archive.open(info) as stream:
                        self._copy(name, stream.read(HEAD), stream, info.file_size)

    # -- tar ---------------------------------------------------------------------------

    def tar(self, raw: IO[bytes], fmt: Format) -> None:
        compressed = None if fmt is Format.TAR else self.size
        counted = _Counted(_decompressed(raw, fmt), self.path, self.limits, compressed)
        # Read once, in order ("r|"): a compressed archive is never decompressed twice.
        with tarfile.open(fileobj=counted, mode="r|", tarinfo=_BoundedTarInfo) as archive:
            for info in archive:
                self._tar_member(archive, info, compressed)
        self.bytes_read = max(self.bytes_read, counted.count)

    def _tar_member(self, archive: tarfile.TarFile, info: tarfile.TarInfo,
                    compressed: int | None) -> None:
        name = self._name(info.name)
        if name is None:
            return
        if compressed is None:
            # Uncompressed: the member's bytes are where its header says, inside the file.
            most = self.size - info.offset_data
        else:
            most = max(self.limits.ratio * compressed, self.limits.ratio_floor)
        self._claim(name, info.size if info.isreg() else 0, most)
        if info.issym():
            self._link(name, info.linkname, False)
        elif info.islnk():
            self._link(name, member_name(info.linkname, self.path), True)
        elif info.isdir():
            self.directories.add(name)
        elif info.isreg():
            member = archive.extractfile(info)
            if member is None:
                return
            with member:
                self._copy(name, member.read(HEAD), member, info.size)


def _decompressed(raw: IO[bytes], fmt: Format) -> io.BufferedIOBase | IO[bytes]:
    """The tar stream inside ``raw``; closed with ``raw``."""
    if fmt is Format.TAR_GZ:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if fmt is Format.TAR_XZ:
        return lzma.LZMAFile(raw, mode="rb")
    if fmt is Format.TAR_BZ2:
        return bz2.BZ2File(raw, mode="rb")
    return raw

"""Read what the dynamic loader reads of an ELF file, and nothing more.

This is the project's only ELF reader. It reads the ELF header, the program headers, the
PT_DYNAMIC segment and the handful of strings the dynamic entries point at, with ``pread`` on
one file descriptor: a 100 MB shared library costs a few small reads. On request it also
reads the dynamic symbol table and the first bytes of each exported function
(:func:`exported_functions`, for the CUDA stub rule of ``loader/cuda.py``). It works from the
segments, not the section table, because the loader does: a stripped section table is valid
and the loader never looks at it.

``struct`` is used rather than pyelftools because importing pyelftools alone takes about
50 ms, most of a command's budget; pyelftools remains the oracle the tests compare against.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from bazel_ldfix import machines
from bazel_ldfix.errors import BadInputError, MalformedElfError, NotElfError
from bazel_ldfix.machines import ELFCLASS32 as ELFCLASS32
from bazel_ldfix.machines import ELFCLASS64 as ELFCLASS64

ELFMAG = b"\x7fELF"
ELFDATA2LSB, ELFDATA2MSB = 1, 2
EV_CURRENT = 1
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 14, 15, 29
DT_HASH, DT_SYMTAB, DT_SYMENT, DT_GNU_HASH = 4, 6, 11, 0x6FFFFEF5
DT_STRSZ, DT_FLAGS_1 = 10, 0x6FFFFFFB
DT_VERDEF, DT_VERDEFNUM = 0x6FFFFFFC, 0x6FFFFFFD
DT_VERNEED, DT_RELR = 0x6FFFFFFE, 36
DT_AUDIT, DT_DEPAUDIT = 0x6FFFFEFC, 0x6FFFFEFB
VER_FLG_WEAK = 0x2
DF_1_NODEFLIB = 0x800
DF_1_PIE = 0x08000000
ET_NAMES = {0: "none", 1: "relocatable", 2: "executable", 3: "shared object", 4: "core"}

# Sizes of the ELF header and one program header, by class.
_EHDR_SIZE = {ELFCLASS32: 52, ELFCLASS64: 64}
_PHDR_SIZE = {ELFCLASS32: 32, ELFCLASS64: 56}
# Caps no real file reaches, beyond which a file is reported as malformed rather than read
# for minutes. The largest programs seen carry a few hundred DT_NEEDED entries (Bazel test
# executables in dynamic mode), a few hundred symbol-version references (a C++ program
# against libstdc++ and libc) and run paths of a few kilobytes (one $ORIGIN entry per
# dependency directory).
_MAX_DYNAMIC = 1 << 20      # bytes of PT_DYNAMIC (65,536 entries)
_MAX_PHNUM = 1 << 12        # program headers (e_phnum is 16 bits; real files have ~15)
_MAX_NEEDED = 1 << 12       # DT_NEEDED entries
_MAX_VERSION_ENTRIES = 1 << 14  # Verneed + Vernaux (or Verdef) entries, all together
_MAX_NAME = 1 << 12         # a DT_NEEDED, DT_SONAME or version name: PATH_MAX, as open() has
_MAX_PATH_LIST = 1 << 18    # a DT_RPATH or DT_RUNPATH string


@dataclass(frozen=True)
class ElfHeader:
    """The fields of the ELF header the loader checks before it maps a file."""

    ident: bytes  # e_ident, 16 bytes
    type: int
    machine: int
    version: int
    phoff: int
    phentsize: int
    phnum: int

    @property
    def elf_class(self) -> int:
        return self.ident[4]

    @property
    def data(self) -> int:
        return self.ident[5]

    @property
    def osabi(self) -> int:
        return self.ident[7]

    @property
    def byteorder(self) -> str:
        return "<" if self.data == ELFDATA2LSB else ">"


@dataclass(frozen=True)
class VersionNeed:
    """One entry of .gnu.version_r: the versions an object needs from one file."""

    file: str                       # vn_file, a DT_NEEDED name
    versions: tuple[str, ...]
    weak: tuple[bool, ...]          # VER_FLG_WEAK of each version


@dataclass(frozen=True)
class ElfInfo:
    """An ELF object as the dynamic loader sees it."""

    path: str
    header: ElfHeader
    interp: str | None
    has_dynamic: bool
    needed: tuple[str, ...]
    soname: str | None
    rpath: str | None
    runpath: str | None
    flags_1: int
    version_needs: tuple[VersionNeed, ...] = ()
    has_verdef: bool = False
    has_relr: bool = False
    has_audit: bool = False         # DT_AUDIT or DT_DEPAUDIT: the loader would run code

    @property
    def elf_class(self) -> int:
        return self.header.elf_class

    @property
    def machine(self) -> int:
        return self.header.machine

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)


def machine_name(machine: int) -> str:
    return machines.name(machine)


_HEAD = 16 << 10     # read at once from the start of a file (bytes)


class _Reader:
    """pread on one descriptor, raising glibc's words when the file ends early.

    The file's first :data:`_HEAD` bytes are read once, on the first read: a small
    program's headers, names and version needs all lie there (one read instead of twenty).
    """

    def __init__(self, fd: int, path: str, size: int | None = None,
                 head: bytes | None = None, *, record: bool = False) -> None:
        self.fd = fd
        self.path = path
        self.size = os.fstat(fd).st_size if size is None else size
        self._head = head   # given: the file's first min(size, _HEAD) bytes
        # With ``record``: the (start, end) of every range of the head that was read, a
        # string with its NUL; None once something was read past the head (see Layouts).
        self.ranges: list[tuple[int, int]] | None = [] if record else None

    def head(self) -> bytes:
        if self._head is None:
            self._head = self._pread(min(self.size, _HEAD), 0)
        return self._head

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            # Checked before reading: a corrupt header can ask for gigabytes, or for an
            # offset near 2**63 that pread cannot even take.
            raise NotElfError(f"{self.path}: file too short")
        head = self.head()
        if offset + size <= len(head):
            if self.ranges is not None:
                self.ranges.append((offset, offset + size))
            return head[offset:offset + size]
        self.ranges = None
        data = self._pread(size, offset)
        if len(data) < size:
            raise NotElfError(f"{self.path}: file too short")
        return data

    def _pread(self, size: int, offset: int) -> bytes:
        try:
            return os.pread(self.fd, size, offset)
        except OSError as exc:
            raise BadInputError(f"{self.path}: {exc.strerror or exc}") from None

    def cstring(self, offset: int, limit: int = _MAX_NAME) -> str:
        """The NUL-terminated string at ``offset``, at most ``limit`` bytes long."""
        head = self._head if self._head is not None else self.head()
        if 0 <= offset < len(head):     # the head is never longer than the file
            end = head.find(b"\0", offset, offset + limit + 1)
            if end >= 0:
                if self.ranges is not None:
                    self.ranges.append((offset, end + 1))
                return head[offset:end].decode("utf-8", "surrogateescape")
        self.ranges = None
        if not 0 <= offset < self.size:
            raise MalformedElfError(
                f"{self.path}: string offset {offset:#x} is outside the file")
        # Short reads first, growing: most names are a few dozen bytes.
        want = 256
        while True:
            data = self._pread(min(want, limit + 1, self.size - offset), offset)
            end = data.find(b"\0")
            if end >= 0 or len(data) < want:
                break
            want *= 8
        if end < 0:
            if len(data) > limit:
                raise MalformedElfError(
                    f"{self.path}: a string at {offset:#x} is longer than {limit} bytes")
            raise MalformedElfError(
                f"{self.path}: string table runs past the end of the file")
        return data[:end].decode("utf-8", "surrogateescape")


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str | None:
    """None for a regular file or a directory, else what else it is (\"a FIFO\")."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None


def open_regular(path: str, what: str = "") -> int:
    """Open ``path`` read-only without blocking; BadInputError unless it is a regular file.

    O_NONBLOCK: opening a FIFO would otherwise wait for a writer; the flag has no effect on
    a regular file. A symlink to a regular file is fine. A directory is reported as one.
    """
    return open_regular_stat(path, what)[0]


def open_regular_stat(path: str, what: str = "") -> tuple[int, os.stat_result]:
    """:func:`open_regular`, with the status of the file opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise BadInputError(f"{what}{path}: {exc.strerror or exc}") from None
    except ValueError:      # a NUL in a name read from a log or an event: no file has it
        raise BadInputError(f"{what}{path}: a NUL byte in the name") from None
    st = os.fstat(fd)
    mode = st.st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "is a directory" if stat.S_ISDIR(mode) else \
            f"is {file_kind(mode) or 'not a regular file'}, not a regular file"
        raise BadInputError(f"{what}{path}: {kind}")
    return fd, st


def open_elf(path: str) -> int:
    """Open ``path`` read-only (a regular file only), mapping OS errors to BadInputError."""
    return open_regular(path)


def parse_header(data: bytes, path: str) -> ElfHeader:
    """Decode an ELF header from the first bytes of a file.

    Raises :class:`NotElfError` with glibc's own words for the two cases glibc names: fewer
    bytes than a header (``file too short``) and a wrong magic (``invalid ELF header``).
    """
    if len(data) >= 4 and data[:4] != ELFMAG:
        raise NotElfError(f"{path}: invalid ELF header",
                          archive=data[:8] in (b"!<arch>\n", b"!<thin>\n"))
    if len(data) < 16 or data[4] not in _EHDR_SIZE or len(data) < _EHDR_SIZE[data[4]]:
        raise NotElfError(f"{path}: file too short")
    ident = data[:16]
    order = "<" if ident[5] == ELFDATA2LSB else ">"
    if ident[4] == ELFCLASS64:
        e_type, e_machine, e_version, _entry, e_phoff = struct.unpack_from(
            order + "HHIQQ", data, 16)
        e_phentsize, e_phnum = struct.unpack_from(order + "HH", data, 54)
    else:
        e_type, e_machine, e_version, _entry, e_phoff = struct.unpack_from(
            order + "HHIII", data, 16)
        e_phentsize, e_phnum = struct.unpack_from(order + "HH", data, 42)
    return ElfHeader(ident, e_type, e_machine, e_version, e_phoff, e_phentsize, e_phnum)


def read_header(path: str) -> ElfHeader:
    """Only the ELF header of ``path`` (one small read)."""
    fd = open_elf(path)
    try:
        return parse_header(_read_start(fd, path), path)
    finally:
        os.close(fd)


def _read_start(fd: int, path: str, size: int = 64) -> bytes:
    try:
        return os.pread(fd, size, 0)
    except OSError as exc:
        # EISDIR: a directory opens fine but cannot be read.
        reason = "is a directory" if exc.errno == errno.EISDIR else exc.strerror
        raise BadInputError(f"{path}: {reason}") from None


def read_elf(path: str) -> ElfInfo:
    """The header, PT_INTERP and dynamic entries of ``path``.

    Raises :class:`NotElfError` for files that are not ELF or are cut short and
    :class:`BadInputError` for files that cannot be opened or read.
    """
    fd = open_elf(path)
    try:
        return read_elf_fd(fd, path)
    finally:
        os.close(fd)


def read_elf_fd(fd: int, path: str, *, size: int | None = None,
                layouts: Layouts | None = None) -> ElfInfo:
    """:func:`read_elf` on a descriptor the caller opened (and closes); ``path`` names it.
    ``size``: the file's size, when the caller has just read its status; ``layouts``: the
    files read before, whose facts another file shares when it holds the same bytes
    wherever they were read from (:class:`Layouts`)."""
    if size is None:
        size = os.fstat(fd).st_size
    # One read for the header and the head (the header is its first 64 bytes, which are
    # read whatever the size says, as a header alone would be).
    data = _read_start(fd, path, max(64, min(size, _HEAD)))
    header = parse_header(data[:64], path)
    head = data[:min(size, _HEAD)]
    if layouts is None:
        return _read_dynamic(_Reader(fd, path, size, head), header)
    info = layouts.find(header, head, path)
    if info is None:
        reader = _Reader(fd, path, size, head, record=True)
        info = _read_dynamic(reader, header)
        if reader.ranges is not None:
            layouts.add(header, head, reader.ranges, info)
    return info


class Layouts:
    """The dynamic facts of files read before, with the bytes they were read from.

    :func:`_read_dynamic` reads only where the header and what it read before point, and
    its result is a function of those bytes alone. So a file with an equal header and the
    same bytes at every place another file's reading looked (all within the first
    :data:`_HEAD` bytes of both) has the same facts but its path: the executables of tests
    that link the same libraries differ in their code, not in their dynamic sections. Only
    a reading that succeeded within the head is kept; a file that matches none is read.
    """

    _PER_HEADER = 16        # layouts kept for one header
    _MAX = 1024             # layouts kept in all
    _GAP = 64               # ranges this close are compared as one

    def __init__(self) -> None:
        self._known: dict[ElfHeader, list[tuple[tuple[tuple[int, int, bytes], ...],
                                                ElfInfo]]] = {}
        self._count = 0

    def find(self, header: ElfHeader, head: bytes, path: str) -> ElfInfo | None:
        """The facts of the file at ``path`` (header ``header``, first bytes ``head``)
        when a file read before holds the same bytes where it was read; else None."""
        for ranges, info in self._known.get(header, ()):
            for start, end, chunk in ranges:
                # A range past the end of this head slices short, and differs.
                if head[start:end] != chunk:
                    break
            else:
                return _with_path(info, path)
        return None

    def add(self, header: ElfHeader, head: bytes, ranges: list[tuple[int, int]],
            info: ElfInfo) -> None:
        known = self._known.setdefault(header, [])
        if len(known) >= self._PER_HEADER or self._count >= self._MAX:
            return
        merged: list[list[int]] = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1] + self._GAP:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        # Comparing the bytes between two ranges too asks more of a twin, never less.
        known.append((tuple((start, end, head[start:end]) for start, end in merged), info))
        self._count += 1


def _with_path(info: ElfInfo, path: str) -> ElfInfo:
    """``info`` of the file at ``path`` (``dataclasses.replace`` without its cost)."""
    return ElfInfo(path, info.header, info.interp, info.has_dynamic, info.needed, info.soname,
                   info.rpath, info.runpath, info.flags_1, info.version_needs,
                   info.has_verdef, info.has_relr, info.has_audit)


def _read_dynamic(reader: _Reader, header: ElfHeader) -> ElfInfo:
    phdrs, dynamic = _segments(reader, header)
    interp = next((reader.cstring(off) for kind, off, *_ in phdrs if kind == PT_INTERP), None)
    if dynamic is None:
        return ElfInfo(reader.path, header, interp, False, (), None, None, None, 0)
    tags = _tags(header, dynamic)
    last = dict(tags)  # a repeated tag: the loader keeps the last (get-dynamic-info.h)
    strtab = last.get(DT_STRTAB)
    needed_values = [v for t, v in tags if t == DT_NEEDED]
    if len(needed_values) > _MAX_NEEDED:
        raise MalformedElfError(f"{reader.path}: {len(needed_values)} DT_NEEDED entries "
                                f"(more than {_MAX_NEEDED}: corrupt)")
    base = 0    # the string table's file offset: found where the first string is read
    if needed_values or DT_SONAME in last or DT_RPATH in last or DT_RUNPATH in last:
        if strtab is None:
            raise NotElfError(f"{reader.path}: dynamic section has no DT_STRTAB")
        base = _file_offset(phdrs, strtab, reader.path)
    cstring = reader.cstring
    needed = tuple([cstring(base + v) for v in needed_values])
    soname = cstring(base + last[DT_SONAME]) if DT_SONAME in last else None
    rpath = cstring(base + last[DT_RPATH], _MAX_PATH_LIST) if DT_RPATH in last else None
    runpath = cstring(base + last[DT_RUNPATH], _MAX_PATH_LIST) if DT_RUNPATH in last else None
    needs: tuple[VersionNeed, ...] = ()
    if DT_VERNEED in last and strtab is not None:
        needs = _version_needs(reader, header, _file_offset(phdrs, last[DT_VERNEED], reader.path),
                               base or _file_offset(phdrs, strtab, reader.path))
    return ElfInfo(reader.path, header, interp, True, needed, soname, rpath, runpath,
                   last.get(DT_FLAGS_1, 0), needs, DT_VERDEF in last, DT_RELR in last,
                   DT_AUDIT in last or DT_DEPAUDIT in last)


# Elf32_Verneed and Elf64_Verneed are the same: vn_version, vn_cnt, vn_file, vn_aux, vn_next;
# Elf*_Vernaux: vna_hash, vna_flags, vna_other, vna_name, vna_next. Both 16 bytes.
_VERNEED = struct.Struct("HHIII")
_VERNAUX = struct.Struct("IHHII")
_VERSION_NEED_STRUCTS = {little: (struct.Struct(order + "HHIII"), struct.Struct(order + "IHHII"))
                         for little, order in ((True, "<"), (False, ">"))}


def _version_needs(reader: _Reader, header: ElfHeader, at: int, strtab: int
                   ) -> tuple[VersionNeed, ...]:
    """.gnu.version_r, walked as dl-version.c walks it: by vn_next and vna_next."""
    verneed, vernaux = _VERSION_NEED_STRUCTS[header.data == ELFDATA2LSB]
    out = []
    budget = _MAX_VERSION_ENTRIES  # all entries together: the walk stays linear
    read, cstring = reader.read, reader.cstring
    while True:
        budget -= 1
        if budget < 0:
            raise _too_many_versions(reader.path)
        _version, _cnt, file, aux, nxt = verneed.unpack(read(at, 16))
        names: list[str] = []
        weak: list[bool] = []
        aux_at = at + aux
        while True:
            budget -= 1
            if budget < 0:
                raise _too_many_versions(reader.path)
            _hash, flags, _other, name, aux_next = vernaux.unpack(read(aux_at, 16))
            names.append(cstring(strtab + name))
            weak.append(bool(flags & VER_FLG_WEAK))
            if aux_next == 0:
                break
            aux_at += aux_next
        out.append(VersionNeed(cstring(strtab + file), tuple(names), tuple(weak)))
        if nxt == 0:
            break
        at += nxt
    return tuple(out)


def _too_many_versions(path: str) -> MalformedElfError:
    return MalformedElfError(f"{path}: more than {_MAX_VERSION_ENTRIES} symbol-version "
                             "entries (corrupt)")


_Phdr = tuple[int, int, int, int, int]  # p_type, p_offset, p_vaddr, p_filesz, p_memsz


def _segments(reader: _Reader, header: ElfHeader) -> tuple[list[_Phdr], bytes | None]:
    """Every program header, and the bytes of the PT_DYNAMIC segment (None: there is none).

    The loader keeps the last PT_DYNAMIC it sees (rtld.c, _dl_map_object_from_fd).
    """
    is64 = header.elf_class == ELFCLASS64
    order = header.byteorder
    if header.phnum > _MAX_PHNUM:
        raise MalformedElfError(f"{reader.path}: {header.phnum} program headers (corrupt)")
    if header.phnum and header.phentsize < _PHDR_SIZE[header.elf_class]:
        raise NotElfError(f"{reader.path}: ELF file's phentsize not the expected size")
    table = reader.read(header.phoff, header.phentsize * header.phnum) if header.phnum else b""
    entry = _PHDR_STRUCTS[order, is64]
    if header.phentsize == entry.size:
        rows = entry.iter_unpack(table)
    else:   # larger entries than the standard's: the standard fields come first
        rows = (entry.unpack_from(table, index * header.phentsize)
                for index in range(header.phnum))
    if is64:
        phdrs: list[_Phdr] = [(p_type, p_offset, p_vaddr, p_filesz, p_memsz) for
                              p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz
                              in rows]
    else:
        phdrs = [(p_type, p_offset, p_vaddr, p_filesz, p_memsz) for
                 p_type, p_offset, p_vaddr, _paddr, p_filesz, p_memsz in rows]
    dynamic_at: tuple[int, int] | None = None
    for p_type, p_offset, _vaddr, p_filesz, _memsz in phdrs:
        if p_type == PT_DYNAMIC:
            if p_filesz > _MAX_DYNAMIC:
                raise MalformedElfError(
                    f"{reader.path}: PT_DYNAMIC segment is implausibly large")
            dynamic_at = (p_offset, p_filesz)
    dynamic = reader.read(*dynamic_at) if dynamic_at is not None else None
    return phdrs, dynamic


# Elf64_Phdr and Elf32_Phdr (the standard's fields, in the order of each class), and one
# dynamic entry (d_tag, d_val), by byte order and class.
_PHDR_STRUCTS = {(order, is64): struct.Struct(order + ("IIQQQQQ" if is64 else "IIIIII"))
                 for order in "<>" for is64 in (True, False)}
_DYN_STRUCTS = {(order, is64): struct.Struct(order + ("qQ" if is64 else "iI"))
                for order in "<>" for is64 in (True, False)}


def _tags(header: ElfHeader, dynamic: bytes) -> list[tuple[int, int]]:
    """The dynamic entries up to DT_NULL, as (tag, value)."""
    entry = _DYN_STRUCTS[header.byteorder, header.elf_class == ELFCLASS64]
    tags = list(entry.iter_unpack(dynamic[: len(dynamic) - len(dynamic) % entry.size]))
    for at, (tag, _value) in enumerate(tags):
        if tag == DT_NULL:
            return tags[:at]
    return tags


def _file_offset(phdrs: list[_Phdr], vaddr: int, path: str) -> int:
    """Map a virtual address to a file offset through the PT_LOAD segments."""
    for p_type, p_offset, p_vaddr, p_filesz, _memsz in phdrs:
        if p_type == PT_LOAD and p_vaddr <= vaddr < p_vaddr + p_filesz:
            return vaddr - p_vaddr + p_offset
    raise NotElfError(f"{path}: DT_STRTAB address {vaddr:#x} is outside every PT_LOAD segment")


# -- symbol versions (.gnu.version_d) -------------------------------------------------------

VER_FLG_BASE = 0x1            # the entry naming the file itself, not a version
# Elf32_Verdef and Elf64_Verdef are the same: vd_version, vd_flags, vd_ndx, vd_cnt, vd_hash,
# vd_aux, vd_next; then Elf*_Verdaux: vda_name, vda_next.
_VERDEF = struct.Struct("HHHHIII")
_VERDAUX = struct.Struct("II")


def version_definitions(path: str) -> tuple[str, ...]:
    """The symbol versions ``path`` defines (``GLIBCXX_3.4.30``, ``XDEMO_2``), in file order.

    Read as the loader's version check reads them (glibc elf/dl-version.c, match_symbol):
    through DT_VERDEF and DT_VERDEFNUM of the dynamic segment, each entry's first auxiliary
    name from DT_STRTAB. The base entry (VER_FLG_BASE, the file's own name) is left out.
    A library without DT_VERDEF defines none (and the loader's check lets it pass silently).
    """
    with _dynamic_of(path) as (reader, header, phdrs, last):
        if DT_VERDEF not in last:
            return ()
        strtab = _strtab(phdrs, last, path)
        count = last.get(DT_VERDEFNUM, 0)
        if count > _MAX_VERSION_ENTRIES:
            raise MalformedElfError(f"{path}: DT_VERDEFNUM {count} (more than "
                                    f"{_MAX_VERSION_ENTRIES}: corrupt)")
        verdef = struct.Struct(header.byteorder + _VERDEF.format)
        verdaux = struct.Struct(header.byteorder + _VERDAUX.format)
        at = _file_offset(phdrs, last[DT_VERDEF], path)
        names: list[str] = []
        for _ in range(count):
            _ver, flags, _ndx, cnt, _hash, aux, nxt = verdef.unpack(reader.read(at, verdef.size))
            if cnt and not flags & VER_FLG_BASE:
                name, _next = verdaux.unpack(reader.read(at + aux, verdaux.size))
                names.append(reader.cstring(strtab + name))
            if nxt == 0:
                break
            at += nxt
        return tuple(names)


@contextlib.contextmanager
def _dynamic_of(path: str) -> Iterator[tuple[_Reader, ElfHeader, list[_Phdr], dict[int, int]]]:
    """The file opened to read what its dynamic segment points at: its reader, header,
    program headers and the last value of each dynamic tag (closed on leaving)."""
    fd = open_elf(path)
    try:
        reader = _Reader(fd, path)
        header = parse_header(_read_start(fd, path), path)
        phdrs, dynamic = _segments(reader, header)
        yield reader, header, phdrs, dict(_tags(header, dynamic or b""))
    finally:
        os.close(fd)


def _strtab(phdrs: list[_Phdr], last: dict[int, int], path: str) -> int:
    """The file offset of DT_STRTAB, which every name of the dynamic segment is read from."""
    if DT_STRTAB not in last:
        raise NotElfError(f"{path}: dynamic section has no DT_STRTAB")
    return _file_offset(phdrs, last[DT_STRTAB], path)


# -- exported functions (.dynsym) -----------------------------------------------------------

STT_FUNC = 2
STB_GLOBAL, STB_WEAK = 1, 2
STV_DEFAULT, STV_PROTECTED = 0, 3
_SYM_STRUCTS = {(order, is64): struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
                for order in "<>" for is64 in (True, False)}


@dataclass(frozen=True)
class Function:
    """A function an object exports, and the first bytes of its code as the file holds them."""

    name: str
    code: bytes         # fewer bytes than asked when its segment's file part ends first


def exported_functions(path: str, *, code: int = 16, limit: int = 1 << 16,
                       span: int = 1 << 20) -> tuple[Function, ...] | None:
    """The functions ``path`` exports, each with its first ``code`` bytes; nothing is run.

    Read as the loader finds symbols: DT_SYMTAB and DT_STRTAB of PT_DYNAMIC, the number of
    symbols from DT_HASH (``nchain``) or by walking DT_GNU_HASH to its last chain, so that
    ``strip`` and a removed section table change nothing. A function is a defined
    ``STT_FUNC`` symbol, global or weak, of default or protected visibility. Its bytes are
    read from the part of the PT_LOAD segment that holds its address; none when no
    segment's file part does.

    Bounded: None when the file has more than ``limit`` dynamic symbols, or when the
    functions' first bytes lie more than ``span`` bytes apart. Every offset and count is
    checked against the file before it is read (:class:`NotElfError` otherwise).
    """
    with _dynamic_of(path) as (reader, header, phdrs, last):
        if DT_SYMTAB not in last:
            return ()
        strtab = _strtab(phdrs, last, path)
        is64 = header.elf_class == ELFCLASS64
        entry = _SYM_STRUCTS[header.byteorder, is64]
        if last.get(DT_SYMENT, entry.size) != entry.size:
            raise MalformedElfError(f"{path}: DT_SYMENT is {last[DT_SYMENT]}, not "
                                    f"{entry.size}")
        count = _symbol_count(reader, header, phdrs, last, limit)
        if count is None:
            return None
        table = reader.read(_file_offset(phdrs, last[DT_SYMTAB], path), count * entry.size)
        found: list[tuple[int, int]] = []       # (st_name, st_value)
        for fields in entry.iter_unpack(table):
            if is64:
                st_name, st_info, st_other, st_shndx, st_value, _size = fields
            else:
                st_name, st_value, _size, st_info, st_other, st_shndx = fields
            if st_shndx != 0 and st_info & 0xF == STT_FUNC \
                    and st_info >> 4 in (STB_GLOBAL, STB_WEAK) \
                    and st_other & 0x3 in (STV_DEFAULT, STV_PROTECTED):
                found.append((st_name, st_value))
        where = [_code_range(phdrs, value, code) for _name, value in found]
        placed = [w for w in where if w is not None]
        blob, low = b"", 0
        if placed:
            low, high = min(w[0] for w in placed), max(w[1] for w in placed)
            if high - low > span:
                return None
            blob = reader.read(low, high - low)
        return tuple(Function(reader.cstring(strtab + name),
                              blob[w[0] - low: w[1] - low] if w is not None else b"")
                     for (name, _value), w in zip(found, where, strict=True))


def _symbol_count(reader: _Reader, header: ElfHeader, phdrs: list[_Phdr],
                  last: dict[int, int], limit: int) -> int | None:
    """How many entries .dynsym has, as the loader's hash tables say (None: more than
    ``limit``). With neither table the loader can look nothing up: 0."""
    words = struct.Struct(header.byteorder + "IIII")
    if DT_HASH in last:
        # nbucket, nchain: every symbol has one chain entry.
        at = _file_offset(phdrs, last[DT_HASH], reader.path)
        _nbucket, nchain = struct.unpack(header.byteorder + "II", reader.read(at, 8))
        return int(nchain) if nchain <= limit else None
    if DT_GNU_HASH not in last:
        return 0
    # nbuckets, symoffset, bloom_size, bloom_shift; the bloom words; the buckets; then one
    # chain word per hashed symbol, the last of each chain with its low bit set.
    at = _file_offset(phdrs, last[DT_GNU_HASH], reader.path)
    nbuckets, symoffset, bloom_size, _shift = (
        int(w) for w in words.unpack(reader.read(at, 16)))
    if nbuckets > limit or bloom_size > limit or symoffset > limit:
        return None
    buckets_at = at + 16 + bloom_size * (8 if header.elf_class == ELFCLASS64 else 4)
    raw = reader.read(buckets_at, 4 * nbuckets)
    top: int = max(struct.unpack(f"{header.byteorder}{nbuckets}I", raw), default=0)
    if top < symoffset:
        return symoffset        # no symbol is hashed (an empty bucket holds 0)
    # The chain words from the top bucket's symbol on, a page at a time, cut at the file's
    # end (a chain that runs past it is reported by the read of the last word).
    at = buckets_at + 4 * nbuckets + 4 * (top - symoffset)
    index = top
    chain = struct.Struct(header.byteorder + "I")
    while index < limit:
        many = max(1, min(1024, limit - index, (reader.size - at) // 4))
        for (word,) in chain.iter_unpack(reader.read(at, 4 * many)):
            if word & 1:
                return index + 1
            index += 1
        at += 4 * many
    return None


def _code_range(phdrs: list[_Phdr], vaddr: int, size: int) -> tuple[int, int] | None:
    """The file range of the ``size`` bytes at ``vaddr``, cut at the end of the file part
    of the PT_LOAD that holds it; None when none holds it."""
    for p_type, p_offset, p_vaddr, p_filesz, _memsz in phdrs:
        if p_type == PT_LOAD and p_vaddr <= vaddr < p_vaddr + p_filesz:
            start = vaddr - p_vaddr + p_offset
            return start, min(start + size, p_offset + p_filesz)
    return None

"""One candidate file, checked as glibc 2.36's ``open_verify`` and ``_dl_map_object_from_fd``
check it (elf/dl-load.c), and the name an object is opened by."""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, NotElfError

if TYPE_CHECKING:
    from bazel_ldfix.fs.memo import Memo


DF_1_PIE = 0x08000000


# glibc's LIBC_ABI_MAX for EI_ABIVERSION under ELFOSABI_GNU (UNIQUE, IFUNC, ABSOLUTE).
_LIBC_ABI_MAX = 4


ELFOSABI_SYSV, ELFOSABI_GNU = 0, 3


# open_verify reads this much of the file at once (struct filebuf, 64-bit).
_FILEBUF_SIZE = 832


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Verdict:
    """What the loader decides about one candidate file (``open_verify`` and the checks
    ``_dl_map_object_from_fd`` makes before mapping it).

    Exactly one of three outcomes: ``info`` is set (accepted); ``fatal`` is set (the whole
    load stops, in glibc's words); or neither (the search goes on, ``reason`` says why).
    """

    info: elf.ElfInfo | None = None
    reason: str | None = None
    fatal: bool = False
    names_request: bool = False       # glibc names the DT_NEEDED entry, not the file, in the error
    exists: bool = True               # False: nothing to open at that path
    open_errno: int = 0               # errno open_path sees afterwards (ENOENT after a skip)
    file_id: tuple[int, int] | None = None
    blocks: bool = False              # not a regular file: running the real loader could hang

    @property
    def accepted(self) -> bool:
        return self.info is not None


def runs_as_program(info: elf.ElfInfo) -> bool:
    """Whether ``info`` is a program the kernel starts (an executable, a PIE), rather than
    a shared library that a loader opens by name: it decides where its ``$ORIGIN`` is.

    A PIE without DF_1_PIE (linkers before binutils 2.26 did not set it) is told from a
    library by its PT_INTERP and the SONAME it lacks.
    """
    return info.header.type == elf.ET_EXEC or bool(info.flags_1 & DF_1_PIE) or (
        info.interp is not None and info.soname is None)


def opened_path(path: str, info: elf.ElfInfo) -> str:
    """The name glibc takes ``path``'s ``$ORIGIN`` from at a real start: the real path of a
    program (the kernel's /proc/self/exe, elf/dl-origin.c), the name itself for a library
    (elf/dl-object.c, ``_dl_new_object``, which never resolves links). Running the real
    loader on this name asks it the model's question."""
    return os.path.realpath(path) if runs_as_program(info) else path


def verify(path: str, expect: elf.ElfHeader) -> Verdict:
    """Would a loader running a program like ``expect`` take the file at ``path``?

    Follows glibc's ``open_verify``: a file of the other ELF class or another machine is
    skipped silently (the search goes on), while any other defect stops the whole load.
    """
    try:
        # O_NONBLOCK: a FIFO planted where the loader looks must not stop the model.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        code = exc.errno or errno.ENOENT
        return Verdict(reason=_rtld_strerror(code), exists=code not in (
            errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG), open_errno=code)
    try:
        kind = elf.file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            # The real loader would wait on a FIFO, or read a device: never a library.
            return Verdict(reason=f"{kind}, not a regular file (the real loader would block "
                                  "or fail on it)", fatal=True, blocks=True)
        return _verify_open(fd, path, expect)
    finally:
        os.close(fd)


def _verify_open(fd: int, path: str, expect: elf.ElfHeader) -> Verdict:
    is64 = expect.elf_class == elf.ELFCLASS64
    ehdr_size, phent_size = (64, 56) if is64 else (52, 32)
    head = b""
    read_errno = 0
    # open_verify reads until it has a whole ELF header; a directory opens but cannot be read.
    while len(head) < ehdr_size:
        try:
            chunk = os.read(fd, _FILEBUF_SIZE - len(head))
        except OSError as exc:
            read_errno = exc.errno or 0
            break
        if not chunk:
            break
        head += chunk
    if len(head) < ehdr_size:
        return _fatal("cannot read file data" + _errno_suffix(read_errno) if read_errno
                      else "file too short")
    if head[:4] != elf.ELFMAG:
        return _fatal("invalid ELF header")
    if head[4] != expect.elf_class:
        bits = 32 if head[4] == elf.ELFCLASS32 else 64
        return Verdict(reason=f"wrong ELF class: ELFCLASS{bits}", open_errno=errno.ENOENT)
    if head[5] != expect.data:
        order = "little" if expect.data == elf.ELFDATA2LSB else "big"
        return _fatal(f"ELF file data encoding not {order}-endian")
    if head[6] != elf.EV_CURRENT:
        return _fatal("ELF file version ident does not match current one")
    if head[7] not in (ELFOSABI_SYSV, ELFOSABI_GNU):
        return _fatal("ELF file OS ABI invalid")
    if head[8] != 0 and not (head[7] == ELFOSABI_GNU and head[8] < _LIBC_ABI_MAX):
        return _fatal("ELF file ABI version invalid")
    if any(head[9:16]):
        return _fatal("nonzero padding in e_ident")
    header = elf.parse_header(head, path)
    if header.version != elf.EV_CURRENT:
        return _fatal("ELF file version does not match current one")
    if header.machine != expect.machine:
        return Verdict(reason=f"wrong machine: {elf.machine_name(header.machine)}",
                       open_errno=errno.ENOENT)
    if header.type not in (elf.ET_DYN, elf.ET_EXEC):
        return _fatal("only ET_DYN and ET_EXEC can be loaded")
    if header.phentsize != phent_size:
        return _fatal("ELF file's phentsize not the expected size")
    size = header.phnum * phent_size
    if header.phoff + size <= len(head):
        table = head[header.phoff:header.phoff + size]
    elif header.phoff + size > os.fstat(fd).st_size:
        # What glibc's short pread says; checked first, as pread cannot take an offset
        # near 2**63.
        return _fatal("cannot read file data")
    else:
        table = os.pread(fd, size, header.phoff)
        if len(table) != size:
            return _fatal("cannot read file data")
    st = os.fstat(fd)
    file_id = (st.st_dev, st.st_ino)
    problem = _map_problem(header, table, st.st_size)
    if problem is not None:
        return Verdict(reason=problem, fatal=True, names_request=True, file_id=file_id)
    try:
        info = elf.read_elf(path)
    except NotElfError as exc:
        # The loader reads these through its mappings and may crash; ours are our words.
        return Verdict(reason=str(exc).removeprefix(f"{path}: "), fatal=True,
                       names_request=True, file_id=file_id)
    except BadInputError as exc:
        return Verdict(reason=str(exc).removeprefix(f"{path}: "), fatal=True, file_id=file_id)
    if info.flags_1 & DF_1_PIE:
        return Verdict(reason="cannot dynamically load position-independent executable",
                       fatal=True, names_request=True, file_id=file_id)
    return Verdict(info=info, file_id=file_id)


def _map_problem(header: elf.ElfHeader, table: bytes, file_size: int) -> str | None:
    """The program-header checks of _dl_map_object_from_fd, in its order."""
    is64 = header.elf_class == elf.ELFCLASS64
    fmt = header.byteorder + ("IIQQQQQQ" if is64 else "IIIIIIII")
    loads = 0
    has_dynamic = empty_dynamic = truncated = False
    for index in range(header.phnum):
        fields = struct.unpack_from(fmt, table, index * header.phentsize)
        if is64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, _memsz, _align = fields
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz, _memsz, _flags, _align = fields
        if p_type == elf.PT_DYNAMIC:
            # objcopy --only-keep-debug leaves a PT_DYNAMIC with no bytes in the file.
            empty_dynamic = empty_dynamic or p_filesz == 0
            has_dynamic = True
        elif p_type == elf.PT_LOAD:
            if (p_vaddr - p_offset) & (_PAGE_SIZE - 1):
                return "ELF load command address/offset not page-aligned"
            loads += 1
            end_page = -(-file_size // _PAGE_SIZE) * _PAGE_SIZE
            truncated = truncated or p_offset + p_filesz > end_page
    if loads == 0:
        return "object file has no loadable segments"
    if header.type != elf.ET_DYN:
        return "cannot dynamically load executable"
    if not has_dynamic or empty_dynamic:
        return "object file has no dynamic section"
    if truncated:
        # Not glibc's words: it maps the file and dies of SIGBUS when it touches the part
        # that is not there.
        return "file is truncated: a loadable segment ends past the end of the file"
    return None


_ABSENT: dict[int, Verdict] = {}


def absent(code: int) -> Verdict:
    """What ``verify`` says of a path whose open fails with ENOENT or ENOTDIR."""
    found = _ABSENT.get(code)
    if found is None:
        found = _ABSENT[code] = Verdict(reason=_rtld_strerror(code), exists=False,
                                        open_errno=code)
    return found


def _fatal(reason: str) -> Verdict:
    return Verdict(reason=reason, fatal=True)


def _rtld_strerror(code: int) -> str:
    """errno as ld.so itself prints it: its minimal strerror knows six messages."""
    known = {errno.ENOMEM: "Cannot allocate memory", errno.EINVAL: "Invalid argument",
             errno.ENOENT: "No such file or directory", errno.EPERM: "Operation not permitted",
             errno.EIO: "Input/output error", errno.EACCES: "Permission denied"}
    return known.get(code, f"Error {code}")


def _errno_suffix(code: int) -> str:
    return f": {_rtld_strerror(code)}" if code else ""


def verify_in(memo: Memo | None, path: str, expect: elf.ElfHeader) -> Verdict:
    """:func:`verify`, once per file and kind of program (class, byte order, machine) in
    ``memo``: a verdict depends only on the file's bytes and on what the program expects
    (its ``info.path`` is the first path read)."""
    if memo is None:
        return verify(path, expect)
    kind = (expect.elf_class, expect.data, expect.machine)
    return memo.per_file("verdict", kind, path, lambda p: verify(p, expect))

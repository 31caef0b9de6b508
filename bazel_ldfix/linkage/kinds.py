"""What a file really is, decided by its bytes, never by its name.

A build that hands the linker ``libx.so`` trusts the name; the linker does not. It reads the
first bytes: ``\\x7fELF`` and the ELF type decide between a shared object (linked against,
loaded at run time) and anything else; ``!<arch>`` is a static archive whose members are
copied into the output; text is read as a linker script. This module answers the same way,
with the fast reader (``elf.py``) for ELF files and a bounded walk of archive headers.
"""

from __future__ import annotations

import enum
import errno
import os
import re
import stat
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, NotElfError
from bazel_ldfix.loader.cuda import CudaKind, kind_of

ARMAG = b"!<arch>\n"
THINMAG = b"!<thin>\n"
_SNIFF = 4096             # bytes read to tell text from binary and to parse a script head
_MAX_SCRIPT = 1 << 16     # a linker script larger than this is not read for its inputs
_MAX_MEMBERS = 1 << 20    # more archive members than this is corruption


class Kind(str, enum.Enum):
    """A file's kind, as ``inspect`` prints it and ``--require`` names it."""

    SHARED_OBJECT = "shared-object"
    PIE = "pie"
    EXECUTABLE = "executable"
    RELOCATABLE = "relocatable"
    CORE = "core"
    OTHER_ELF = "other-elf"              # an ELF type none of the above (ET_NONE, OS-specific)
    STATIC_ARCHIVE = "static-archive"
    THIN_ARCHIVE = "thin-archive"
    LINKER_SCRIPT = "linker-script"
    NOT_ELF = "not-elf"
    EMPTY = "empty"
    MISSING = "missing"
    DIRECTORY = "directory"
    SPECIAL = "special"                  # a FIFO, socket or device: never opened for reading

    @property
    def words(self) -> str:
        """The kind for people: ``a static archive (ar)``."""
        return _WORDS[self]


_WORDS = {
    Kind.SHARED_OBJECT: "a shared object",
    Kind.PIE: "a position-independent executable",
    Kind.EXECUTABLE: "an executable",
    Kind.RELOCATABLE: "a relocatable object (.o)",
    Kind.CORE: "a core dump",
    Kind.OTHER_ELF: "an ELF file of another type",
    Kind.STATIC_ARCHIVE: "a static archive (ar)",
    Kind.THIN_ARCHIVE: "a thin archive (ar, members by path)",
    Kind.LINKER_SCRIPT: "a GNU linker script",
    Kind.NOT_ELF: "not an ELF file",
    Kind.EMPTY: "an empty file",
    Kind.MISSING: "missing",
    Kind.DIRECTORY: "a directory",
    Kind.SPECIAL: "not a regular file (FIFO, socket or device)",
}

# What the linker makes of a file of this kind where a shared library was meant.
_AS_LIBRARY = {
    Kind.STATIC_ARCHIVE: "the linker would copy its objects into the program, making a "
                         "private copy",
    Kind.THIN_ARCHIVE: "the linker would copy the objects it names into the program, making a "
                       "private copy",
    Kind.RELOCATABLE: "the linker would link its code into the program, making a private copy",
    Kind.LINKER_SCRIPT: "the linker would link whatever the script names instead",
    Kind.PIE: "a program, not a library: the linker refuses to link against it",
    Kind.EXECUTABLE: "a program, not a library: the linker refuses to link against it",
}


@dataclass(frozen=True)
class ElfFacts:
    """What the ELF header and dynamic section of a file say."""

    elf_class: int            # 32 or 64
    byte_order: str           # "little" or "big"
    machine: str              # "x86-64", "s390", ... ("machine N" when unknown)
    machine_number: int
    elf_type: int             # e_type
    osabi: int
    interp: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: str | None
    runpath: str | None
    dynamic: bool             # has PT_DYNAMIC
    pie_flag: bool            # DF_1_PIE


@dataclass(frozen=True)
class Inspection:
    """One file's kind and the facts behind it."""

    path: str
    kind: Kind
    elf: ElfFacts | None = None
    members: int | None = None           # archives: object members (not the index tables)
    script_inputs: tuple[str, ...] = ()  # linker scripts: files INPUT/GROUP name
    reason: str | None = None            # how an ELF type was decided (the PIE rule)
    cuda: CudaKind | None = None         # a CUDA stub or compat driver (loader/cuda.py)

    def describe(self) -> str:
        """``a shared object, ELF 64-bit MSB, s390`` and the like."""
        text = self.kind.words
        if self.elf is not None:
            order = "LSB" if self.elf.byte_order == "little" else "MSB"
            text += f", ELF {self.elf.elf_class}-bit {order}, {self.elf.machine}"
            if not self.elf.dynamic and self.kind in (Kind.EXECUTABLE, Kind.PIE):
                text += ", statically linked"
        if self.cuda is not None:
            text += _CUDA_WORDS[self.cuda]
        if self.members is not None:
            text += f", {self.members} member{'s' if self.members != 1 else ''}"
        return text

    def mismatch(self, required: Kind, name: str | None = None) -> str | None:
        """None when the file is ``required``; else what it is instead, and what that means.
        ``name``: the file's own name when ``path`` is not it (a package's member, read
        from a private copy)."""
        if self.kind is required:
            return None
        text = self.kind.words
        name = os.path.basename(name if name is not None else self.path)
        if required is Kind.SHARED_OBJECT and _looks_like_library(name):
            text += " named .so" if name.endswith(".so") else f" named {name}"
            consequence = _AS_LIBRARY.get(self.kind)
            if consequence:
                text += f": {consequence}"
        if self.kind is Kind.LINKER_SCRIPT and self.script_inputs:
            text += f" (naming {', '.join(self.script_inputs)})"
        return text


def _looks_like_library(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


def inspect(path: str) -> Inspection:
    """The kind of ``path`` from its bytes.

    Raises :class:`NotElfError` for a file that starts as ELF (or as an archive) but whose
    structure is cut short or corrupt, and :class:`BadInputError` when it cannot be read.
    Never follows what the file names, never runs it.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Inspection(path, Kind.MISSING)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            return Inspection(path, Kind.MISSING)
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        return Inspection(path, Kind.DIRECTORY)
    if not stat.S_ISREG(st.st_mode):
        return Inspection(path, Kind.SPECIAL)
    try:
        # O_NONBLOCK: should the path be swapped for a FIFO after the stat, open() returns.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Inspection(path, Kind.SPECIAL)
        head = os.pread(fd, _SNIFF, 0)
        if not head:
            return Inspection(path, Kind.EMPTY)
        if head[:4] == elf.ELFMAG:
            return _inspect_elf(fd, path)
        if head.startswith(ARMAG):
            return Inspection(path, Kind.STATIC_ARCHIVE, members=_count_members(fd, path, False))
        if head.startswith(THINMAG):
            return Inspection(path, Kind.THIN_ARCHIVE, members=_count_members(fd, path, True))
        script = _script_inputs(fd, head)
        if script is not None:
            return Inspection(path, Kind.LINKER_SCRIPT, script_inputs=script)
        return Inspection(path, Kind.NOT_ELF)
    except OSError as exc:
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# -- ELF ----------------------------------------------------------------------------------

def _inspect_elf(fd: int, path: str) -> Inspection:
    info = elf.read_elf_fd(fd, path)
    header = info.header
    if header.elf_class not in (elf.ELFCLASS32, elf.ELFCLASS64) or header.data not in (
            elf.ELFDATA2LSB, elf.ELFDATA2MSB):
        raise NotElfError(f"{path}: invalid ELF header (class {header.elf_class}, "
                          f"data {header.data})")
    facts = ElfFacts(
        elf_class=32 if header.elf_class == elf.ELFCLASS32 else 64,
        byte_order="little" if header.data == elf.ELFDATA2LSB else "big",
        machine=elf.machine_name(header.machine), machine_number=header.machine,
        elf_type=header.type, osabi=header.osabi, interp=info.interp, soname=info.soname,
        needed=info.needed, rpath=info.rpath, runpath=info.runpath, dynamic=info.has_dynamic,
        pie_flag=bool(info.flags_1 & elf.DF_1_PIE))
    kind, reason = classify(header.type, facts)
    cuda = kind_of(path, os.path.realpath(path), info) if kind is Kind.SHARED_OBJECT else None
    return Inspection(path, kind, elf=facts, reason=reason, cuda=cuda)


_CUDA_WORDS = {
    CudaKind.STUB: ", a CUDA stub (for linking only: every call fails at run time)",
    CudaKind.COMPAT_DRIVER: ", a CUDA compat driver (only for a host with an older driver)",
}


def classify(e_type: int, facts: ElfFacts) -> tuple[Kind, str | None]:
    """The kind of an ELF file, and for ET_DYN the rule that decided it.

    ET_DYN is both a shared object and a PIE. The linker marks a PIE with DF_1_PIE
    (GNU ld since binutils 2.33, lld); that flag decides when present. Without it:
    a file with a DT_SONAME is a shared object (a library is named so that programs can
    record it; ``libc.so.6`` and ``ld-linux`` have a SONAME, a PT_INTERP or an entry point,
    and are libraries); a file without a SONAME but with a PT_INTERP is a PIE (``-pie``
    writes PT_INTERP and no SONAME; ``-shared`` writes PT_INTERP only when asked); anything
    else is a shared object.
    """
    if e_type == 1:
        return Kind.RELOCATABLE, None
    if e_type == elf.ET_EXEC:
        return Kind.EXECUTABLE, None
    if e_type == 4:
        return Kind.CORE, None
    if e_type != elf.ET_DYN:
        return Kind.OTHER_ELF, None
    if facts.pie_flag:
        return Kind.PIE, "DF_1_PIE is set"
    if facts.soname is not None:
        return Kind.SHARED_OBJECT, "ET_DYN with a DT_SONAME"
    if facts.interp is not None:
        return Kind.PIE, "ET_DYN with a PT_INTERP and no DT_SONAME (no DF_1_PIE: an older linker)"
    return Kind.SHARED_OBJECT, "ET_DYN without PT_INTERP"


# -- archives -----------------------------------------------------------------------------

_MEMBER_HEADER = 60
# The archive's own tables, not objects: the symbol index (System V and 64-bit) and the GNU
# long-name table.
_TABLES = (b"/", b"/SYM64/", b"//", b"__.SYMDEF", b"__.SYMDEF SORTED")


def _count_members(fd: int, path: str, thin: bool) -> int:
    """Walk the member headers (ar(5)), checking each against the file's size.

    In a thin archive the members' bytes live in other files; only the index and the
    long-name table are stored inline.
    """
    size = os.fstat(fd).st_size
    at = len(ARMAG)
    members = 0
    for _ in range(_MAX_MEMBERS):
        if at >= size:
            return members
        header = os.pread(fd, _MEMBER_HEADER, at)
        if len(header) < _MEMBER_HEADER or header[58:60] != b"`\n":
            raise NotElfError(f"{path}: corrupt archive: bad member header at offset {at}")
        field = header[48:58].strip()
        if not field.isdigit():
            raise NotElfError(f"{path}: corrupt archive: bad member size at offset {at}")
        length = int(field)
        name = header[:16].rstrip(b" ")
        table = name in _TABLES
        inline = table or not thin
        end = at + _MEMBER_HEADER + (length if inline else 0)
        if end > size:
            raise NotElfError(f"{path}: corrupt archive: member at offset {at} runs past the "
                              "end of the file")
        members += 0 if table else 1
        at = end + (end & 1 if inline else 0)  # members are 2-byte aligned
    raise NotElfError(f"{path}: corrupt archive: implausibly many members")


# -- linker scripts -----------------------------------------------------------------------

# Commands that can open a GNU ld script (ld's ldgram.y, "ifile_list" and friends).
_SCRIPT_COMMANDS = frozenset({
    "INPUT", "GROUP", "OUTPUT_FORMAT", "OUTPUT_ARCH", "OUTPUT", "SEARCH_DIR", "AS_NEEDED",
    "INCLUDE", "TARGET", "ENTRY", "SECTIONS", "MEMORY", "STARTUP", "VERSION", "PHDRS",
    "INSERT", "EXTERN", "PROVIDE", "ASSERT", "NOCROSSREFS", "REGION_ALIAS"})
_COMMENT = re.compile(rb"/\*.*?\*/", re.S)
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_FILE_LIST = re.compile(rb"\b(?:INPUT|GROUP)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
_FILE_TOKEN = re.compile(rb"[^\s(),]+")


def _script_inputs(fd: int, head: bytes) -> tuple[str, ...] | None:
    """The files a GNU ld script's INPUT and GROUP name; None when ``head`` is no script.

    A script is text (no NUL byte, UTF-8) whose first word after comments is a script
    command: what ld tries when a file is neither ELF nor an archive.
    """
    if b"\0" in head:
        return None
    text = head
    size = os.fstat(fd).st_size
    if size > len(head):
        text = os.pread(fd, min(size, _MAX_SCRIPT), 0)
        if b"\0" in text:
            return None
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return None
    body = _COMMENT.sub(b" ", text)
    first = _WORD.match(body.lstrip())
    if first is None or first.group().decode() not in _SCRIPT_COMMANDS:
        return None
    inputs: list[str] = []
    for group in _FILE_LIST.finditer(body):
        for token in _FILE_TOKEN.findall(group.group(1)):
            if token != b"AS_NEEDED":
                inputs.append(token.decode())
    return tuple(inputs)

"""Symbol tables and dynamic relocations of an ELF object, read with pyelftools.

The dynamic symbols (``.dynsym``) and relocations are read through PT_DYNAMIC (DT_SYMTAB,
DT_HASH/DT_GNU_HASH, DT_RELA, DT_JMPREL), as the loader reads them: they survive ``strip``
and even a removed section table. ``.symtab`` is read when present: ``strip`` removes it, so
it can only add evidence (a private copy), never be relied on.

pyelftools is imported here and only by the linkage commands: importing it costs about
50 ms, which the loader commands (``resolve``, ``env``, ``test``) do not pay.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from bazel_ldfix import elf
from bazel_ldfix.errors import NotElfError

DF_SYMBOLIC = 0x2
_MAX_SYMBOLS = 1 << 22    # more dynamic symbols than this is corruption


class SymbolType(str, enum.Enum):
    FUNC = "func"
    OBJECT = "object"
    TLS = "tls"
    IFUNC = "ifunc"
    COMMON = "common"
    NOTYPE = "notype"
    OTHER = "other"       # sections, files and OS-specific types


class Bind(str, enum.Enum):
    GLOBAL = "global"
    WEAK = "weak"
    UNIQUE = "unique"     # STB_GNU_UNIQUE: one definition per process, whatever the scope
    LOCAL = "local"


class Visibility(str, enum.Enum):
    DEFAULT = "default"
    PROTECTED = "protected"
    HIDDEN = "hidden"
    INTERNAL = "internal"


_TYPES = {"STT_FUNC": SymbolType.FUNC, "STT_OBJECT": SymbolType.OBJECT,
          "STT_TLS": SymbolType.TLS, "STT_GNU_IFUNC": SymbolType.IFUNC,
          "STT_LOOS": SymbolType.IFUNC, "STT_COMMON": SymbolType.COMMON,
          "STT_NOTYPE": SymbolType.NOTYPE}
_BINDS = {"STB_GLOBAL": Bind.GLOBAL, "STB_WEAK": Bind.WEAK, "STB_GNU_UNIQUE": Bind.UNIQUE,
          "STB_LOOS": Bind.UNIQUE, "STB_LOCAL": Bind.LOCAL}
_VISIBILITY = {"STV_DEFAULT": Visibility.DEFAULT, "STV_PROTECTED": Visibility.PROTECTED,
               "STV_HIDDEN": Visibility.HIDDEN, "STV_INTERNAL": Visibility.INTERNAL}


@dataclass(frozen=True)
class Symbol:
    index: int
    name: str
    defined: bool
    type: SymbolType
    bind: Bind
    visibility: Visibility
    absolute: bool = False     # SHN_ABS: a constant (version names, linker markers), no state


@dataclass(frozen=True)
class Relocation:
    """A dynamic relocation: its machine type number and the symbol index it names (0: none)."""

    type: int
    symbol: int


@dataclass(frozen=True)
class SymbolTables:
    path: str
    machine: int
    dynsym: tuple[Symbol, ...]
    symtab: tuple[Symbol, ...] | None      # None: no .symtab (stripped)
    relocations: tuple[Relocation, ...]
    symbolic: bool                         # DT_SYMBOLIC, or DF_SYMBOLIC in DT_FLAGS

    def defines(self, name: str) -> Symbol | None:
        """The exported definition of ``name`` in .dynsym (what the global lookup can find)."""
        for sym in self.dynsym:
            if sym.name == name and sym.defined and sym.bind is not Bind.LOCAL:
                return sym
        return None

    def referenced_by_symbol(self) -> frozenset[int]:
        """Indexes of the .dynsym symbols some dynamic relocation names."""
        return frozenset(r.symbol for r in self.relocations if r.symbol)


_PARSE_ERRORS = (ELFError, ConstructError, struct.error, ValueError, IndexError, KeyError,
                 OverflowError, UnicodeDecodeError, AttributeError, TypeError,
                 StopIteration, OSError)  # OSError: a seek to a negative offset


def read_symbols(path: str, *, relocations: bool = True) -> SymbolTables:
    """The dynamic symbols, dynamic relocations and (when present) .symtab of ``path``.

    The header is checked by the fast reader first, so that a non-ELF or truncated file gets
    glibc's words; :class:`NotElfError` for anything pyelftools cannot parse.
    """
    info = elf.read_elf(path)
    size = os.path.getsize(path)
    order = info.header.byteorder
    is64 = info.elf_class == elf.ELFCLASS64
    try:
        with open(path, "rb") as stream:
            elffile = ELFFile(stream)
            dynamic = next((s for s in elffile.iter_segments()
                            if isinstance(s, DynamicSegment)), None)
            dynsym: tuple[Symbol, ...] = ()
            relocs: tuple[Relocation, ...] = ()
            symbolic = False
            if dynamic is not None:
                section = next((s for s in elffile.iter_sections()
                                if s["sh_type"] == "SHT_DYNSYM"), None)
                if isinstance(section, SymbolTableSection):
                    dynsym = _table(elffile, section, size, order, is64, path)
                else:
                    # No section table (sstrip): the loader's way, through DT_SYMTAB and the
                    # hash table's count; slower, as pyelftools reads one symbol at a time.
                    _check_count(dynamic, size, path)
                    dynsym = tuple(_symbols(dynamic.iter_symbols()))
                if relocations:
                    relocs = tuple(_relocations(dynamic))
                symbolic = _symbolic(dynamic)
            table = elffile.get_section_by_name(".symtab")
            symtab = None
            if isinstance(table, SymbolTableSection):
                symtab = _table(elffile, table, size, order, is64, path)
    except _PARSE_ERRORS as exc:
        raise NotElfError(f"{path}: malformed ELF file ({exc})") from None
    return SymbolTables(path, info.machine, dynsym, symtab, relocs, symbolic)


_SYM64 = "IBBHQQ"    # st_name, st_info, st_other, st_shndx, st_value, st_size
_SYM32 = "IIIBBH"    # st_name, st_value, st_size, st_info, st_other, st_shndx
_STT = {0: SymbolType.NOTYPE, 1: SymbolType.OBJECT, 2: SymbolType.FUNC, 5: SymbolType.COMMON,
        6: SymbolType.TLS, 10: SymbolType.IFUNC}
_STB = {0: Bind.LOCAL, 1: Bind.GLOBAL, 2: Bind.WEAK, 10: Bind.UNIQUE}
_SHN_ABS = 0xFFF1
_STV = (Visibility.DEFAULT, Visibility.INTERNAL, Visibility.HIDDEN, Visibility.PROTECTED)


def _table(elffile: ELFFile, section: SymbolTableSection, size: int, order: str, is64: bool,
           path: str) -> tuple[Symbol, ...]:
    """A symbol table section, located by pyelftools and decoded in bulk.

    pyelftools parses one symbol at a time through ``construct`` (about a second for
    libstdc++'s 6,000 dynamic symbols); the table is one array of fixed-size entries, so it
    is unpacked with ``struct`` once its bounds are checked against the file.
    """
    strings = elffile.get_section(section["sh_link"])
    for sec in (section, strings):
        if sec["sh_type"] != "SHT_NOBITS" and sec["sh_offset"] + sec["sh_size"] > size:
            raise NotElfError(f"{path}: section {sec.name or '?'} runs past the end of the "
                              "file")
    entry = struct.Struct(order + (_SYM64 if is64 else _SYM32))
    data = section.data()
    strtab = strings.data()
    out = []
    for index, fields in enumerate(entry.iter_unpack(data[: len(data) - len(data) % entry.size])):
        if is64:
            st_name, st_info, st_other, st_shndx, _value, _size = fields
        else:
            st_name, _value, _size, st_info, st_other, st_shndx = fields
        end = strtab.find(b"\0", st_name)
        if st_name >= len(strtab) or end < 0:
            raise NotElfError(f"{path}: symbol {index} has a name outside its string table")
        out.append(Symbol(
            index=index, name=strtab[st_name:end].decode("utf-8", "surrogateescape"),
            defined=st_shndx != 0, type=_STT.get(st_info & 0xF, SymbolType.OTHER),
            bind=_STB.get(st_info >> 4, Bind.GLOBAL), visibility=_STV[st_other & 0x3],
            absolute=st_shndx == _SHN_ABS))
    return tuple(out)


def _check_count(dynamic: DynamicSegment, size: int, path: str) -> None:
    count = dynamic.num_symbols()
    if count > _MAX_SYMBOLS or count * 16 > size:
        raise NotElfError(f"{path}: the dynamic symbol table claims {count} symbols, more "
                          "than the file can hold")


def _symbols(raw: Iterator[Any]) -> list[Symbol]:
    # A list, not a generator: a StopIteration escaping pyelftools on a corrupt file must
    # stay a StopIteration (a generator would turn it into RuntimeError).
    out = []
    for index, sym in enumerate(raw):
        info = sym["st_info"]
        out.append(Symbol(
            index=index, name=sym.name, defined=sym["st_shndx"] != "SHN_UNDEF",
            type=_TYPES.get(info["type"], SymbolType.OTHER),
            bind=_BINDS.get(info["bind"], Bind.GLOBAL),
            visibility=_VISIBILITY.get(sym["st_other"]["visibility"], Visibility.DEFAULT),
            absolute=sym["st_shndx"] == "SHN_ABS"))
    return out


def _relocations(dynamic: DynamicSegment) -> list[Relocation]:
    out = []
    tables: Any = dynamic.get_relocation_tables()
    for kind, table in tables.items():
        if kind == "RELR":   # relative relocations name no symbol
            continue
        out += [Relocation(rel["r_info_type"], rel["r_info_sym"])
                for rel in table.iter_relocations()]
    return out


def _symbolic(dynamic: DynamicSegment) -> bool:
    for tag in dynamic.iter_tags():
        if tag.entry.d_tag == "DT_SYMBOLIC":
            return True
        if tag.entry.d_tag == "DT_FLAGS" and tag.entry.d_val & DF_SYMBOLIC:
            return True
    return False

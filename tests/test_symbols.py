"""The symbol reader of the linkage gates against pyelftools' own symbol-by-symbol parse."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from elfbuild import lib
from elftools.elf.elffile import ELFFile

from bazel_ldfix.errors import NotElfError
from bazel_ldfix.symbols import read_symbols

OTHER_ORDERS = ["/usr/s390x-linux-gnu/lib/libc.so.6", "/usr/powerpc-linux-gnu/lib/libc.so.6",
                "/usr/lib32/libc.so.6"]


def _oracle(path: str, name: str) -> list[tuple[str, bool, str, str, str]]:
    with open(path, "rb") as f:
        section = ELFFile(f).get_section_by_name(name)
        assert section is not None
        # Value 10 is STT_GNU_IFUNC and STB_GNU_UNIQUE on GNU systems; pyelftools may name
        # it by its generic name.
        loos = {"STT_LOOS": "STT_GNU_IFUNC", "STB_LOOS": "STB_GNU_UNIQUE"}
        return [(s.name, s["st_shndx"] != "SHN_UNDEF",
                 loos.get(s["st_info"]["type"], s["st_info"]["type"]),
                 loos.get(s["st_info"]["bind"], s["st_info"]["bind"]),
                 s["st_other"]["visibility"])
                for s in section.iter_symbols()]


def _mine(symbols: tuple[object, ...]) -> list[tuple[str, bool, str, str, str]]:
    names = {"func": "STT_FUNC", "object": "STT_OBJECT", "tls": "STT_TLS",
             "ifunc": "STT_GNU_IFUNC", "notype": "STT_NOTYPE", "common": "STT_COMMON"}
    binds = {"global": "STB_GLOBAL", "weak": "STB_WEAK", "local": "STB_LOCAL",
             "unique": "STB_GNU_UNIQUE"}
    out = []
    for s in symbols:
        out.append((s.name, s.defined, names.get(s.type.value, "other"),  # type: ignore[attr-defined]
                    binds[s.bind.value], "STV_" + s.visibility.value.upper()))  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("path", OTHER_ORDERS)
def test_dynsym_of_other_classes_and_byte_orders(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed (scripts/test.sh installs it)")
    expected = [e if e[2] in ("STT_FUNC", "STT_OBJECT", "STT_TLS", "STT_GNU_IFUNC",
                              "STT_NOTYPE", "STT_COMMON") else (*e[:2], "other", *e[3:])
                for e in _oracle(path, ".dynsym")]
    assert _mine(read_symbols(path).dynsym) == expected


def test_symtab_and_relocations_of_a_made_library(tmp_path: Path) -> None:
    made = lib(tmp_path / "libt.so", extra=["-Wl,-Bsymbolic"])
    tables = read_symbols(str(made))
    assert tables.symtab is not None
    assert _mine(tables.symtab) == [e if e[2] != "STT_FILE" and e[2] != "STT_SECTION"
                                    else (*e[:2], "other", *e[3:])
                                    for e in _oracle(str(made), ".symtab")]
    assert tables.symbolic
    subprocess.run(["strip", str(made)], check=True)
    assert read_symbols(str(made)).symtab is None


def test_a_symbol_table_past_the_end_is_refused(tmp_path: Path) -> None:
    made = lib(tmp_path / "libt.so")
    data = made.read_bytes()
    with open(made, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        assert dynsym is not None
        cut = dynsym["sh_offset"] + 8
    (tmp_path / "libcut.so").write_bytes(data[:cut])
    with pytest.raises(NotElfError):
        read_symbols(str(tmp_path / "libcut.so"))

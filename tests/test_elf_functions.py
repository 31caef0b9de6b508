"""The exported functions and their first bytes, read through PT_DYNAMIC, against
pyelftools' .dynsym and section data (the oracle)."""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

import pytest
from elfbuild import cc
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import elf
from bazel_ldfix.errors import LdfixError, NotElfError

SOURCE = ("int one(void){return 1;}\nint two(int x){return x * 2;}\n"
          "__attribute__((weak)) int soft(void){return 3;}\n"
          "__attribute__((visibility(\"hidden\"))) int hidden(void){return 4;}\n"
          "static int local(void){return 5;}\nint (*keep)(void) = local;\n"
          "int data = 6;\n")
OTHER_ORDERS = ["/usr/s390x-linux-gnu/lib/libc.so.6", "/usr/powerpc-linux-gnu/lib/libc.so.6",
                "/usr/lib32/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]


def oracle(path: str, code: int = 16) -> list[tuple[str, bytes]]:
    """Exported functions of .dynsym in table order, each with the bytes at its address."""
    with open(path, "rb") as f:
        e = ELFFile(f)
        table = e.get_section_by_name(".dynsym")
        assert table is not None
        out = []
        for s in table.iter_symbols():
            if s["st_shndx"] == "SHN_UNDEF" or s["st_info"]["type"] != "STT_FUNC" or \
                    s["st_info"]["bind"] not in ("STB_GLOBAL", "STB_WEAK") or \
                    s["st_other"]["visibility"] not in ("STV_DEFAULT", "STV_PROTECTED"):
                continue
            section = e.get_section(s["st_shndx"])
            at = s["st_value"] - section["sh_addr"]
            out.append((s.name, section.data()[at: at + code]))
        return out


def ours(path: str, code: int = 16) -> list[tuple[str, bytes]]:
    found = elf.exported_functions(path, code=code, span=1 << 30)
    assert found is not None
    return [(f.name, f.code) for f in found]


def drop_section_table(path: Path) -> Path:
    """The file as ``sstrip`` leaves it: no section headers at all."""
    data = bytearray(path.read_bytes())
    struct.pack_into("<QHHH", data, 40, 0, 64, 0, 0)  # e_shoff, e_ehsize, e_shentsize, e_shnum
    struct.pack_into("<H", data, 62, 0)                # e_shstrndx
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("style", ["gnu", "sysv", "both"])
def test_exported_functions_and_their_bytes_match_the_oracle_for_each_hash_table(
        tmp_path: Path, style: str) -> None:
    made = cc(tmp_path / "libf.so", "-O2", "-shared", f"-Wl,--hash-style={style}",
              src=SOURCE)
    found = ours(str(made))
    assert found == oracle(str(made))
    assert {name for name, _ in found} >= {"one", "two", "soft"}
    assert not {"hidden", "local", "data"} & {name for name, _ in found}


def test_a_removed_section_table_changes_nothing(tmp_path: Path) -> None:
    made = cc(tmp_path / "libf.so", "-O2", "-shared", src=SOURCE)
    before = ours(str(made))
    assert ours(str(drop_section_table(made))) == before


@pytest.mark.parametrize("path", OTHER_ORDERS)
def test_other_classes_and_byte_orders_match_the_oracle(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed (scripts/test.sh installs it)")
    assert [name for name, _ in ours(path, code=0)] == [name for name, _ in oracle(path, 0)]


def test_more_symbols_or_a_wider_span_than_asked_reads_nothing_more(tmp_path: Path) -> None:
    made = cc(tmp_path / "libf.so", "-O2", "-shared", src=SOURCE)
    assert elf.exported_functions(str(made), limit=2) is None
    assert elf.exported_functions(str(made), span=4) is None


def test_a_count_the_file_cannot_hold_is_not_elf(tmp_path: Path) -> None:
    """nchain is checked against the file before the table is read."""
    made = cc(tmp_path / "libf.so", "-O2", "-shared", "-Wl,--hash-style=sysv", src=SOURCE)
    with open(made, "rb") as f:
        section = ELFFile(f).get_section_by_name(".hash")
        assert section is not None
        at = section["sh_offset"]
    data = bytearray(made.read_bytes())
    struct.pack_into("<I", data, at + 4, 60_000)      # nchain: 1.4 MB of symbols
    made.write_bytes(bytes(data))
    with pytest.raises(NotElfError, match="file too short"):
        elf.exported_functions(str(made))
    struct.pack_into("<I", data, at + 4, 1 << 30)     # more than the limit: not read at all
    made.write_bytes(bytes(data))
    assert elf.exported_functions(str(made)) is None


def test_a_program_without_dynamic_symbols_exports_none(tmp_path: Path) -> None:
    made = cc(tmp_path / "static", "-static", src="int main(void){return 0;}")
    assert elf.exported_functions(str(made)) == ()


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_corrupt_files_raise_only_project_errors(tmp_path: Path, data: st.DataObject) -> None:
    seed = tmp_path / "seed.so"
    if not seed.exists():
        cc(seed, "-O2", "-shared", "-nostdlib", "-Wl,--hash-style=both", src=SOURCE)
    source = seed.read_bytes()
    blob = bytearray(source[:data.draw(st.integers(0, len(source)))])
    for _ in range(data.draw(st.integers(0, 8))):
        if blob:
            at = data.draw(st.integers(0, min(len(blob), 4096) - 1))
            blob[at] = data.draw(st.integers(0, 255))
    path = tmp_path / "blob"
    path.write_bytes(bytes(blob))
    with contextlib.suppress(LdfixError):  # any other exception fails the test
        elf.exported_functions(str(path))

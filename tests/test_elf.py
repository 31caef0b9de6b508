"""The ELF reader against pyelftools (the oracle), on this machine's files and made ones."""

from __future__ import annotations

import contextlib
import struct
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from elfbuild import empty, lfs_pointer, lib, program, truncated
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_E_MACHINE, ENUM_E_TYPE, ENUM_EI_OSABI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, LdfixError, NotElfError


def oracle(path: str) -> dict[str, object]:
    """What pyelftools reads from the segments (never the section table)."""
    with open(path, "rb") as fh:
        f = ELFFile(fh)
        out: dict[str, object] = {
            "class": f.elfclass, "little": f.little_endian, "machine": f.header.e_machine,
            "type": f.header.e_type, "osabi": f.header.e_ident.EI_OSABI,
            "interp": None, "needed": [], "soname": None, "rpath": None, "runpath": None,
            "flags_1": 0}
        for seg in f.iter_segments():
            if seg.header.p_type == "PT_INTERP":
                out["interp"] = seg.get_interp_name()
            if isinstance(seg, DynamicSegment):
                for tag in seg.iter_tags():
                    kind = tag.entry.d_tag
                    if kind == "DT_NEEDED":
                        out["needed"].append(tag.needed)  # type: ignore[union-attr]
                    elif kind == "DT_SONAME":
                        out["soname"] = tag.soname
                    elif kind == "DT_RPATH":
                        out["rpath"] = tag.rpath
                    elif kind == "DT_RUNPATH":
                        out["runpath"] = tag.runpath
                    elif kind == "DT_FLAGS_1":
                        out["flags_1"] = tag.entry.d_val
        return out


def ours(path: str) -> dict[str, object]:
    info = elf.read_elf(path)
    return {
        "class": 64 if info.elf_class == elf.ELFCLASS64 else 32,
        "little": info.header.data == elf.ELFDATA2LSB,
        # pyelftools names the numbers it knows: name ours with its own tables.
        "machine": _named(ENUM_E_MACHINE, info.machine),
        "type": _named(ENUM_E_TYPE, info.header.type),
        "osabi": _named(ENUM_EI_OSABI, info.header.osabi),
        "interp": info.interp, "needed": list(info.needed), "soname": info.soname,
        "rpath": info.rpath, "runpath": info.runpath, "flags_1": info.flags_1}


def _named(table: Mapping[str, int], value: int) -> str | int:
    return next((name for name, number in table.items() if number == value
                 and not name.startswith("_")), value)


def _library_dir() -> Path:
    """This machine's multiarch library directory, as its compiler names it."""
    multiarch = subprocess.run(["cc", "-print-multiarch"], capture_output=True,
                               text=True).stdout.strip()
    return Path("/usr/lib") / multiarch if multiarch else Path("/usr/lib")


def system_sample(count: int = 60) -> list[str]:
    """A deterministic sample of this machine's ELF files (every n-th, sorted): whatever
    types are installed (executables, shared objects, relocatable objects, ...)."""
    files = []
    for directory in (Path("/usr/bin"), _library_dir()):
        for path in sorted(directory.iterdir()):
            if path.is_file() and not path.is_symlink():
                with path.open("rb") as fh:
                    if fh.read(4) == b"\x7fELF":
                        files.append(str(path))
    step = max(1, len(files) // count)
    return files[::step][:count]


@pytest.mark.parametrize("path", system_sample())
def test_reads_what_pyelftools_reads_on_system_files(path: str) -> None:
    assert ours(path) == oracle(path)


def test_reads_made_files_with_every_dynamic_entry(tmp_path: Path) -> None:
    dep = lib(tmp_path / "libdep.so.1")
    made = [
        lib(tmp_path / "librp.so.1", needs=[dep], rpath="$ORIGIN/a:/b"),
        lib(tmp_path / "librun.so.2", needs=[dep], runpath="${ORIGIN}/../c", nodeflib=True),
        lib(tmp_path / "libnoname.so", soname=""),
        program(tmp_path / "app", needs=[dep], runpath="$ORIGIN"),
    ]
    for path in made:
        assert ours(str(path)) == oracle(str(path))


def test_a_stripped_section_table_does_not_matter(tmp_path: Path) -> None:
    path = lib(tmp_path / "libx.so.1", runpath="$ORIGIN")
    data = bytearray(path.read_bytes())
    struct.pack_into("<QHHH", data, 40, 0, 64, 0, 0)  # e_shoff, e_ehsize, e_shentsize, e_shnum
    struct.pack_into("<H", data, 62, 0)                # e_shstrndx
    path.write_bytes(bytes(data))
    info = elf.read_elf(str(path))
    assert (info.soname, info.runpath) == ("libx.so.1", "$ORIGIN")


@pytest.mark.parametrize("make, words", [
    (lambda d: empty(d / "f"), "file too short"),
    (lambda d: lfs_pointer(d / "f"), "invalid ELF header"),
    (lambda d: truncated(d / "f", Path("/bin/true"), 40), "file too short"),
    (lambda d: truncated(d / "f", Path("/bin/true"), 200), "file too short"),
])
def test_broken_files_raise_not_elf_in_glibcs_words(
        tmp_path: Path, make: Callable[[Path], object], words: str) -> None:
    make(tmp_path)
    with pytest.raises(NotElfError, match=words):
        elf.read_elf(str(tmp_path / "f"))


def test_a_directory_or_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="is a directory"):
        elf.read_elf(str(tmp_path))
    with pytest.raises(BadInputError, match="No such file"):
        elf.read_elf(str(tmp_path / "nope"))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_corrupt_files_raise_only_project_errors(tmp_path: Path, data: st.DataObject) -> None:
    source = Path("/bin/true").read_bytes()
    cut = data.draw(st.integers(0, len(source)))
    blob = bytearray(source[:cut])
    for _ in range(data.draw(st.integers(0, 8))):
        if blob:
            # Mostly the headers, where a wrong byte changes what is read next.
            at = data.draw(st.integers(0, min(len(blob), 4096) - 1))
            blob[at] = data.draw(st.integers(0, 255))
    path = tmp_path / "blob"
    path.write_bytes(bytes(blob))
    with contextlib.suppress(LdfixError):  # any other exception fails the test
        elf.read_elf(str(path))

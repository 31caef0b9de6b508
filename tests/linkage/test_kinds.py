"""`bazel-ldfix inspect`: the kind of a file from its bytes, on files gcc, ar and ld made."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import cc, lib, program
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_E_MACHINE

from bazel_ldfix.linkage.kinds import Kind, inspect

# Real libraries of the other class and byte order, from Debian's cross-toolchain and
# multilib packages (scripts/test.sh installs them).
FOREIGN = {
    "/usr/s390x-linux-gnu/lib/libc.so.6": (64, "big", "libc.so.6"),
    "/usr/powerpc-linux-gnu/lib/libc.so.6": (32, "big", "libc.so.6"),
    "/usr/lib32/libc.so.6": (32, "little", "libc.so.6"),
    "/usr/powerpc-linux-gnu/lib/ld.so.1": (32, "big", "ld.so.1"),
}
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_PIE = 0x08000000


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "inspect", *args],
                          capture_output=True, text=True)


def _ar(archive: Path, *members: Path, thin: bool = False) -> Path:
    archive.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ar", "rcT" if thin else "rcs", str(archive), *map(str, members)],
                   check=True, capture_output=True)
    return archive


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files a prebuilt-override check must tell apart, each named like a library."""
    d = tmp_path_factory.mktemp("matrix")
    obj = cc(d / "src" / "f.o", "-c")
    real = lib(d / "real" / "libx.so", soname="libx.so.1")
    files = {
        "real": real,
        "no-so-suffix": lib(d / "odd" / "x-library.bin", soname="libx.so.1"),
        "archive": _ar(d / "archive" / "libx.so", obj),
        "thin": _ar(d / "thin" / "libx.so", obj, thin=True),
        "script": d / "script" / "libx.so",
        "executable": program(d / "exe" / "libx.so", extra=["-no-pie"]),
        "pie": program(d / "pie" / "libx.so", extra=["-pie"]),
        "relocatable": d / "reloc" / "libx.so",
        "empty": d / "empty" / "libx.so",
        "missing": d / "missing" / "libx.so",
    }
    files["script"].parent.mkdir()
    files["script"].write_text(f"/* GNU ld script */\nGROUP ( {real} AS_NEEDED ( {obj} ) )\n")
    files["relocatable"].parent.mkdir()
    shutil.copy(obj, files["relocatable"])
    files["empty"].parent.mkdir()
    files["empty"].write_bytes(b"")
    return files


EXPECTED = {
    "real": Kind.SHARED_OBJECT, "no-so-suffix": Kind.SHARED_OBJECT,
    "archive": Kind.STATIC_ARCHIVE, "thin": Kind.THIN_ARCHIVE, "script": Kind.LINKER_SCRIPT,
    "executable": Kind.EXECUTABLE, "pie": Kind.PIE, "relocatable": Kind.RELOCATABLE,
    "empty": Kind.EMPTY, "missing": Kind.MISSING,
}


def test_each_file_of_the_matrix_is_its_kind_by_its_bytes(matrix: dict[str, Path]) -> None:
    for name, path in matrix.items():
        assert inspect(str(path)).kind is EXPECTED[name], name


def test_the_linker_reads_the_script_as_the_kind_says(matrix: dict[str, Path],
                                                      tmp_path: Path) -> None:
    # ld accepts the script in place of a library and links what it names.
    out = program(tmp_path / "app", extra=["-L", str(matrix["script"].parent), "-lx"])
    assert inspect(str(out)).elf is not None
    assert "libx.so.1" in (inspect(str(out)).elf.needed)  # type: ignore[union-attr]
    assert inspect(str(matrix["script"])).script_inputs[0] == str(matrix["real"])


def test_require_shared_object_accepts_only_shared_objects(matrix: dict[str, Path]) -> None:
    for name, path in matrix.items():
        result = run("--require", "shared-object", str(path))
        ok = EXPECTED[name] is Kind.SHARED_OBJECT
        assert result.returncode == (0 if ok else 1), (name, result.stderr)
        if not ok:
            assert f"is not a shared object: {EXPECTED[name].words}" in result.stderr


def test_a_static_archive_named_so_is_explained(matrix: dict[str, Path]) -> None:
    result = run("--require", "shared-object", str(matrix["archive"]))
    assert result.returncode == 1
    assert ("a static archive (ar) named .so: the linker would copy its objects into the "
            "program, making a private copy") in result.stderr


def test_require_each_kind(matrix: dict[str, Path]) -> None:
    for name, path in matrix.items():
        assert run("--require", EXPECTED[name].value, str(path)).returncode == 0, name


def test_json_of_the_matrix(matrix: dict[str, Path]) -> None:
    names = list(matrix)
    result = run("--json", "--require", "shared-object", *(str(matrix[n]) for n in names))
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["version"] == 1
    assert [f["kind"] for f in doc["files"]] == [EXPECTED[n].value for n in names]
    assert [f["ok"] for f in doc["files"]] == [EXPECTED[n] is Kind.SHARED_OBJECT
                                               for n in names]
    real = doc["files"][0]
    assert real["elf"]["soname"] == "libx.so.1"
    with matrix["real"].open("rb") as f:
        assert real["elf"]["machine_number"] == ENUM_E_MACHINE[ELFFile(f)["e_machine"]]


def test_an_empty_path_is_missing() -> None:
    assert inspect("").kind is Kind.MISSING


def test_a_directory_and_a_fifo(tmp_path: Path) -> None:
    assert inspect(str(tmp_path)).kind is Kind.DIRECTORY
    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    assert inspect(str(fifo)).kind is Kind.SPECIAL  # and the call returns: never opened


def _clear_pie_flag(path: Path) -> Path:
    """What an older linker writes: the same PIE without DF_1_PIE (64-bit LSB only)."""
    data = bytearray(path.read_bytes())
    with path.open("rb") as f:
        dynamic = ELFFile(f).get_section_by_name(".dynamic")
        offset, size = dynamic["sh_offset"], dynamic["sh_size"]
    for at in range(offset, offset + size, 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == DT_FLAGS_1:
            struct.pack_into("<qQ", data, at, tag, value & ~DF_1_PIE)
    path.write_bytes(bytes(data))
    return path


def test_a_pie_of_an_older_linker_is_told_by_interp_and_no_soname(tmp_path: Path) -> None:
    pie = _clear_pie_flag(program(tmp_path / "pie", extra=["-pie"]))
    found = inspect(str(pie))
    assert found.elf is not None and not found.elf.pie_flag
    assert found.kind is Kind.PIE
    assert "no DT_SONAME" in (found.reason or "")


def test_runnable_libraries_are_shared_objects() -> None:
    """libc.so.6 has a PT_INTERP and an entry point, the loader an entry point: libraries."""
    libc = subprocess.run(["gcc", "-print-file-name=libc.so.6"], capture_output=True,
                          text=True, check=True).stdout.strip()
    libc = os.path.realpath(libc)
    found = inspect(libc)
    assert found.kind is Kind.SHARED_OBJECT
    assert found.elf is not None and not found.elf.pie_flag
    interp = inspect(sys.executable).elf
    assert interp is not None and interp.interp is not None
    assert inspect(os.path.realpath(interp.interp)).kind is Kind.SHARED_OBJECT


@pytest.mark.parametrize("path", sorted(FOREIGN))
def test_other_classes_and_byte_orders(path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} is not installed (scripts/test.sh installs it)")
    bits, order, soname = FOREIGN[path]
    found = inspect(path)
    assert found.kind is Kind.SHARED_OBJECT
    assert found.elf is not None
    assert (found.elf.elf_class, found.elf.byte_order, found.elf.soname) == (bits, order, soname)
    # pyelftools, the oracle, reads the same needed entries and machine.
    with open(path, "rb") as f:
        oracle = ELFFile(f)
        dynamic = next(s for s in oracle.iter_sections() if isinstance(s, DynamicSection))
        needed = tuple(t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED")
        assert found.elf.needed == needed
        assert found.elf.machine_number == ENUM_E_MACHINE[oracle.header.e_machine]


def test_corrupt_inputs_are_one_error_line(matrix: dict[str, Path], tmp_path: Path) -> None:
    truncated = tmp_path / "libtrunc.so"
    truncated.write_bytes(matrix["real"].read_bytes()[:40])
    member = tmp_path / "libbad.a"
    member.write_bytes(matrix["archive"].read_bytes()[:70])
    for bad in (truncated, member):
        result = run(str(bad), str(matrix["real"]))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
        assert "Traceback" not in result.stderr
        assert str(matrix["real"]) in result.stdout  # the other files are still reported

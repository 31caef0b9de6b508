"""The table of machines agrees with the files and the kernel of this machine.

Ground truth: the ELF header and PT_INTERP that gcc writes into a program here, the
program interpreter the Python running these tests was started by, and ``uname -m``; and,
for the other machines, the libc packages of other architectures installed here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from elfbuild import program
from elftools.elf.elffile import ELFFile

from bazel_ldfix import machines


def _header(path: Path | str) -> tuple[int, int, int, str | None]:
    """(class, e_machine, e_flags, PT_INTERP) as pyelftools reads them."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        interp = next((seg.get_interp_name() for seg in elf.iter_segments()
                       if seg["p_type"] == "PT_INTERP"), None)
        return 1 if elf.elfclass == 32 else 2, _raw_machine(path), elf["e_flags"], interp


def _raw_machine(path: Path | str) -> int:
    """e_machine as a number (pyelftools gives a name), in the file's byte order."""
    with open(path, "rb") as f:
        head = f.read(20)
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def test_the_standard_loader_is_the_one_gcc_names_in_a_program(tmp_path: Path) -> None:
    elf_class, machine, _flags, interp = _header(program(tmp_path / "app"))
    loader = machines.standard_loader(elf_class, machine)
    assert loader is not None and interp is not None
    assert os.path.realpath(loader.path) == os.path.realpath(interp)
    assert machines.loader_named(os.path.basename(interp)) == loader


def test_the_running_python_was_started_by_the_standard_loader() -> None:
    real = os.path.realpath("/proc/self/exe")
    elf_class, machine, _flags, interp = _header(real)
    loader = machines.standard_loader(elf_class, machine)
    assert loader is not None and interp is not None
    mapped = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
              if line.split()[-1].startswith("/")}
    assert os.path.realpath(loader.path) in {os.path.realpath(p) for p in mapped}


def test_uname_names_the_class_and_machine_of_a_64_bit_process_here() -> None:
    uname = os.uname().machine.lower()
    rows = [m for m in machines.HOST_MACHINES if re.fullmatch(m.uname, uname)]
    assert rows, uname
    elf_class, machine, _flags, _interp = _header(os.path.realpath("/proc/self/exe"))
    assert rows[0].wide[:2] == (elf_class, machine)


@pytest.mark.parametrize("libc", ["/usr/lib32/libc.so.6",
                                  "/usr/powerpc-linux-gnu/lib/libc.so.6",
                                  "/usr/s390x-linux-gnu/lib/libc.so.6"])
def test_another_machines_libc_is_named_after_its_e_machine(libc: str) -> None:
    if not os.path.exists(libc):
        pytest.skip(f"{libc} is not installed")
    elf_class, machine, _flags, _interp = _header(libc)
    name = machines.name(machine)
    assert not name.startswith("machine ")
    expected = {"lib32": "i386", "powerpc": "ppc", "s390x": "s390"}
    assert name == next(v for k, v in expected.items() if k in libc)
    assert elf_class == (1 if "lib32" in libc or "powerpc" in libc else 2)


def test_an_unknown_machine_is_named_by_its_number() -> None:
    assert machines.name(0xBEEF) == f"machine {0xBEEF}"
    assert machines.standard_loader(machines.ELFCLASS64, 0xBEEF) is None
    assert machines.loader_named("ld-nothing.so.1") is None

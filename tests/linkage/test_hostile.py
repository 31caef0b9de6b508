"""The linkage readers on corrupt files, and the start-up cost they must not add."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import lib
from elftools.elf.elffile import ELFFile

from bazel_ldfix.errors import LdfixError
from bazel_ldfix.linkage import kinds
from bazel_ldfix.symbols import read_symbols


def _regions(path: Path) -> list[tuple[int, int]]:
    """The bytes a reader trusts: headers, the dynamic section, symbol and string tables."""
    with path.open("rb") as f:
        e = ELFFile(f)
        out = [(0, 64), (e["e_phoff"], e["e_phoff"] + e["e_phnum"] * e["e_phentsize"]),
               (e["e_shoff"], e["e_shoff"] + e["e_shnum"] * e["e_shentsize"])]
        for name in (".dynamic", ".dynsym", ".dynstr", ".rela.dyn", ".rela.plt", ".symtab",
                     ".gnu.hash"):
            section = e.get_section_by_name(name)
            if section is not None and section["sh_size"]:
                out.append((section["sh_offset"], section["sh_offset"] + section["sh_size"]))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_corrupt_files_raise_only_the_projects_errors(tmp_path: Path, seed: int) -> None:
    source = lib(tmp_path / "libsrc.so", extra=["-Wl,-Bsymbolic"])
    original = source.read_bytes()
    regions = _regions(source)
    rng = random.Random(seed)
    case = tmp_path / "libcase.so"
    for _ in range(150):
        data = bytearray(original)
        for _ in range(rng.randrange(1, 6)):
            start, end = rng.choice(regions)
            data[rng.randrange(start, end)] = rng.choice([0, 0xFF, rng.randrange(256)])
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        case.write_bytes(bytes(data))
        for read in (kinds.inspect, read_symbols):
            with contextlib.suppress(LdfixError):  # anything else fails the test
                read(str(case))


def test_loader_commands_do_not_import_pyelftools() -> None:
    for args in (["--help"], ["resolve", "--help"], ["inspect", sys.executable]):
        run = subprocess.run([sys.executable, "-X", "importtime", "-m", "bazel_ldfix", *args],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-500:]
        assert "elftools" not in run.stderr, args

""".gnu.version_d as the ELF reader reads it, checked against pyelftools."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnose_fixtures import versioned_lib
from elfbuild import cc

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError


def test_version_definitions_agree_with_pyelftools(tmp_path: Path) -> None:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection

    lib = versioned_lib(tmp_path / "libv.so.1", "libv.so.1", ["V_1", "V_2", "V_3"])
    paths = [lib, Path("/bin/sh")]
    paths += [p for p in Path("/usr/lib/x86_64-linux-gnu").glob("libstdc++.so.6*")][:1]
    for path in paths:
        with path.open("rb") as fh:
            oracle = []
            for section in ELFFile(fh).iter_sections():
                if isinstance(section, GNUVerDefSection):
                    for verdef, aux in section.iter_versions():
                        if not verdef["vd_flags"] & 1:
                            oracle.append(next(aux).name)
        assert list(elf.version_definitions(str(path))) == oracle, path
    assert elf.version_definitions(str(lib)) == ("V_1", "V_2", "V_3")


def test_a_library_without_versions_defines_none(tmp_path: Path) -> None:
    lib = cc(tmp_path / "libp.so", "-shared")
    assert elf.version_definitions(str(lib)) == ()


def test_a_truncated_library_has_no_versions_to_read(tmp_path: Path) -> None:
    from elfbuild import truncated
    lib = versioned_lib(tmp_path / "libv.so.1", "libv.so.1", ["V_1"])
    cut = truncated(tmp_path / "cut" / "libv.so.1", lib, 1000)
    with pytest.raises(BadInputError):
        elf.version_definitions(str(cut))


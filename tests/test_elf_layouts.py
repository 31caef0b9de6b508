"""Executables that hold the same bytes wherever another's reading looked share its facts.

A command reads its executables through one memo (:class:`bazel_ldfix.elf.Layouts`): each
answer must be exactly what ``elf.read_elf`` gives for that file alone, its own path
included, whether it was read or matched, and a file differing in any byte the reading
depends on must get its own.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest
from elfbuild import lib, program

from bazel_ldfix import elf
from bazel_ldfix.errors import LdfixError
from bazel_ldfix.fs.memo import Memo


def _alone(path: Path) -> elf.ElfInfo | str:
    try:
        return elf.read_elf(str(path))
    except LdfixError as exc:
        return f"{type(exc).__name__}: {exc}"


def _through(memo: Memo, path: Path) -> elf.ElfInfo | str:
    try:
        return memo.read_elf(str(path))
    except LdfixError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture
def libs(tmp_path: Path) -> tuple[Path, Path]:
    return lib(tmp_path / "l" / "libaa.so.1"), lib(tmp_path / "l" / "libab.so.1")


def test_twin_executables_get_each_their_own_path(tmp_path: Path,
                                                  libs: tuple[Path, Path]) -> None:
    first = program(tmp_path / "a" / "t1", needs=[libs[0]], runpath="$ORIGIN/../l")
    twins = [shutil.copyfile(first, tmp_path / "a" / f"t{n}") for n in (2, 3)]
    memo = Memo()
    for path in [first, *twins]:
        info = memo.read_elf(str(path))
        assert info == elf.read_elf(str(path))
        assert info.path == str(path) and info.needed[0] == "libaa.so.1"


@pytest.mark.parametrize("change", ["a needed name", "the runpath"])
def test_a_file_differing_in_what_is_read_gets_its_own_facts(
        tmp_path: Path, libs: tuple[Path, Path], change: str) -> None:
    # Same lengths, so that every offset is the same and only the bytes of a name differ.
    first = program(tmp_path / "a" / "t1", needs=[libs[0]], runpath="$ORIGIN/../l")
    if change == "a needed name":
        other = program(tmp_path / "a" / "t2", needs=[libs[1]], runpath="$ORIGIN/../l")
    else:
        other = program(tmp_path / "a" / "t2", needs=[libs[0]], runpath="$ORIGIN/../m")
    memo = Memo()
    one, two = memo.read_elf(str(first)), memo.read_elf(str(other))
    assert one == elf.read_elf(str(first)) and two == elf.read_elf(str(other))
    assert dataclasses.replace(one, path="") != dataclasses.replace(two, path="")


def test_with_path_keeps_every_other_field() -> None:
    values: dict[str, object] = {}
    for n, field in enumerate(dataclasses.fields(elf.ElfInfo)):
        values[field.name] = f"value {n}"     # a distinct value in every field
    info = elf.ElfInfo(**values)  # type: ignore[arg-type]
    assert elf._with_path(info, "/x") == dataclasses.replace(info, path="/x")


def test_mutated_files_read_through_one_memo_as_each_alone(tmp_path: Path,
                                                            libs: tuple[Path, Path]) -> None:
    """Copies of real files with bytes changed in their headers, program headers, dynamic
    sections and strings: many share a header (and a layout) with another, and differ from
    it only where the reading may or may not look."""
    seeds = [program(tmp_path / "s" / "p", needs=list(libs), runpath="$ORIGIN"),
             lib(tmp_path / "s" / "libc1.so", needs=[libs[0]], rpath="$ORIGIN"),
             program(tmp_path / "s" / "q")]
    rng = random.Random(20240611)
    memo = Memo()
    for n in range(600):
        data = bytearray(seeds[n % len(seeds)].read_bytes())
        # The first page holds what the reader reads of these small files.
        for _ in range(rng.randrange(0, 3)):
            data[rng.randrange(16, min(len(data), 4096))] = rng.randrange(256)
        if rng.random() < 0.05:
            del data[rng.randrange(64, len(data)):]
        path = tmp_path / "m" / f"f{n}"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(bytes(data))
        assert _through(memo, path) == _alone(path), path

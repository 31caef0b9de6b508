"""One candidate file, checked as glibc's open_verify checks it."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import empty, lfs_pointer, lib, patch_class, patch_data, patch_machine, program

from bazel_ldfix import elf
from bazel_ldfix.loader.verify import verify


@pytest.fixture(scope="module")
def expect() -> elf.ElfHeader:
    return elf.read_header("/bin/sh")


def test_verify_accepts_a_shared_library(tmp_path: Path, expect: elf.ElfHeader) -> None:
    verdict = verify(str(lib(tmp_path / "libx.so")), expect)
    assert verdict.accepted and verdict.info is not None and verdict.info.soname == "libx.so"
    assert verdict.file_id is not None


def test_verify_skips_other_class_and_machine(tmp_path: Path, expect: elf.ElfHeader) -> None:
    c32 = patch_class(lib(tmp_path / "a" / "libx.so"), elf.ELFCLASS32)
    arm = patch_machine(lib(tmp_path / "b" / "libx.so"), 183)
    for path, reason in ((c32, "wrong ELF class: ELFCLASS32"), (arm, "wrong machine: aarch64")):
        verdict = verify(str(path), expect)
        assert (verdict.accepted, verdict.fatal, verdict.reason) == (False, False, reason)
        assert verdict.open_errno == errno.ENOENT      # what glibc leaves in errno


@pytest.mark.parametrize(("make", "reason"), [  # each returns what it made
    (lambda p: empty(p), "file too short"),
    (lambda p: lfs_pointer(p), "invalid ELF header"),
    (lambda p: p.mkdir(), "cannot read file data: Error 21"),
    (lambda p: patch_data(lib(p), elf.ELFDATA2MSB), "ELF file data encoding not little-endian"),
])
def test_verify_stops_at_files_that_are_not_usable_elf(
        tmp_path: Path, expect: elf.ElfHeader, make: Callable[[Path], object],
        reason: str) -> None:
    path = tmp_path / "libx.so"
    make(path)
    verdict = verify(str(path), expect)
    assert (verdict.fatal, verdict.names_request, verdict.reason) == (True, False, reason)


def test_verify_names_the_request_for_mapping_errors(tmp_path: Path,
                                                     expect: elf.ElfHeader) -> None:
    verdict = verify(str(program(tmp_path / "libx.so")), expect)
    assert verdict.fatal and verdict.names_request
    assert verdict.reason == "cannot dynamically load position-independent executable"


def test_verify_reports_a_missing_file_as_absent(tmp_path: Path, expect: elf.ElfHeader) -> None:
    verdict = verify(str(tmp_path / "nothing.so"), expect)
    assert not verdict.exists and not verdict.fatal and verdict.open_errno == errno.ENOENT


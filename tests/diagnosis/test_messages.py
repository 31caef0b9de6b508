"""glibc's words, from real runs of real binaries and a real Python, read from a log.

Every loader message here comes from running a real binary or a real Python
(tests/support/diagnose_fixtures.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TypeVar

import pytest
from diagnose_fixtures import (
    broken_file,
    glibc_not_found,
    glibcxx_not_found,
    missing_library,
    python_ctypes,
    python_import,
    undefined_symbol,
    version_not_found,
    wrong_class,
)
from elfbuild import cc

from bazel_ldfix.diagnosis.messages import ErrorKind, parse_log

HAVE_CXX = shutil.which("c++") is not None


T = TypeVar("T")


def only(items: tuple[T, ...]) -> T:
    assert len(items) == 1, items
    return items[0]


def test_a_missing_library_at_start_up(tmp_path: Path) -> None:
    result, prog = missing_library(tmp_path)
    assert result.returncode == 127
    f = only(parse_log(result.lines))
    assert (f.kind, f.soname, f.program, f.dlopen) == (
        ErrorKind.CANNOT_OPEN, "libxdemo.so.11", str(prog), False)
    assert f.detail == "cannot open shared object file: No such file or directory"


def test_only_copies_of_the_other_class_where_the_loader_searched(tmp_path: Path) -> None:
    result = wrong_class(tmp_path)
    assert result.returncode == 127
    f = only(parse_log(result.lines))
    assert (f.kind, f.soname, f.by_path) == (ErrorKind.WRONG_CLASS, "libwdemo.so.1", False)
    assert f.detail == "wrong ELF class: ELFCLASS32"


def test_a_library_defined_version_not_found_exits_1(tmp_path: Path) -> None:
    result, prog, old = version_not_found(tmp_path)
    assert result.returncode == 1          # not 127: the version check is not a load failure
    f = only(parse_log(result.lines))
    assert (f.kind, f.name, f.version, f.required_by, f.program) == (
        ErrorKind.VERSION_NOT_FOUND, str(old), "VDEMO_2", str(prog), str(prog))
    assert f.soname == "libvdemo.so.3" and not f.dlopen


@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")
def test_glibcxx_and_cxxabi_versions_each_on_their_line(tmp_path: Path) -> None:
    result = glibcxx_not_found(tmp_path)
    assert result.returncode == 1
    failures = parse_log(result.lines)
    assert {f.version for f in failures} >= {"CXXABI_1.3", "GLIBCXX_3.4.21"}
    assert {f.soname for f in failures} == {"libstdc++.so.6"}


def test_a_glibc_version_not_found(tmp_path: Path) -> None:
    f = only(parse_log(glibc_not_found(tmp_path).lines))
    assert (f.kind, f.soname) == (ErrorKind.VERSION_NOT_FOUND, "libc.so.6")
    assert f.version is not None and f.version.startswith("GLIBC_2.")


def test_an_undefined_symbol_at_a_call_and_through_dlopen(tmp_path: Path) -> None:
    at_call, python = undefined_symbol(tmp_path)
    f = only(parse_log(at_call.lines))
    assert (f.kind, f.symbol, f.name, f.dlopen) == (
        ErrorKind.UNDEFINED_SYMBOL, "missing_fn", str(tmp_path / "libund.so"), False)
    assert f.soname is None
    g = only(parse_log(python.lines))
    assert (g.kind, g.symbol, g.dlopen) == (ErrorKind.UNDEFINED_SYMBOL, "missing_fn", True)


@pytest.mark.parametrize(("kind", "expected"), [("short", ErrorKind.FILE_TOO_SHORT),
                                                ("lfs", ErrorKind.INVALID_ELF_HEADER)])
def test_a_broken_copy_stops_the_load(tmp_path: Path, kind: str, expected: ErrorKind) -> None:
    result, bad = broken_file(tmp_path, kind)
    assert result.returncode == 127
    f = only(parse_log(result.lines))
    assert (f.kind, f.name, f.soname) == (expected, str(bad), "libbdemo.so.2")


def test_pythons_ctypes_reports_a_missing_library_as_oserror() -> None:
    f = only(parse_log(python_ctypes("libnope_diagnose.so.3").lines))
    assert (f.kind, f.soname, f.dlopen, f.program) == (
        ErrorKind.CANNOT_OPEN, "libnope_diagnose.so.3", True, None)
    assert f.line.startswith("OSError: ")


def test_pythons_import_reports_a_missing_dependency_as_importerror(tmp_path: Path) -> None:
    f = only(parse_log(python_import(tmp_path).lines))
    assert (f.kind, f.soname, f.dlopen) == (ErrorKind.CANNOT_OPEN, "libxdemo.so.11", True)
    assert f.line.startswith("ImportError: ")


def test_ctypes_given_a_path_to_the_other_class(tmp_path: Path) -> None:
    lib = cc(tmp_path / "libw.so.1", "-shared", "-Wl,-soname,libw.so.1")
    from elfbuild import patch_class
    patch_class(lib, 1)
    f = only(parse_log(python_ctypes(str(lib)).lines))
    assert (f.kind, f.name, f.by_path, f.dlopen) == (ErrorKind.WRONG_CLASS, str(lib), True, True)


def test_noise_does_not_confuse_it(tmp_path: Path) -> None:
    result, _ = missing_library(tmp_path)
    lines = [
        "1795937710.638402770: src/main/tools/linux-sandbox-pid1.cc:189: working dir: /x",
        "1795937710.1: src/main/tools/linux-sandbox.cc:233: child exited normally with code 127",
        "checking that a wrong version of the ELF header is reported",
        "expected error: cannot open shared object file",   # prose, not a library
        "version 1.2 of the shared object format",
        "E   OSError: libfoo.so.2: cannot open shared object file: No such file or directory",
        *result.lines,
        *result.lines,                                      # a retry prints it again
        "OSError('libbar.so.1: cannot open shared object file: No such file or directory')",
    ]
    failures = parse_log(lines)
    assert [(f.soname, f.line_number) for f in failures] == [
        ("libfoo.so.2", 6), ("libxdemo.so.11", 7), ("libbar.so.1", 9)]


def test_other_loader_errors_keep_glibcs_words() -> None:
    f = only(parse_log(["/b/t: error while loading shared libraries: /x/libq.so: cannot "
                        "enable executable stack as shared object requires: Invalid argument"]))
    assert (f.kind, f.name, f.program) == (ErrorKind.OTHER, "/x/libq.so", "/b/t")
    assert f.detail.startswith("cannot enable executable stack")


def test_newer_glibc_quotes_are_read_too() -> None:
    f = only(parse_log(["./p: /l/libstdc++.so.6: version 'GLIBCXX_3.4.32' not found "
                        "(required by ./p)"]))
    assert (f.version, f.required_by) == ("GLIBCXX_3.4.32", "./p")


"""`diagnose` without Bazel: glibc's real words parsed, real files explained, bad input.

Every loader message here comes from running a real binary or a real Python; the layout of
``fake_bazel`` is Bazel 4.2.3's (checked against it in test_diagnose_bazel.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tracemalloc
from pathlib import Path
from typing import TypeVar

import pytest
from diagnose_fixtures import (
    broken_file,
    fake_bazel,
    glibc_not_found,
    glibcxx_not_found,
    missing_library,
    passing_log,
    python_ctypes,
    python_import,
    undefined_symbol,
    version_not_found,
    versioned_lib,
    wrong_class,
)
from elfbuild import cc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import cli, elf
from bazel_ldfix.bazel import solib
from bazel_ldfix.diagnosis import logs, messages, report
from bazel_ldfix.diagnosis.messages import ErrorKind, parse_log
from bazel_ldfix.diagnosis.runvalues import RanWith
from bazel_ldfix.errors import BadInputError, NotAWorkspaceError
from bazel_ldfix.render import diagnosis as render

HAVE_CXX = shutil.which("c++") is not None


T = TypeVar("T")


def only(items: tuple[T, ...]) -> T:
    assert len(items) == 1, items
    return items[0]


# -- glibc's words, from real runs ------------------------------------------------------------

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


# -- .gnu.version_d -----------------------------------------------------------------------------

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


# -- Bazel's names ------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "decoded"), [
    # seen on Bazel 4.2.3
    ("_U@xsdk_S_S_Cxdemo___Ulib", ("@xsdk//:xdemo", "lib")),
    ("_U@demo_Utensorrt_S_S_Cdemoinfer___Ulib", ("@demo_tensorrt//:demoinfer", "lib")),
    ("_U_S_St_Clocal_Uimp___Ut_Ssub_Udir", ("//t:local_imp", "t/sub_dir")),
    ("_U_S_Sdeep_Spkg_Ua_Cmy_Uimp-x___Udeep_Spkg_Ua_Sa_Ub_Sc",
     ("//deep/pkg_a:my_imp-x", "deep/pkg_a/a_b/c")),
    ("_U@xsdk_Uv_S_S_Cxdemo_Uif___Ulib", ("@xsdk_v//:xdemo_if", "lib")),
    # newer Bazel escapes @ too
    ("_U_A_Axsdk_S_S_Cxdemo___Ulib", ("@@xsdk//:xdemo", "lib")),
    # a library at the repository's root
    ("_U@r_S_S_Cx___U", ("@r//:x", "")),
])
def test_solib_directory_names_decode_to_the_cc_import(name: str,
                                                       decoded: tuple[str, str]) -> None:
    assert solib.decode_solib_dir(name) == decoded


@pytest.mark.parametrize("name", ["libfoo", "_solib_k8", "_Ux_Zy", "_U@x_S_S_Cy",
                                  "_U@x_S_S_Cy___Ua___Ub"])
def test_other_names_are_not_decoded(name: str) -> None:
    assert solib.decode_solib_dir(name) is None


# -- reading logs -------------------------------------------------------------------------------

def test_lines_are_streamed_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a" * 100 + b"\nshort\r\n\xff\xfe bad utf-8\nlast")
    assert list(logs.read_lines(str(path), max_line=20)) == [
        "a" * 20, "short\r", "\ufffd\ufffd bad utf-8", "last"]


def test_a_huge_log_costs_a_chunk_of_memory(tmp_path: Path) -> None:
    # 64 MiB in one line with no newline, then the loader's message: the worst case.
    path = tmp_path / "huge.log"
    with path.open("wb") as fh:
        block = b"x" * (1 << 20)
        for _ in range(64):
            fh.write(block)
        fh.write(b"\n/b/t: error while loading shared libraries: libz9.so.1: cannot open "
                 b"shared object file: No such file or directory\n")
    for read in (lambda: parse_log(logs.read_lines(str(path))),
                 lambda: messages.read_log(str(path))):
        tracemalloc.start()
        failures = read()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert [(f.soname, f.line_number) for f in failures] == [("libz9.so.1", 2)]
        assert peak < 8 << 20, peak     # a chunk or two; the file is 64 MiB


def test_a_binary_file_is_not_a_log(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="binary data, not a test log"):
        logs.given([str(cc(tmp_path / "prog", src="int main(void){return 0;}"))])
    with pytest.raises(BadInputError, match="no such file"):
        logs.given([str(tmp_path / "nope.log")])


@pytest.mark.parametrize(("log", "exe"), [
    ("testlogs/t/x/test.log", "bin/t/x"),
    ("testlogs/t/x/shard_1_of_2/test.log", "bin/t/x"),
    ("testlogs/t/x/run_2_of_3/test.log", "bin/t/x"),
    ("testlogs/t/x/shard_1_of_2_run_1_of_3/test.log", "bin/t/x"),
    ("testlogs/t/x/test_attempts/attempt_1.log", "bin/t/x"),
    ("testlogs/external/r/p/x/test.log", "bin/external/r/p/x"),
])
def test_the_executable_behind_each_kind_of_log(tmp_path: Path, log: str, exe: str) -> None:
    (tmp_path / log).parent.mkdir(parents=True)
    (tmp_path / log).write_text("")
    (tmp_path / exe).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / exe).write_text("")
    assert logs.executable_for(str(tmp_path / log)) == str(tmp_path / exe)


def test_sandbox_paths_map_to_the_execroot() -> None:
    path = "/ob/sandbox/linux-sandbox/10/execroot/ws/bazel-out/k8-fastbuild/bin/t/x"
    assert logs.unsandbox(path) == "/ob/execroot/ws/bazel-out/k8-fastbuild/bin/t/x"
    assert logs.output_base_of(path) == "/ob"
    assert logs.output_base_of("/elsewhere/x") is None


@pytest.mark.parametrize(("label", "patterns", "selected"), [
    ("//t:x", [], True),
    ("//t:x", ["//t:x"], True),
    ("//t:x", ["//t:y"], False),
    ("//t:x", ["//t:all"], True),
    ("//t:x", ["//t:*"], True),
    ("//t/sub:x", ["//t/..."], True),
    ("//tt:x", ["//t/..."], False),
    ("//t:x", ["//..."], True),
    ("//t:x", ["//...", "-//t:x"], False),
    ("//t:t", ["//t"], True),
    ("@r//p:x", ["@r//..."], True),
    ("@r//p:x", ["//..."], False),
    ("@//t:x", ["//t:x"], True),
    ("//t:x", [":x"], True),           # relative, from the package t
    ("//t/sub:x", ["sub/..."], True),
    (None, ["//..."], False),
])
def test_target_patterns_narrow_the_tests(label: str | None, patterns: list[str],
                                          selected: bool) -> None:
    assert logs.matches(label, patterns, package="t") is selected


def test_a_truncated_bep_file_is_read_up_to_where_it_stops(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    bep = tmp_path / "bep.json"
    events = [
        {"id": {"started": {}}, "started": {"buildToolVersion": "4.2.3"}},
        {"id": {"workspace": {}},
         "workspaceInfo": {"localExecRoot": str(fake.output_base / "execroot" / "ws")}},
        {"id": {"structuredCommandLine": {"commandLineLabel": "canonical"}},
         "structuredCommandLine": {"commandLineLabel": "canonical", "sections": [
             {"sectionLabel": "command options", "optionList": {"option": [
                 {"optionName": "test_env", "optionValue": "LD_LIBRARY_PATH=/a:/b"},
                 {"optionName": "test_env", "optionValue": "LD_LIBRARY_PATH=/kept"}]}}]}},
        {"id": {"testResult": {"label": "//t:app_test", "run": 1, "shard": 1, "attempt": 1}},
         "testResult": {"status": "FAILED", "testActionOutput": [
             {"name": "test.log", "uri": f"file://{fake.log}"},
             {"name": "test.xml", "uri": f"file://{fake.log.parent / 'test.xml'}"}]}},
    ]
    text = "\n".join(json.dumps(e) for e in events) + '\n{"id": {"testSumm'
    bep.write_text(text)
    found = logs.from_bep(str(bep))
    assert [log.label for log in found.logs] == ["//t:app_test"]
    assert found.output_base == str(fake.output_base)
    assert found.library_path == "/kept"        # the last --test_env wins, as in Bazel
    assert "ends in the middle of an event" in found.notes[0]
    flag = report.diagnose(found).findings[0].fix.flag
    assert flag == f"--test_env=LD_LIBRARY_PATH=/kept:{fake.sdk_lib}"


@pytest.mark.parametrize(("content", "message"), [
    ("not json at all\n{}\n", "line 1 is not JSON"),
    ("<html>\n", "not JSON"),
    ("", "empty"),
    ('{"no_id": 1}\n', "not a build event"),
    ('[1, 2]\n', "not a build event"),
])
def test_a_bep_file_that_is_not_one(tmp_path: Path, content: str, message: str) -> None:
    bep = tmp_path / "bep.json"
    bep.write_text(content)
    with pytest.raises(BadInputError, match=message):
        logs.from_bep(str(bep))


def test_a_bep_file_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        logs.from_bep(str(tmp_path / "none.json"))


# -- explaining, on Bazel's layout --------------------------------------------------------------

def test_the_last_invocation_explained_with_the_three_fixes(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    found = logs.find(str(fake.workspace))
    assert found.source.startswith("the last `bazel test`")
    result = report.diagnose(found)
    assert result.exit_code == 1
    f = only(result.findings)
    assert (f.test, f.error_kind, f.soname, f.seen_in_log) == (
        "//t:app_test", ErrorKind.CANNOT_OPEN, "libxdemo.so.11", True)
    assert f.needed_by == (str(fake.executable),) and f.needed_by_source == "loader model"
    assert f.found == (str(fake.sdk_lib / "libxdemo.so.11"),)
    value = str(fake.sdk_lib)
    assert f.fix.flag == f"--test_env=LD_LIBRARY_PATH={value}"
    assert f.fix.command == "bazel-ldfix test //t:app_test"
    assert f.fix.bazelrc is not None
    assert f.fix.bazelrc.splitlines()[-1] == f"test --test_env=LD_LIBRARY_PATH={value}"
    assert f.fix.bazelrc.startswith("# machine-specific")
    assert f.fix.build is not None
    assert "@xsdk//:xdemo" in f.fix.build
    assert 'shared_library = "lib/libxdemo.so.11"' in f.fix.build
    assert 'interface_library = "lib/libxdemo.so"' in f.fix.build


def test_json_carries_one_entry_per_failure(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    doc = json.loads(render.to_json(report.diagnose(logs.find(str(fake.workspace)))))
    assert doc["version"] == 1
    entry = only_entry(doc)
    assert set(entry) >= {"test", "log", "error_kind", "soname", "needed_by", "found", "fix"}
    assert set(entry["fix"]) == {"command", "flag", "bazelrc", "build"}
    assert entry["error_kind"] == "cannot_open"
    assert entry["log"] == str(fake.log)


def only_entry(doc: dict[str, object]) -> dict[str, object]:
    failures = doc["failures"]
    assert isinstance(failures, list) and len(failures) == 1, failures
    entry = failures[0]
    assert isinstance(entry, dict)
    return entry


def test_a_library_found_nowhere_is_said_so(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    (fake.sdk_lib / "libxdemo.so.11").rename(fake.sdk_lib / "renamed.so")
    (fake.sdk_lib / "libxdemo.so").unlink()
    (fake.sdk_lib / "libxdemo.so").symlink_to("renamed.so")
    f = only(report.diagnose(logs.find(str(fake.workspace))).findings)
    assert f.found == () and f.fix.flag is None and f.fix.command is None
    assert any("exists anywhere searched" in n for n in f.notes)


def test_a_wrong_machine_copy_is_passed_over(tmp_path: Path) -> None:
    from elfbuild import patch_machine
    fake = fake_bazel(tmp_path)
    arm = fake.output_base / "external" / "asdk" / "aarch64" / "libxdemo.so.11"
    arm.parent.mkdir(parents=True)
    arm.write_bytes((fake.sdk_lib / "libxdemo.so.11").read_bytes())
    patch_machine(arm, 183)
    f = only(report.diagnose(logs.find(str(fake.workspace))).findings)
    assert f.found == (str(fake.sdk_lib / "libxdemo.so.11"),)
    assert [(p.path, p.reason) for p in f.passed_over] == [(str(arm), "wrong machine: aarch64")]


def test_a_version_error_names_the_copies_that_define_it(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    result, prog, old = version_not_found(tmp_path / "v")
    good = fake.output_base / "external" / "vsdk" / "lib" / "libvdemo.so.3"
    good.parent.mkdir(parents=True)
    shutil.copy(tmp_path / "v" / "new" / "libvdemo.so.3", good)
    also_old = fake.output_base / "external" / "oldsdk" / "libvdemo.so.3"
    also_old.parent.mkdir(parents=True)
    shutil.copy(old, also_old)
    log = tmp_path / "version.log"
    log.write_text("\n".join(result.lines) + "\n")
    found = logs.find(str(tmp_path), log_files=[str(log)],
                      output_base=str(fake.output_base))
    f = only(report.diagnose(found).findings)
    assert (f.error_kind, f.soname, f.version) == (
        ErrorKind.VERSION_NOT_FOUND, "libvdemo.so.3", "VDEMO_2")
    assert f.needed_by == (str(prog),) and f.needed_by_source == "message"
    assert f.found == (str(good),)          # the old copy under output_base does not count
    assert f.fix.flag == f"--test_env=LD_LIBRARY_PATH={good.parent}"
    assert f.fix.command is not None and f.fix.command.startswith("bazel test ")
    assert any("it defines VDEMO_1" in n for n in f.notes)
    assert f.fix.build is not None and "Take it out of the test's environment" in f.fix.build


def test_a_version_only_the_systems_copy_defines_is_found_there(tmp_path: Path) -> None:
    # A C++ program run with an old libstdc++.so.6 first on LD_LIBRARY_PATH; the system's
    # own copy, the one the real loader takes without it, defines every version it needs.
    fake = fake_bazel(tmp_path)
    result = glibcxx_not_found(tmp_path / "cxx")
    log = tmp_path / "cxx.log"
    log.write_text("\n".join(result.lines) + "\n")
    found = logs.find(str(tmp_path), log_files=[str(log)], output_base=str(fake.output_base))
    failures = report.diagnose(found).findings
    assert {f.error_kind for f in failures} == {ErrorKind.VERSION_NOT_FOUND}
    interp = elf.read_elf(str(tmp_path / "cxx" / "cxx_app")).interp
    assert interp is not None
    listed = subprocess.run([interp, "--list", str(tmp_path / "cxx" / "cxx_app")],
                            capture_output=True, text=True, check=True).stdout
    system = re.search(r"libstdc\+\+\.so\.6 => (\S+)", listed)
    assert system is not None, listed
    for f in failures:
        assert f.found and os.path.samefile(f.found[0], system.group(1)), f
        assert any(n == f"{f.found[0]} defines {f.version}" for n in f.notes), f.notes
        assert f.cause is not None and f.cause.subject == str(tmp_path / "cxx" / "fake" /
                                                              "libstdc++.so.6")


def test_a_glibc_version_has_no_library_path_fix(tmp_path: Path) -> None:
    run = glibc_not_found(tmp_path)
    log = tmp_path / "glibc.log"
    log.write_text("\n".join(run.lines) + "\n")
    f = only(report.diagnose(logs.given([str(log)])).findings)
    assert f.fix.flag is None and f.fix.build is None
    assert any("glibc's own" in n for n in f.notes)


def test_a_python_dlopen_by_name_gets_the_flag_not_bazel_ldfix(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path, label="//t:py_test", command_log=False)
    run = python_ctypes("libxdemo.so.11")
    # A py_test's executable is a script; replace the cc_test's by one.
    fake.executable.unlink()
    fake.executable.write_text("#!/usr/bin/env python3\n")
    fake.log.write_text("Executing tests from //t:py_test\n" + "\n".join(run.lines) + "\n")
    found = logs.find(str(fake.workspace))
    assert "the last Bazel command ran no test" in found.source
    f = only(report.diagnose(found).findings)
    assert f.needed_by == () and f.needed_by_source == "dlopen"
    assert f.found == (str(fake.sdk_lib / "libxdemo.so.11"),)
    assert f.fix.command == ("bazel test //t:py_test "
                             f"--test_env=LD_LIBRARY_PATH={fake.sdk_lib}")
    assert f.fix.build is not None and 'data = ["@xsdk//:lib/libxdemo.so.11"]' in f.fix.build


def test_a_truncated_copy_is_passed_over_and_the_good_one_prepended(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    run, _ = broken_file(tmp_path / "b", "short")
    good = fake.output_base / "external" / "bsdk" / "libbdemo.so.2"
    good.parent.mkdir(parents=True)
    shutil.copy(tmp_path / "b" / "src" / "libbdemo.so.2", good)
    log = tmp_path / "short.log"
    log.write_text("\n".join(run.lines) + "\n")
    found = logs.find(str(tmp_path), log_files=[str(log)],
                      output_base=str(fake.output_base))
    f = only(report.diagnose(found).findings)
    assert (f.error_kind, f.found) == (ErrorKind.FILE_TOO_SHORT, (str(good),))
    assert f.fix.flag == f"--test_env=LD_LIBRARY_PATH={good.parent}"
    assert any("40 bytes long" in n for n in f.notes)


def test_an_lfs_pointer_is_named_as_such(tmp_path: Path) -> None:
    run, _ = broken_file(tmp_path, "lfs")
    log = tmp_path / "lfs.log"
    log.write_text("\n".join(run.lines) + "\n")
    f = only(report.diagnose(logs.given([str(log)])).findings)
    assert f.error_kind is ErrorKind.INVALID_ELF_HEADER
    assert any("Git LFS pointer" in n for n in f.notes)


def test_an_undefined_symbol_names_the_object_and_offers_no_flag(tmp_path: Path) -> None:
    at_call, _ = undefined_symbol(tmp_path)
    log = tmp_path / "sym.log"
    log.write_text("\n".join(at_call.lines) + "\n")
    f = only(report.diagnose(logs.given([str(log)])).findings)
    assert (f.soname, f.symbol, f.needed_by) == (None, "missing_fn",
                                                 (str(tmp_path / "libund.so"),))
    assert f.fix.flag is None


def test_logs_of_passing_tests_only(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path, command_log=False)
    shutil.rmtree(fake.log.parent)
    passing_log(fake, "t", "ok_test")
    result = report.diagnose(logs.find(str(fake.workspace)))
    assert (result.exit_code, result.passed) == (0, 1)
    assert render.to_text(result).startswith("nothing to diagnose")


def test_a_failure_that_is_not_the_loaders(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    fake.log.write_text("Executing tests from //t:app_test\nassertion failed: 1 == 2\n")
    result = report.diagnose(logs.find(str(fake.workspace)))
    assert (result.exit_code, result.other_failures) == (0, ("//t:app_test",))


def test_patterns_select_among_the_failed_tests(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    assert logs.find(str(fake.workspace), patterns=["//other/..."]).logs == ()
    assert len(logs.find(str(fake.workspace), patterns=["//t:all"]).logs) == 1


def test_no_workspace_and_no_testlogs(tmp_path: Path) -> None:
    with pytest.raises(NotAWorkspaceError):
        logs.find(str(tmp_path))
    (tmp_path / "WORKSPACE").write_text("")
    with pytest.raises(BadInputError, match="no bazel-testlogs"):
        logs.find(str(tmp_path))


def test_after_test_only_speaks_of_loader_failures(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    assert report.after_test(str(fake.output_base), 0) is None
    result = report.after_test(str(fake.output_base), 3,
                                 ran_with=RanWith("the run's", {}, "/keep/me"))
    assert result is not None
    flag = result.findings[0].fix.flag
    assert flag == f"--test_env=LD_LIBRARY_PATH=/keep/me:{fake.sdk_lib}"
    fake.log.write_text("Executing tests from //t:app_test\nassertion failed\n")
    assert report.after_test(str(fake.output_base), 3) is None
    # The run's diagnosis still names it: it loaded, and failed for another reason.
    run = report.of_run(str(fake.output_base), 3)
    assert run is not None and run.findings == () and run.other_failures == ("//t:app_test",)


# -- the command --------------------------------------------------------------------------------

def cli_run(args: list[str], cwd: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str,
                                                                                       str]:
    here = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.main(["diagnose", *args])
    finally:
        os.chdir(here)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = fake_bazel(tmp_path)
    code, out, _ = cli_run([], fake.workspace, capsys)
    assert code == 1 and re.search(r"^    libxdemo\.so\.11  .* for //t:app_test$", out, re.M)
    code, out, _ = cli_run(["-v"], fake.workspace, capsys)
    assert code == 1 and "//t:app_test cannot load libxdemo.so.11" in out
    code, out, _ = cli_run(["--json", "//t:app_test"], fake.workspace, capsys)
    assert code == 1 and json.loads(out)["failures"][0]["soname"] == "libxdemo.so.11"
    # A pattern that matches no failed test is bad input, named (a typo is not "nothing").
    code, out, err = cli_run(["//nothing/..."], fake.workspace, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: no failed test matches //nothing/... in ")
    assert "the failed tests: //t:app_test" in err
    bad = tmp_path / "bad.json"
    bad.write_text("garbage\n")
    code, _, err = cli_run(["--bep", str(bad)], fake.workspace, capsys)
    assert code == 2 and err.startswith("error: ") and "not JSON" in err
    code, _, err = cli_run(["--log", str(fake.executable)], fake.workspace, capsys)
    assert code == 2 and "binary data" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "WORKSPACE").write_text("")
    code, _, err = cli_run([], empty, capsys)
    assert code == 2 and "no bazel-testlogs" in err


def test_a_log_rewritten_after_the_bep_run_is_flagged(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    bep = tmp_path / "old.json"
    bep.write_text(json.dumps(
        {"id": {"testResult": {"label": "//t:app_test"}},
         "testResult": {"status": "FAILED", "testAttemptStartMillisEpoch": "1000",
                        "testAttemptDurationMillis": "5",
                        "testActionOutput": [{"name": "test.log",
                                              "uri": f"file://{fake.log}"}]}}) + "\n")
    found = logs.from_bep(str(bep))
    assert len(found.logs) == 1
    assert any("was rewritten after the run" in n for n in found.notes)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from([b"x", b"abc ", b"\n", b"ELF", b"version", b"\xff",
                                        b"so", b"shared object", b"\n\n", b"y" * 7])),
       max_line=st.integers(1, 12), chunk=st.integers(1, 9))
def test_searching_in_chunks_finds_the_lines_read_lines_gives(
        tmp_path: Path, pieces: list[bytes], max_line: int, chunk: int) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"".join(pieces))
    needles = (b"ELF", b"version", b"shared object")
    expected = [(n, line) for n, line in enumerate(logs.read_lines(str(path), max_line), 1)
                if any(k.decode() in line for k in needles)]
    assert list(logs.read_matching(str(path), needles, max_line, chunk)) == expected


def test_a_truncated_library_has_no_versions_to_read(tmp_path: Path) -> None:
    from elfbuild import truncated
    lib = versioned_lib(tmp_path / "libv.so.1", "libv.so.1", ["V_1"])
    cut = truncated(tmp_path / "cut" / "libv.so.1", lib, 1000)
    with pytest.raises(BadInputError):
        elf.version_definitions(str(cut))

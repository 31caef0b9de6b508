"""A diagnosis without Bazel: real files and glibc's real words, explained.

Every loader message here comes from running a real binary or a real Python; the layout of
``fake_bazel`` is Bazel 4.2.3's (checked against it in test_diagnose_bazel.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TypeVar

from diagnose_fixtures import (
    broken_file,
    fake_bazel,
    glibc_not_found,
    glibcxx_not_found,
    passing_log,
    python_ctypes,
    undefined_symbol,
    version_not_found,
)

from bazel_ldfix import elf
from bazel_ldfix.diagnosis import logs, report
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.diagnosis.runvalues import RanWith
from bazel_ldfix.render import diagnosis as render

HAVE_CXX = shutil.which("c++") is not None


T = TypeVar("T")


def only(items: tuple[T, ...]) -> T:
    assert len(items) == 1, items
    return items[0]


# -- glibc's words, from real runs ------------------------------------------------------------

# -- .gnu.version_d -----------------------------------------------------------------------------

# -- Bazel's names ------------------------------------------------------------------------------

# -- reading logs -------------------------------------------------------------------------------

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

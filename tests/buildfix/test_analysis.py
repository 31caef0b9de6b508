"""How `fix --write` asks Bazel to analyse what it wrote (the real runs are in
test_fix_safety_bazel.py): the user's arguments as `bazel build` takes them, Bazel's first
error, and a bound on time. A Bazel that hangs is the one thing a real one will not do on
demand: a script stands in for it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.buildfix import analysis


@pytest.mark.parametrize(("given", "expected"), [
    (["--config=ci", "//t:x"], ["--config=ci", "//t:x"]),
    (["--test_output=all", "--verbose_test_summary", "//t:x"], ["//t:x"]),
    (["--test_summary", "terse", "--notest_verbose_timeout_warnings", "//t:x"], ["//t:x"]),
    (["--print_relative_test_log_paths=yes", "--test_env=A=1", "//t:x"],
     ["--test_env=A=1", "//t:x"]),
    (["//t:x", "--", "--test_output=all"], ["//t:x", "--", "--test_output=all"]),
])
def test_the_options_bazel_build_refuses_are_left_out(given: list[str],
                                                      expected: list[str]) -> None:
    assert analysis.build_args(given) == expected


def test_the_first_error_is_bazels_first_error_line() -> None:
    stderr = ("Loading: 0 packages loaded\n"
              "\x1b[31m\x1b[1mERROR: \x1b[0m/ws/v/BUILD:1:8: in cc_test rule //v:needs_v: "
              "target '@wsdk//:wdemo' is not visible from target '//v:needs_v'\n"
              "ERROR: Analysis of target '//v:needs_v' failed; build aborted\n")
    assert analysis.first_error(stderr) == (
        "ERROR: /ws/v/BUILD:1:8: in cc_test rule //v:needs_v: target '@wsdk//:wdemo' is "
        "not visible from target '//v:needs_v'")


def test_a_bazel_that_does_not_answer_is_stopped_and_the_change_not_accepted(
        tmp_path: Path) -> None:
    hanging = tmp_path / "bazel"
    hanging.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(600)\n")
    hanging.chmod(0o755)
    verdict = analysis.analyse(Bazel(str(hanging), str(tmp_path), {}), ["//t:x"], [],
                               timeout=0.5)
    assert verdict == analysis.Verdict(
        False, "Bazel did not finish the analysis in 0.5 s (stopped)", None)


def test_the_analysis_runs_in_a_session_of_its_own_with_no_terminal_input(
        tmp_path: Path) -> None:
    # As every Bazel call of the tool's own: a signal then ends a wrapper and the client
    # it started together (tests/commands/test_fix_command_bazel.py has them on a real Bazel).
    seen = tmp_path / "seen"
    bazel = tmp_path / "bazel"
    bazel.write_text(f"#!{sys.executable}\nimport os\n"
                     f"open({str(seen)!r}, 'w').write('%d %d %s' % (os.getpid(), "
                     "os.getsid(0), os.readlink('/proc/self/fd/0')))\n")
    bazel.chmod(0o755)
    verdict = analysis.analyse(Bazel(str(bazel), str(tmp_path), {}), ["//t:x"], [])
    assert verdict == analysis.Verdict(True, None, 0)
    pid, session, stdin = seen.read_text().split()
    assert (pid, stdin) == (session, "/dev/null")

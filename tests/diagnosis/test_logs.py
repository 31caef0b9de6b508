"""The console of Bazel 7, 8 and 9 after a test run, on recorded input.

Each ``command.log`` here is written in the form a Bazel release prints; the comment above
each one names the Bazel source it follows. The test logs they point at hold what a real
binary printed when the loader stopped it (``fake_bazel``), so the diagnosis is real.
The old form, Bazel 4.2.3's, is checked against a real Bazel in test_diagnose_bazel.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diagnose_fixtures import fake_bazel, passing_log

from bazel_ldfix import cli
from bazel_ldfix.bazel.exitcodes import TESTS_FAILED
from bazel_ldfix.diagnosis import logs, report

SUMMARY_ROW = "{label}                                                   FAILED in 0.0s"


def run_diagnose(workspace: Path, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict[str, object]]:
    monkeypatch.chdir(workspace)
    code = cli.main(["diagnose", "--json"])
    return code, json.loads(capsys.readouterr().out)


# bazelbuild/bazel src/main/java/com/google/devtools/build/lib/exec/TestStrategy.java,
# processTestOutput: Event.of(EventKind.FAIL, null, testName + " (see " + testLog + ")"),
# printed by the UI as "FAIL: "; Bazel 7.0 added the test's exit code before the log
# (PR #19841, "Report test exit code"): "FAIL: //t:x (Exit 1) (see .../test.log)".
@pytest.mark.parametrize("form", [
    "FAIL: {label} (Exit 127) (see {log})",
    "FAIL: {label} (see {log})",
])
def test_both_forms_of_the_fail_line_are_read(tmp_path: Path, form: str,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_bazel(tmp_path, command_log=False)
    label = "//t:app_test"
    (fake.output_base / "command.log").write_text(
        "INFO: Found 1 test target...\n"
        + form.format(label=label, log=fake.log) + "\n"
        + f"INFO: From Testing {label}:\n"
        + SUMMARY_ROW.format(label=label) + f"\n  {fake.log}\n\n"
        + "Executed 1 out of 1 test: 1 fails locally.\n")
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    assert [(log.path, log.label, log.status) for log in found.logs] == [
        (str(fake.log), label, "FAILED")]
    assert found.notes == ()
    code, doc = run_diagnose(fake.workspace, capsys, monkeypatch)
    assert code == 1
    failures = doc["failures"]
    assert isinstance(failures, list)
    assert [(f["test"], f["soname"]) for f in failures] == [(label, "libxdemo.so.11")]


# TestRunnerAction.getTestName appends " (shard N of M)" and " (run N of M)" to the label;
# with the exit code (PR #19841) a shard's line has two parenthesised groups before "(see".
def test_a_sharded_run_with_its_exit_code(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path, command_log=False)
    shard = fake.log.parent / "shard_1_of_2" / "test.log"
    shard.parent.mkdir()
    shard.write_text(fake.log.read_text())
    (fake.output_base / "command.log").write_text(
        f"FAIL: //t:app_test (shard 1 of 2) (Exit 127) (see {shard})\n"
        f"TIMEOUT: //t:app_test (shard 2 of 2) (see {fake.log})\n"
        "Executed 1 out of 1 test: 1 fails locally.\n")
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    assert [(log.path, log.status) for log in found.logs] == [
        (str(shard), "FAILED"), (str(fake.log), "TIMEOUT")]


def test_the_summary_s_log_paths_stand_in_for_fail_lines_not_understood(
        tmp_path: Path) -> None:
    # A console form this reader does not know (say a future one); the summary rows and
    # the log paths under them (TestSummaryPrinter) still name the failed run.
    fake = fake_bazel(tmp_path, command_log=False)
    (fake.output_base / "command.log").write_text(
        f"FAIL[//t:app_test] exit=127 log={fake.log}\n"
        + SUMMARY_ROW.format(label="//t:app_test") + f"\n  {fake.log}\n\n"
        "Executed 1 out of 1 test: 1 fails locally.\n")
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    assert [(log.path, log.label) for log in found.logs] == [(str(fake.log), "//t:app_test")]
    assert "summary lists" in found.notes[0]
    assert report.diagnose(found).findings[0].soname == "libxdemo.so.11"


def test_bazel_testlogs_when_the_summary_says_tests_failed_and_names_no_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the "Executed" line (TestResultNotifier) says a test failed: the latest failed
    # log of each test in testlogs is read, the passing ones are not.
    fake = fake_bazel(tmp_path, command_log=False)
    passing_log(fake, "t", "ok_test")
    (fake.output_base / "command.log").write_text(
        "Executed 2 out of 2 tests: 1 test passes and 1 fails locally.\n")
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    assert [log.path for log in found.logs] == [str(fake.log)]
    assert found.passed == 1
    assert "names no log" in found.notes[0]
    code, doc = run_diagnose(fake.workspace, capsys, monkeypatch)
    assert code == 1
    assert doc["logs_read"] == 1


def test_a_run_where_every_test_passed_has_nothing_to_read(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path, command_log=False)
    (fake.output_base / "command.log").write_text(
        "//t:app_test                                  PASSED in 0.0s\n\n"
        "Executed 1 out of 1 test: 1 test passes.\n")
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    assert found.logs == () and found.notes == ()


def test_the_fallback_keeps_to_the_tests_the_summary_names(tmp_path: Path) -> None:
    # Two failed logs in testlogs, one of an earlier run: only the test the summary lists
    # as failed is read.
    fake = fake_bazel(tmp_path, command_log=False)
    old = fake.testlogs / "t" / "old_test" / "test.log"
    old.parent.mkdir(parents=True)
    old.write_text(fake.log.read_text().replace("//t:app_test", "//t:old_test"))
    (old.parent / "test.xml").write_text((fake.log.parent / "test.xml").read_text())
    (fake.output_base / "command.log").write_text(
        SUMMARY_ROW.format(label="//t:app_test") + "\n\n"
        "Executed 1 out of 1 test: 1 fails locally.\n")
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    assert [log.label for log in found.logs] == ["//t:app_test"]


def test_after_test_diagnoses_the_bazel_7_form(tmp_path: Path) -> None:
    # What `bazel-ldfix test` prints after Bazel's summary (exit code 3) reads the same.
    fake = fake_bazel(tmp_path, command_log=False)
    (fake.output_base / "command.log").write_text(
        f"FAIL: //t:app_test (Exit 127) (see {fake.log})\n"
        "Executed 1 out of 1 test: 1 fails locally.\n")
    result = report.after_test(str(fake.output_base), TESTS_FAILED)
    assert result is not None
    assert [f.soname for f in result.findings] == ["libxdemo.so.11"]

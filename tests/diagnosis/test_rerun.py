"""`test` runs the user's `bazel test` whenever no repair can be computed; the rerun's rules.

The paths here are ones a real Bazel cannot be made to take on demand (a bug of ours, put
in for the test; an interrupted build step), so a stand-in script plays Bazel and logs
every call. tests/repair/test_fallback_bazel.py covers the rest with a real Bazel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bazel_ldfix.diagnosis import rerun
from bazel_ldfix.diagnosis.explain import Finding
from bazel_ldfix.diagnosis.fixes import Fix
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.diagnosis.report import Diagnosis
from bazel_ldfix.given import Given
from bazel_ldfix.repair.results import Repair

# The event a real Bazel ends every --build_event_json_file with.
LAST_EVENT = ('{"id":{"buildFinished":{}},"finished":{"exitCode":{"name":"SUCCESS"}},'
              '"lastMessage":true}')


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BAZEL"}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def fake_bazel(tmp_path: Path, events: str, build_code: int, test_code: int) -> Path:
    """A bazel whose build step writes ``events`` and exits ``build_code``; `test` exits
    ``test_code``; every call is logged to calls.log."""
    (tmp_path / "WORKSPACE").touch()
    (tmp_path / "events.json").write_text(events)
    path = tmp_path / "bazel"
    path.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls.log
case "$1" in info) echo {tmp_path}/ob; exit 0;; esac
for arg in "$@"; do
  case "$arg" in --build_event_json_file=*)
    cp {tmp_path}/events.json "${{arg#*=}}"; exit {build_code};;
  esac
done
exit {test_code}
""")
    path.chmod(0o755)
    (tmp_path / "ob").mkdir()
    return path


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_an_internal_error_runs_bazel_test_unchanged(tmp_path: Path) -> None:
    # A bug of ours, not of the user's. The known ones are fixed, so one is put in: the
    # repair's planning step raises, as a bug in it would.
    events = ('{"id":{"targetConfigured":{"label":"//t:x_test"}},'
              '"configured":{"targetKind":"cc_test rule","testSize":"SMALL"}}\n'
              '{"id":{"targetCompleted":{"label":"//t:x_test"}},'
              '"completed":{"success":true,"importantOutput":[{"uri":"file://%s"}]}}\n'
              % (tmp_path / "x_test")) + LAST_EVENT + "\n"
    (tmp_path / "x_test").write_text("#!/bin/sh\n")
    bazel = fake_bazel(tmp_path, events, build_code=0, test_code=3)
    inject = ("import sys\nfrom bazel_ldfix import cli\n"
              "from bazel_ldfix.repair import plan as repair\n"
              "def plan(*args, **kwargs):\n    raise TypeError('a bug')\n"
              "repair.plan_repair = plan\nsys.exit(cli.main(sys.argv[1:]))\n")
    env = {k: v for k, v in os.environ.items() if k != "BAZEL"}
    result = subprocess.run(
        [sys.executable, "-c", inject, "test", "--bazel", str(bazel), "--no-cache",
         "--keep_going", "//t:x_test"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 3
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("bazel-ldfix:")]
    assert line.startswith("bazel-ldfix: no repair: internal error, please report it: "
                           "TypeError: a bug")
    assert line.endswith("; running `bazel test` unchanged")
    # Where in the tool the bug surfaced (the planning is called from there).
    assert "repair/testcommand.py:" in line and "Traceback" not in result.stderr
    assert calls(tmp_path)[-1] == "test --keep_going //t:x_test"   # as given


def test_patterns_that_select_no_test_run_bazel_test_unchanged(tmp_path: Path) -> None:
    bazel = fake_bazel(tmp_path, LAST_EVENT + "\n", build_code=4, test_code=4)
    result = run("test", "--bazel", str(bazel), "--no-cache", "//t:tool", cwd=tmp_path)
    assert result.returncode == 4
    assert calls(tmp_path)[-1] == "test //t:tool"
    assert "select no test" in result.stderr


def test_an_interrupted_build_step_stops(tmp_path: Path) -> None:
    bazel = fake_bazel(tmp_path, "", build_code=8, test_code=0)
    result = run("test", "--bazel", str(bazel), "--no-cache", "//t:all", cwd=tmp_path)
    assert result.returncode == 8
    assert [c.split()[0] for c in calls(tmp_path)] == ["test"]   # the build step alone
    assert "running `bazel test` unchanged" not in result.stderr


def test_a_usage_error_of_our_own_options_stops_before_bazel(tmp_path: Path) -> None:
    bazel = fake_bazel(tmp_path, "", build_code=0, test_code=0)
    result = run("test", "--bazel", str(bazel), "--output-base", str(tmp_path / "nope"),
                 "//t:all", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: output_base {tmp_path / 'nope'} does not exist"
    assert not (tmp_path / "calls.log").exists()


# -- the rerun's rules ------------------------------------------------------------------------

def test_the_rerun_keeps_the_options_and_names_exactly_the_tests() -> None:
    given = Given((), ("/a", "/b"))
    flag = "--test_env=LD_LIBRARY_PATH=/a:/b"
    args = ["--config=ci", "--test_output", "errors", "//t:all", "-c", "opt", "//u/..."]
    assert rerun.arguments(args, ["//t:all", "//u/..."], ["//t:x"], given) == [
        "--config=ci", "--test_output", "errors", "-c", "opt", flag, "--", "//t:x"]
    # After `--` every word is a pattern, negative ones included.
    assert rerun.arguments(["--keep_going", "--", "//t:all", "-//t:y"], ["//t:all", "-//t:y"],
                           ["//t:x"], given) == ["--keep_going", flag, "--", "//t:x"]
    # A pattern file names patterns the words do not show.
    assert rerun.arguments(["--target_pattern_file", "f.txt"], ["//t:all"], ["//t:x"],
                           given) is None
    assert rerun.arguments(["//t:all"], [], ["//t:x"], given) is None   # no pattern event


def finding(test: str, soname: str, found: tuple[str, ...],
            kind: ErrorKind = ErrorKind.CANNOT_OPEN) -> Finding:
    # The diagnosis' value: the directory found (after what the run had, left out here).
    value = os.path.dirname(found[0]) if found else None
    flag = f"--test_env=LD_LIBRARY_PATH={value}" if value else None
    return Finding(test, f"/logs/{test}", kind, soname, (), found,
                   Fix(None, flag, None, None, value), "", True, "unknown")


def diagnosis(*findings: Finding, other: tuple[str, ...] = ()) -> Diagnosis:
    return Diagnosis("the last `bazel test`", "/ob", findings, len(findings), other, 0)


def repair_with(base: tuple[str, ...], added: tuple[str, ...], *,
                prepend: bool = False) -> Repair:
    return Repair("/ob", "", (), (), Given(base, added, prepend))


def test_only_tests_whose_every_library_was_found_are_rerun() -> None:
    planned = rerun.plan_rerun(diagnosis(
        finding("//t:a", "libp.so.3", ("/ob/external/s/plib/libp.so.3",)),
        finding("//t:b", "libq.so.1", ("/ob/external/s/q/libq.so.1",)),
        finding("//t:b", "libr.so.1", ()),                       # found nowhere
        finding("//t:c", "libv.so.1", ("/v/libv.so.1",), ErrorKind.VERSION_NOT_FOUND),
        other=("//t:d",)), repair_with(("/base",), ("/ob/external/s/lib",)))
    assert planned.labels == ("//t:a",)
    assert planned.added == (("libp.so.3", "/ob/external/s/plib"),)
    # The first run's value kept whole, in order; the new directory after it.
    assert planned.ld_library_path == "/base:/ob/external/s/lib:/ob/external/s/plib"
    assert [t for t, _ in planned.not_rerun] == ["//t:b", "//t:c"]
    assert planned.other_failures == ("//t:d",)
    with_prepend = rerun.plan_rerun(diagnosis(
        finding("//t:a", "libp.so.3", ("/ob/external/s/plib/libp.so.3",))),
        repair_with(("/base",), (), prepend=True))
    assert with_prepend.ld_library_path == "/ob/external/s/plib:/base"


def test_no_rerun_when_the_directory_was_there_already() -> None:
    planned = rerun.plan_rerun(diagnosis(finding("//t:a", "libp.so.3", ("/d/libp.so.3",))),
                         repair_with((), ("/d",)))
    assert planned.labels == () and planned.ld_library_path is None
    assert "already" in planned.not_rerun[0][1]


def test_the_combined_exit_code() -> None:
    alone = rerun.plan_rerun(diagnosis(finding("//t:a", "libp.so.3", ("/d/libp.so.3",))),
                       repair_with((), ()))
    others = rerun.plan_rerun(diagnosis(finding("//t:a", "libp.so.3", ("/d/libp.so.3",)),
                                  other=("//t:z",)), repair_with((), ()))
    assert rerun.combined_code(3, 0, alone) == 0       # every failed test passes now
    assert rerun.combined_code(3, 0, others) == 3      # //t:z failed in the first run
    assert rerun.combined_code(3, 3, alone) == 3       # still failing
    assert rerun.combined_code(3, 8, others) == 8      # the rerun was interrupted


def test_events_cut_short_at_a_line_boundary_are_not_no_test(tmp_path: Path) -> None:
    # Every line whole, but no last event: Bazel stopped writing (killed, disk full). Which
    # tests it built is not known, which is not "no test selected".
    events = ('{"id":{"targetConfigured":{"label":"//t:x_test"}},'
              '"configured":{"targetKind":"cc_test rule","testSize":"SMALL"}}\n')
    bazel = fake_bazel(tmp_path, events, build_code=0, test_code=0)
    result = run("test", "--bazel", str(bazel), "--no-cache", "//t:x_test", cwd=tmp_path)
    assert result.returncode == 0
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("bazel-ldfix:")]
    assert "events end before Bazel's last event" in line and "select no test" not in line
    assert line.endswith("; running `bazel test` unchanged")
    assert calls(tmp_path)[-1] == "test //t:x_test"
    result = run("env", "--bazel", str(bazel), "--no-cache", "//t:x_test", cwd=tmp_path)
    assert result.returncode == 66
    assert result.stderr.splitlines()[-1].startswith("error: the build step's events end")

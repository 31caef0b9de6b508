"""A split run runs what the user's command selects, on a real Bazel 4.2.3.

``//t:t1`` links ``@sdk_v1//:foo``; ``//t:t3`` and ``//t:t4`` link ``@sdk_v2//:foo``, a
file with the same SONAME, so the run is split; ``//t:t2`` needs nothing. ``//t:suite``
holds ``//t:t3``, and ``//t:t4`` is tagged ``slow``. With ``//t:all -//t:t3``, Bazel builds
t3 (the suite brings it back) and does not run it. Each group's `bazel test` is the user's
command less the other groups' tests, so Bazel selects, and a test the command does not run
never runs. Each test prints its ``/proc/self/maps`` lines, and that is what is read.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, two_foo_sdks

from tests.commands.test_test_split_bazel import MAPS, mapped

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("splitselection")
    files = {
        "WORKSPACE": two_foo_sdks(top),
        "t/BUILD": ('cc_test(name = "t1", srcs = ["t1.c"], deps = ["@sdk_v1//:foo"])\n'
                    'cc_test(name = "t2", srcs = ["t2.c"])\n'
                    'cc_test(name = "t3", srcs = ["t3.c"], deps = ["@sdk_v2//:foo"])\n'
                    'cc_test(name = "t4", srcs = ["t3.c"], deps = ["@sdk_v2//:foo"], '
                    'tags = ["slow"])\n'
                    'test_suite(name = "suite", tests = [":t3"])\n'),
        "t/t1.c": MAPS % 1, "t/t2.c": "int main(void) { return 0; }\n", "t/t3.c": MAPS % 2,
        "patterns.txt": "//t:all\n-//t:t3\n",
    }
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    try:
        yield workspace
    finally:
        workspace.shutdown()


def ran(ws: Workspace, name: str) -> bool:
    return (ws.root / "bazel-testlogs" / "t" / name / "test.log").exists()


def forget(ws: Workspace, *names: str) -> None:
    """Remove the tests' logs, so that a log found after a run is that run's."""
    for name in names:
        shutil.rmtree(ws.root / "bazel-testlogs" / "t" / name, ignore_errors=True)


def bazel_runs(ws: Workspace, top: Path, patterns: list[str]) -> set[str]:
    """The tests plain `bazel test -- PATTERNS` runs, as its events say."""
    events = top / "events.json"
    ws.bazel("test", f"--build_event_json_file={events}", "--", *patterns)
    summaries = [json.loads(line)["id"].get("testSummary")
                 for line in events.read_text().splitlines()]
    return {s["label"] for s in summaries if s}


@pytest.mark.parametrize("patterns", [
    ["//t:all", "-//t:t3"],                 # t3 built through the suite, not run
    ["//t:all", "-//t:suite"],              # the suite's tests taken out
    ["//t:all", "-//t:t3", "//t:suite"],    # and brought back by a later pattern
    ["//t:suite", "-//t:all", "//t:t1"],
])
def test_the_tests_counted_are_the_tests_bazel_test_runs(
        ws: Workspace, tmp_path: Path, patterns: list[str]) -> None:
    expected = bazel_runs(ws, tmp_path, patterns)
    result = ws.ldfix("env", "--format", "json", "--", *patterns)
    assert result.returncode == 0, result.stderr[-3000:]
    assert {t["label"] for t in json.loads(result.stdout)["tests"]} == expected


def test_a_split_run_runs_no_test_the_command_excludes(ws: Workspace) -> None:
    forget(ws, "t3")
    result = ws.ldfix("test", "--", "//t:all", "-//t:t3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the run is split into 2 `bazel test` runs" in result.stderr
    assert not ran(ws, "t3")
    assert mapped(ws, "t1") == {"libfoo.so.3.1.0"}
    assert mapped(ws, "t4") == {"libfoo.so.3.2.0"}


def test_each_run_of_the_dry_run_is_the_command_less_the_other_groups(ws: Workspace) -> None:
    result = ws.ldfix("test", "--dry-run", "--", "//t:all", "-//t:t3")
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = (shlex.split(line) for line in result.stdout.splitlines())
    assert first[first.index("--"):] == ["--", "//t:all", "-//t:t3", "-//t:t4"]
    assert second[second.index("--"):] == ["--", "//t:all", "-//t:t3", "-//t:t1", "-//t:t2"]
    assert "sdk_v1/lib" in first[first.index("--") - 1]
    assert "sdk_v2/lib" in second[second.index("--") - 1]


def test_a_split_run_keeps_the_tag_filters(ws: Workspace) -> None:
    forget(ws, "t4")
    result = ws.ldfix("test", "--test_tag_filters=-slow", "//t:all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "run 2 of 2: //t:t3" in result.stderr
    assert not ran(ws, "t4")
    assert mapped(ws, "t1") == {"libfoo.so.3.1.0"}
    assert mapped(ws, "t3") == {"libfoo.so.3.2.0"}


def test_a_split_run_takes_the_patterns_of_a_pattern_file(ws: Workspace) -> None:
    # Bazel takes no pattern on the command line along with --target_pattern_file.
    forget(ws, "t3")
    result = ws.ldfix("test", "--target_pattern_file=patterns.txt")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the run is split into 2 `bazel test` runs" in result.stderr
    assert not ran(ws, "t3")
    assert mapped(ws, "t1") == {"libfoo.so.3.1.0"}
    assert mapped(ws, "t4") == {"libfoo.so.3.2.0"}


def test_a_run_that_selects_no_test_does_not_fail_the_split_run(
        ws: Workspace, tmp_path: Path) -> None:
    # Where the tool cannot ask which tests the patterns take out (its query fails here),
    # it counts every test built, t3 too (t4 is not built), and gives it a run of its own.
    # Bazel selects no test there (exit code 4), as the command does not select t3.
    assert BAZEL
    wrapper = tmp_path / "bazel"
    wrapper.write_text(f"#!/bin/sh\ncase \"$*\" in *'tests(\"'*) exit 7;; esac\n"
                       f"exec {shlex.quote(BAZEL)} \"$@\"\n")
    wrapper.chmod(0o755)
    forget(ws, "t3", "t4")
    result = ws.ldfix("test", "--", "//t:all", "-//t:t3", "-//t:t4",
                      env={"BAZEL": str(wrapper)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "run 2 of 2: //t:t3\n" in result.stderr
    assert "run 2 of 2 ran no test" in result.stderr
    assert "exit codes 0, 4: exit code 0" in result.stderr
    assert not ran(ws, "t3") and not ran(ws, "t4")
    assert mapped(ws, "t1") == {"libfoo.so.3.1.0"}

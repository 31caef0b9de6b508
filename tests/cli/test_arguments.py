"""Arguments that behave like Bazel's, and help that shows how (a real Bazel workspace)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, logged_commands, logging_bazel
from newcomer_ws import newcomer_workspace

from bazel_ldfix import cli

pytestmark = pytest.mark.newcomer

needs_bazel = pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = newcomer_workspace(tmp_path_factory.mktemp("newcomer"))
    yield workspace
    workspace.shutdown()


def passed(result: subprocess.CompletedProcess[str], label: str) -> bool:
    """Bazel's summary line says the test passed (cached or not)."""
    pattern = rf"^{re.escape(label)}\s+(\(cached\) )?PASSED"
    return re.search(pattern, result.stdout + result.stderr, re.M) is not None


def recording_bazel(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in that only records that it was started (to show it never is)."""
    record = tmp_path / "started"
    script = tmp_path / "bazel"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {record}\nexit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record


@pytest.mark.bazel
@needs_bazel
def test_a_double_dash_is_bazels_and_excludes_a_target(ws: Workspace) -> None:
    # broken_test always fails: the run passes only if `-//app:broken_test` reached Bazel
    # as a target pattern after its `--`.
    plain = ws.bazel("test", "--", "//...", "-//app:broken_test")
    assert plain.returncode == 3, plain.stderr       # the loader failures, not a syntax error
    result = ws.ldfix("test", "--", "//...", "-//app:broken_test")
    assert result.returncode == 0, result.stderr
    assert "Invalid options syntax" not in result.stderr
    assert passed(result, "//app:vendor_test")
    assert passed(result, "//app:ext_test")
    assert "//app:broken_test" not in result.stdout
    shown = ws.ldfix("test", "--dry-run", "--", "//...", "-//app:broken_test")
    assert shown.returncode == 0, shown.stderr
    words = shown.stdout.split()
    # The repair goes before Bazel's `--`, the patterns after it as given.
    assert words[-3:] == ["--", "//...", "-//app:broken_test"]
    assert words[-4].startswith("'--test_env=LD_LIBRARY_PATH=") or \
        words[-4].startswith("--test_env=LD_LIBRARY_PATH=")


@pytest.mark.parametrize("args", [("env", "//...", "--format", "json"),
                                  ("test", "//...", "--dry-run"),
                                  ("test", "//app:all", "--config=ci", "-q"),
                                  ("env", "//...", "--output-base=/x")])
def test_a_tool_option_after_the_targets_is_refused_with_the_command_that_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    bazel, record = recording_bazel(tmp_path)
    (tmp_path / "WORKSPACE").write_text("")
    os.chdir(tmp_path)
    code = cli.main([args[0], "--bazel", str(bazel), *args[1:]])
    out, err = capsys.readouterr()
    assert code == 2
    assert not record.exists()             # Bazel never ran
    if "json" in args:      # asked for JSON, if in the wrong place: the error is JSON too
        assert json.loads(out)["error"]["exit_code"] == 2
    else:
        assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    moved = [a for a in args[1:] if a.startswith("-") and a != "--config=ci"]
    name = moved[0].split("=")[0]
    assert f"{name} is an option of bazel-ldfix" in lines[0]
    suggestion = lines[0].split("before the Bazel arguments: ", 1)[1]
    # The suggested command line parses: the option comes before the Bazel arguments.
    assert suggestion.startswith(f"bazel-ldfix {args[0]} --bazel {bazel} ")
    assert suggestion.index(moved[0]) < suggestion.index(args[1])


def test_tool_options_before_bazels_and_patterns_after_a_double_dash_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bazel, record = recording_bazel(tmp_path)
    os.chdir(tmp_path)
    # --no-repair --dry-run: printed, not run. A `--dry-run` after `--` is a pattern.
    code = cli.main(["test", "--bazel", str(bazel), "--no-repair", "--dry-run",
                     "--config=ci", "//app:all", "--", "-//app:broken_test", "--dry-run"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.split()[1:] == ["test", "--config=ci", "//app:all", "--",
                               "-//app:broken_test", "--dry-run"]
    assert not record.exists()


@pytest.mark.bazel
@needs_bazel
def test_quiet_prints_nothing_of_its_own_on_a_repaired_run(ws: Workspace) -> None:
    result = ws.ldfix("test", "--quiet", "//app:vendor_test")
    assert result.returncode == 0, result.stderr
    assert passed(result, "//app:vendor_test")
    assert not [line for line in result.stderr.splitlines()
                if line.startswith("bazel-ldfix")]
    loud = ws.ldfix("test", "//app:vendor_test")
    assert [line for line in loud.stderr.splitlines() if line.startswith("bazel-ldfix")]


BROKEN_BUILD = ("error: the build step of `bazel test` failed (exit code 1); see Bazel's "
                "output above")


@pytest.mark.bazel
@needs_bazel
def test_a_typo_in_a_target_shows_bazels_error_once_and_exits_with_its_code(
        ws: Workspace, tmp_path: Path) -> None:
    plain = ws.bazel("test", "//app:vendr_test")
    assert plain.returncode == 1
    errors = [line for line in plain.stderr.splitlines() if line.startswith("ERROR:")]
    assert any("no such target '//app:vendr_test'" in line for line in errors), errors
    bazel, log = logging_bazel(tmp_path)
    result = ws.ldfix("test", "--bazel", str(bazel), "//app:vendr_test")
    assert result.returncode == plain.returncode
    # Bazel's error block as many times as a plain `bazel test` prints it: once.
    shown = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert shown == errors
    assert logged_commands(log) == ["test"]          # the build step, and nothing again
    ours = [line for line in result.stderr.splitlines()
            if line.startswith(("bazel-ldfix", "error:"))]
    assert ours == [BROKEN_BUILD]


@pytest.mark.bazel
@needs_bazel
@pytest.mark.parametrize("args", [("test",), ("test", "--quiet"), ("env",), ("env", "--quiet"),
                                  ("env", "--format", "json"), ("fix",), ("fix", "--check")])
def test_a_target_that_does_not_exist_is_one_error_line_and_bazels_code_from_every_command(
        ws: Workspace, args: tuple[str, ...]) -> None:
    result = ws.ldfix(*args, "//app:vendr_test")
    assert result.returncode == 1, result.stderr[-3000:]     # Bazel's, as a plain run's
    ours = [line for line in result.stderr.splitlines()
            if line.startswith(("bazel-ldfix", "error:"))]
    assert ours == [BROKEN_BUILD]
    if "json" in args:      # asked for JSON: the error is a document on stdout too
        assert json.loads(result.stdout)["error"]["exit_code"] == 1
    else:
        assert result.stdout == ""


def test_every_command_has_an_example_and_whole_summaries(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    listing = capsys.readouterr().out
    commands = re.findall(r"^  ([\w-]+)\s+(.*)$", listing.split("Commands:", 1)[1], re.M)
    assert {c for c, _ in commands} >= {"test", "env", "diagnose", "resolve", "check",
                                        "locate"}
    for name, summary in commands:
        assert summary.endswith("."), (name, summary)     # not cut mid-sentence
        assert not summary.endswith("..."), (name, summary)
        assert cli.main([name, "--help"]) == 0
        text = capsys.readouterr().out
        examples = text.split("Examples:", 1)[1].split("Options:", 1)[0]
        assert re.search(rf"^\s+bazel-ldfix {name} \S", examples, re.M), name


def test_test_help_says_where_tool_options_go_and_what_a_double_dash_does(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["test", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "The options of bazel-ldfix (below) come first" in text
    assert "A `--` is Bazel's, as with `bazel test`" in text
    assert "bazel-ldfix test -- //... -//app:ext_test" in text
    assert "--dry-run Run the build step (it builds, runs no test)" in text


def test_shell_completion_as_the_docs_set_it_up() -> None:
    import sys

    page = (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()
    assert 'eval "$(_BAZEL_LDFIX_COMPLETE=bash_source bazel-ldfix)"' in page
    env = {**os.environ, "_BAZEL_LDFIX_COMPLETE": "bash_complete",
           "COMP_WORDS": "bazel-ldfix te", "COMP_CWORD": "1"}
    done = subprocess.run([sys.executable, "-m", "bazel_ldfix"], env=env,
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["plain,test"]

"""What a newcomer reads before anything runs: `--help`, and a machine without Bazel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bazelws import LDFIX
from click.testing import CliRunner

from bazel_ldfix.cli import cli
from bazel_ldfix.cli.registry import COMMANDS

pytestmark = pytest.mark.newcomer


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_help_opens_with_where_to_start_and_lists_commands_in_the_order_of_use() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    start = lines.index("  Start here:")
    # Where to start comes before the options and the list of commands.
    assert start < lines.index("Options:") < lines.index("Commands:")
    first = [line.split()[1] for line in lines[start + 1:start + 4]]
    assert first == ["test", "diagnose", "fix"]
    listed = [line.split()[0] for line in lines[lines.index("Commands:") + 1:] if line.strip()]
    assert listed[:4] == ["test", "diagnose", "fix", "env"]
    assert listed == list(COMMANDS)    # every command, once, in the table's order
    assert max(len(line) for line in lines) <= 80


def test_no_bazel_on_path_names_the_three_ways_out(tmp_path: Path) -> None:
    (tmp_path / "WORKSPACE").touch()
    env = {k: v for k, v in os.environ.items() if k != "BAZEL"}
    env["PATH"] = str(tmp_path / "empty")     # a PATH with no bazel on it
    for args in (["test", "//..."], ["env", "//..."], ["fix", "//..."],
                 ["locate", "libx.so.1"]):
        result = run(*args, cwd=tmp_path, env=env)
        assert result.returncode == 65, (args, result.stderr)
        [line] = result.stderr.splitlines()
        assert line.startswith("error: cannot run bazel: No such file or directory; "
                               "no `bazel` on PATH: install Bazel"), line
        assert "--bazel PATH" in line and "BAZEL=PATH" in line


def test_a_bazel_named_by_the_user_that_does_not_run_says_who_named_it(tmp_path: Path) -> None:
    (tmp_path / "WORKSPACE").touch()
    env = {k: v for k, v in os.environ.items() if k != "BAZEL"}
    given = run("env", "--bazel", str(tmp_path / "nope"), "//...", cwd=tmp_path, env=env)
    assert given.returncode == 65
    assert given.stderr.splitlines() == [
        f"error: cannot run {tmp_path / 'nope'}: No such file or directory (named by --bazel)"]
    named = run("env", "//...", cwd=tmp_path, env={**env, "BAZEL": str(tmp_path / "nope")})
    assert named.returncode == 65
    assert named.stderr.splitlines() == [
        f"error: cannot run {tmp_path / 'nope'}: No such file or directory (named by $BAZEL; "
        "set it to a Bazel that runs, or unset it)"]


@pytest.mark.parametrize(("args", "line"), [
    (["diagnose", "--jsn"],
     f"error: no such option '--jsn'. Did you mean '--json'? (see `{LDFIX} diagnose --help`)"),
    (["tset"], f"error: no such command 'tset'. Did you mean 'test'? (see `{LDFIX} --help`)"),
    (["resolve"], f"error: missing argument 'FILES...' (see `{LDFIX} resolve --help`)"),
    (["diagnose", "--bep"],   # click's parser gives no command: the first word names it
     f"error: option '--bep' requires an argument (see `{LDFIX} diagnose --help`)"),
    (["resolve", "--root", "/no  such", "/bin/true"],   # the user's words kept as given
     "error: invalid value for '--root': Directory '/no  such' does not exist (see "
     f"`{LDFIX} resolve --help`)"),
])
def test_a_command_line_click_cannot_read_is_one_error_line_and_exit_2(
        args: list[str], line: str, tmp_path: Path) -> None:
    result = run(*args, cwd=tmp_path, env=dict(os.environ))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [line]


def test_no_arguments_print_the_help() -> None:
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix"], capture_output=True,
                            text=True)
    assert result.stderr.startswith("Usage: bazel-ldfix [OPTIONS] COMMAND [ARGS]...")
    assert "Commands:" in result.stderr


@pytest.mark.parametrize(("args", "fixed", "bazels"), [
    (["--config=ci", "test", "--no-repair", "--dry-run", "//..."],
     "test --no-repair --dry-run --config=ci //...", "--config=ci //..."),
    # The tool's own options after the command, Bazel's before Bazel's other arguments.
    (["--config", "ci", "-q", "test", "--no-repair", "--dry-run", "--", "//...", "-//a:b"],
     "test -q --no-repair --dry-run --config ci -- //... -//a:b", "--config ci -- //... -//a:b"),
])
def test_an_option_before_the_command_is_said_to_go_after_it_with_the_line_that_works(
        args: list[str], fixed: str, bazels: str, tmp_path: Path) -> None:
    result = run(*args, cwd=tmp_path, env=dict(os.environ))
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    before = " ".join(args[:args.index("test")])
    assert line == (f"error: {before} {'are' if ' ' in before else 'is'} given before the "
                    "command test; the options of bazel-ldfix test and Bazel's go after it: "
                    f"{LDFIX} {fixed}")
    # The line that works, pasted: the options reach Bazel's command line (printed, as
    # --dry-run --no-repair prints it, not run).
    pasted = subprocess.run(["bash", "-c", line.split(" go after it: ", 1)[1]], cwd=tmp_path,
                            capture_output=True, text=True)
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.split()[1:] == ["test", *bazels.split()]


def test_an_option_before_a_command_of_files_goes_after_it() -> None:
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", "--json", "resolve",
                             "/bin/true"], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --json is given before the command resolve; the options of bazel-ldfix "
        f"resolve go after it: {LDFIX} resolve --json /bin/true"]

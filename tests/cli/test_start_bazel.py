"""Getting started: what a newcomer meets before the first repair (a real Bazel 4.2.3)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import terminal
from bazelws import BAZEL, Workspace
from newcomer_ws import newcomer_workspace

from bazel_ldfix import cli

pytestmark = pytest.mark.newcomer

needs_bazel = pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")
INSTALL = (Path(__file__).resolve().parents[2] / "docs" / "install.md").read_text()


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = newcomer_workspace(tmp_path_factory.mktemp("start"))
    yield workspace
    workspace.shutdown()


def on_terminal(ws: Workspace, *args: str) -> str:
    """What a command prints with stdout and stderr on a terminal."""
    return terminal.on_terminal(list(args), cwd=ws.root, env=ws.env)[1]


@pytest.mark.bazel
@needs_bazel
def test_locate_before_anything_is_fetched_waits_visibly_and_says_what_is_missing(
        ws: Workspace) -> None:
    # A workspace nothing was built in, no Bazel server running: `bazel info` starts one.
    ws.shutdown()
    text = on_terminal(ws, "locate", "libvendor.so.3")
    assert re.search(r"bazel-ldfix: waiting for `\S*bazel info output_base`", text), text
    output_base = ws.bazel("info", "output_base").stdout.strip()
    assert not os.path.isdir(os.path.join(output_base, "external"))
    lines = [line for line in text.splitlines() if line.startswith("error:")]
    assert lines == [f"error: no external repository has been fetched into {output_base} yet "
                     "(it has no external/ directory): build or fetch first, e.g. "
                     "`bazel fetch //...`, then run locate again"]
    # Not on a terminal: no notice (a script's stderr stays as it was).
    piped = ws.ldfix("locate", "libvendor.so.3")
    assert piped.returncode == 2 and "waiting for" not in piped.stderr


@pytest.mark.bazel
@needs_bazel
def test_quiet_on_a_terminal_names_no_bazel_command_it_waits_for(ws: Workspace) -> None:
    # No Bazel server running: `bazel info`, asked before the run, starts one.
    ws.shutdown()
    code, text = terminal.on_terminal(["test", "--quiet", "--no-repair", "//app:vendor_test"],
                                      cwd=ws.root, env=ws.env)
    assert code == 3, text[-3000:]
    assert "waiting for" not in text
    # What it does print is the diagnosis of the test the loader stopped.
    assert "bazel-ldfix: 1 failed test was stopped by the dynamic loader" in text


@pytest.mark.bazel
@needs_bazel
def test_a_changed_ld_library_path_rebuilds_as_the_docs_and_env_shell_warn(
        ws: Workspace, tmp_path: Path) -> None:
    assert ws.bazel("build", "//app:vendor_test").returncode == 0
    again = ws.bazel("build", "//app:vendor_test")
    assert "linux-sandbox" not in again.stderr and "processwrapper" not in again.stderr
    changed = ws.bazel("build", "//app:vendor_test", env={"LD_LIBRARY_PATH": str(tmp_path)})
    ran = re.search(r"INFO: (\d+) process(es)?: .*?(\d+) (linux-sandbox|processwrapper)",
                    changed.stderr)
    assert ran is not None and int(ran.group(3)) >= 2, changed.stderr   # compile and link
    assert "re-runs every compile and link after either changes" in " ".join(INSTALL.split())
    shell = ws.ldfix("env", "--format", "shell", "//app:vendor_test")
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.startswith("export LD_LIBRARY_PATH=")
    said = " ".join(shell.stderr.replace("\nbazel-ldfix:  ", "").split())   # wrapped lines
    assert "do not export it in the shell that runs Bazel" in said
    assert "rebuilds everything" in said


def ran_actions(result: subprocess.CompletedProcess[str]) -> int:
    """How many actions a build ran in a sandbox (compiles and links), from Bazel's line."""
    ran = re.search(r"INFO: \d+ process(?:es)?: .*?(\d+) (?:linux-sandbox|processwrapper)",
                    result.stderr)
    return int(ran.group(1)) if ran else 0


@pytest.mark.bazel
@needs_bazel
def test_a_new_path_entry_rebuilds_once_and_the_tool_passes_path_as_it_is(
        ws: Workspace, tmp_path: Path) -> None:
    # pipx's bin directory, new in front of PATH, as `pipx ensurepath` puts it.
    bin_dir = tmp_path / "pipx-bin"
    bin_dir.mkdir()
    path = f"{bin_dir}:{ws.env.get('PATH', os.defpath)}"
    target = "//app:vendor_test"
    assert ws.bazel("build", target).returncode == 0
    assert ran_actions(ws.bazel("build", target, env={"PATH": path})) >= 2  # compile, link
    assert ran_actions(ws.bazel("build", target, env={"PATH": path})) == 0  # once
    # The tool's build step, from that shell, builds with that PATH: nothing is left for
    # the user's next build to redo.
    assert ws.ldfix("env", target, env={"PATH": path}).returncode == 0
    assert ran_actions(ws.bazel("build", target, env={"PATH": path})) == 0
    # Bazel's own cure: with a fixed PATH for actions, one rebuild, then none.
    strict = "--incompatible_strict_action_env"
    assert ran_actions(ws.bazel("build", strict, target, env={"PATH": path})) >= 2
    assert ran_actions(ws.bazel("build", strict, target)) == 0
    assert ran_actions(ws.bazel("build", strict, target, env={"PATH": path})) == 0
    said = " ".join(INSTALL.split())
    assert "a new entry in front of `PATH` re-runs the compile and link" in said
    assert "bazel-ldfix does not keep `PATH` out of the build" in said


def test_a_json_error_is_json_on_stdout_and_one_line_on_stderr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    code = cli.main(["locate", "--json", "--output-base", str(missing), "libx.so.1"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err == f"error: output_base {missing} does not exist\n"
    assert json.loads(out) == {"version": 1, "error": {
        "message": f"output_base {missing} does not exist", "exit_code": 2}}
    # Without --json, stdout stays empty.
    assert cli.main(["locate", "--output-base", str(missing), "libx.so.1"]) == 2
    assert capsys.readouterr().out == ""


def test_the_install_page_says_how_to_run_the_installed_command() -> None:
    assert "pipx install" in INSTALL and ".venv/bin/bazel-ldfix" in INSTALL
    # The README says how to install for daily use, with the warning that goes with it.
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert "pipx install /path/to/bazel-ldfix" in readme
    assert "rebuilds everything once after `~/.local/bin` joins `PATH`" in readme
    assert "bazel-ldfix cannot keep `PATH` out of the build" in readme

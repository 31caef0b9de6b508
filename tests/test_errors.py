"""How an error says the way Bazel ended: as the shell says it, and with Bazel's own last
lines each on a line of its own.

Ground truth for the exit codes: what bash reports as ``$?`` for a process that ended the
same way (and the commands' own exit codes are checked in cli/test_root.py and
commands/test_env_failures.py).
"""

from __future__ import annotations

import signal
import subprocess

import pytest

from bazel_ldfix.errors import BazelError, exit_words


def _default_signals() -> None:
    # A job started in the background of a shell inherits SIGINT ignored, and a shell
    # cannot undo that for its children: give them the default action, as a terminal does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _shell_status(script: str) -> tuple[int, int]:
    """(Python's returncode, bash's ``$?``) for the same child ending in the same way."""
    proc = subprocess.run(["sh", "-c", script], check=False, preexec_fn=_default_signals)
    status = subprocess.run(["bash", "-c", f"sh -c '{script}'; echo $?"], capture_output=True,
                            text=True, check=True, preexec_fn=_default_signals).stdout.strip()
    return proc.returncode, int(status)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_process_killed_by_a_signal_is_told_with_the_shells_exit_code(
        sig: signal.Signals) -> None:
    returncode, shell = _shell_status(f"kill -{sig.name[3:]} $$")
    assert returncode == -sig
    assert exit_words(returncode) == f"killed by {sig.name} (exit code {shell})"


def test_an_exit_code_is_told_as_it_is() -> None:
    returncode, shell = _shell_status("exit 37")
    assert returncode == shell == 37
    assert exit_words(returncode) == "exit code 37"


def test_bazels_last_lines_follow_the_message_each_indented_on_its_own() -> None:
    stderr = "\n".join(f"line {n}" for n in range(12)) + "\n\n   \n"
    error = BazelError("bazel query failed", ["bazel", "query"], 7, stderr)
    lines = error.lines()
    assert lines[0] == "bazel query failed (exit code 7)"
    assert lines[1:] == [f"    line {n}" for n in range(4, 12)]     # the last 8, no blank
    assert str(error) == "\n".join(lines)


def test_an_error_without_a_process_is_its_message_alone() -> None:
    assert BazelError("cannot read the events").lines() == ["cannot read the events"]

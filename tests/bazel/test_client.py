"""The user's `bazel test` runs in a session of its own, and gets every signal the tool gets
in its whole group, as a terminal would give Ctrl-C to its foreground group
(bazel_ldfix/bazel/client.py, Streaming).

A stand-in script plays Bazel. It tells the test that it runs by writing its process ids
into a FIFO, which the test reads: the signal is sent once the script runs, with no
waiting for time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.commands.test_env_failures import fake_bazel_with_a_test
from tests.test_children import gone, pids, start


def session_of(pid_stat: str) -> tuple[int, int, int]:
    """(pid, process group, session) from a /proc/PID/stat line."""
    pid = int(pid_stat.split(" ", 1)[0])
    fields = pid_stat.rsplit(")", 1)[1].split()
    return pid, int(fields[2]), int(fields[3])


def test_the_users_bazel_test_runs_in_a_session_of_its_own(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    bazel, _log = fake_bazel_with_a_test(tmp_path, f"cat /proc/$$/stat > {stat}\n")
    result = start("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test",
                   cwd=tmp_path)
    _out, err = result.communicate(timeout=120)
    assert result.returncode == 0, err
    pid, group, session = session_of(stat.read_text())
    assert pid == group == session


def test_a_signal_reaches_the_whole_group_and_nothing_of_the_run_is_left(
        tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    # A wrapper that dies of SIGINT, leaving a child that ignores it (a background job of
    # a script does): what is left of its group is ended with it.
    bazel, _log = fake_bazel_with_a_test(
        tmp_path, f'sleep infinity & echo "$$ $!" > {fifo}; wait\n')
    proc = start("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    started = pids(fifo)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"bazel-ldfix: {bazel} was killed by SIGINT (exit code 130)" in err
    assert "Traceback" not in err
    assert all(gone(pid) for pid in started), started


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT])
def test_sighup_and_sigquit_reach_the_users_bazel_test_as_sigterm(
        tmp_path: Path, sig: signal.Signals) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    traps = "".join(f"trap 'echo got {name} >&2; exit 8' {name}\n"
                    for name in ("HUP", "QUIT", "TERM"))
    bazel, _log = fake_bazel_with_a_test(
        tmp_path, f'{traps}sleep infinity & echo "$$ $!" > {fifo}; wait\n')
    proc = start("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    started = pids(fifo)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    # Bazel's own code, as for SIGINT and SIGTERM: the tool waits for Bazel to stop.
    assert proc.returncode == 8, err
    assert "got TERM" in err and "got HUP" not in err and "got QUIT" not in err
    assert all(gone(pid) for pid in started), started

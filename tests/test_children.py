"""Bazel calls of the tool's own are bounded in time, and a signal ends the tool with every
process it started (bazel_ldfix/children.py).

A real Bazel cannot be made to hang or to sit in a query on demand, so a stand-in script
plays it. It tells the test that it has started by writing its process ids into a FIFO,
which the test reads: the signal is sent once the script runs, with no waiting for time.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bazelws import BAZEL, clean_env, make_workspace, needs_x
from elfbuild import lib, program

from bazel_ldfix import children
from tests.commands.test_env_failures import fake_bazel, fake_bazel_with_a_test


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BAZEL", "LD_LIBRARY_PATH")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BAZEL", "LD_LIBRARY_PATH")}
    return subprocess.Popen([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def gone(pid: int) -> bool:
    """Whether process ``pid`` ends: a SIGKILL sent takes effect once the process is next
    scheduled, so its pidfd is waited on (an event, with a bound for a process that lives
    on)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)


def handshake(tmp_path: Path) -> tuple[Path, str]:
    """A FIFO, and the shell lines that start a child that outlives any signal but SIGKILL
    sent to its parent's group (a background job of a script ignores SIGINT), write both
    ids into the FIFO, and wait."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    return fifo, f'sleep infinity & echo "$$ $!" > {fifo}; wait\n'


def pids(fifo: Path) -> list[int]:
    with open(fifo) as fh:      # blocks until the script has written them
        return [int(word) for word in fh.read().split()]


def missing_a_library(tmp_path: Path) -> Path:
    """A test executable that cannot load libgone.so.1: the repair asks the rules."""
    libgone = lib(tmp_path / "gone" / "libgone.so.1", soname="libgone.so.1")
    exe = program(tmp_path / "bin" / "t" / "probe_test", needs=[libgone])
    libgone.unlink()
    return exe


# -- bounded calls -----------------------------------------------------------------------

def test_a_bazel_info_that_never_answers_is_ended_after_the_bazel_timeout(
        tmp_path: Path) -> None:
    bazel = fake_bazel(tmp_path, f'case "$1" in info) echo $$ > {tmp_path}/pid; '
                                 "exec sleep infinity;; esac\n")
    result = run("locate", "--bazel", str(bazel), "--bazel-timeout", "0.5", "libx.so.1",
                 cwd=tmp_path)
    assert result.returncode == 66
    assert result.stderr.splitlines() == [
        f"error: `{bazel} info output_base` did not answer within 0.5 s (--bazel-timeout); "
        "it was ended"]
    assert gone(int((tmp_path / "pid").read_text()))


def test_a_rule_query_that_never_answers_leaves_bazel_test_to_run_unchanged(
        tmp_path: Path) -> None:
    exe = missing_a_library(tmp_path)
    bazel, log = fake_bazel_with_a_test(
        tmp_path, f'case "$1" in query) echo $$ > {tmp_path}/pid; exec sleep infinity;; '
                  f"info) echo {tmp_path}/ob;; esac\n", executable=exe)
    result = run("test", "--bazel", str(bazel), "--no-cache", "--bazel-timeout", "0.5",
                 "//t:probe_test", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    expired = [line for line in result.stderr.splitlines() if "did not answer" in line]
    assert len(expired) == 1
    assert expired[0].startswith(f"bazel-ldfix: no repair: `{bazel} query --output=xml ")
    assert expired[0].endswith("did not answer within 0.5 s (--bazel-timeout); it was "
                               "ended; running `bazel test` unchanged")
    assert log.read_text().splitlines()[-1] == "test //t:probe_test"
    assert gone(int((tmp_path / "pid").read_text()))


def test_no_bazel_timeout_means_no_limit(tmp_path: Path) -> None:
    bazel = fake_bazel(tmp_path, f'case "$1" in info) echo {tmp_path};; esac\n')
    (tmp_path / "external").mkdir()
    result = run("locate", "--bazel", str(bazel), "--bazel-timeout", "0", "libx.so.1",
                 cwd=tmp_path)
    assert result.returncode == 1, result.stderr     # asked, answered: found nowhere
    assert result.stdout.startswith("libx.so.1: nowhere under")


def test_a_negative_bazel_timeout_is_a_usage_error(tmp_path: Path) -> None:
    result = run("env", "--bazel-timeout", "-1", "//...", cwd=tmp_path)
    assert result.returncode == 2
    assert "--bazel-timeout" in result.stderr and "Traceback" not in result.stderr


# -- signals ------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", children.SIGNALS)
def test_a_signal_during_the_rule_query_ends_the_tool_and_the_query_at_once(
        tmp_path: Path, sig: signal.Signals) -> None:
    exe = missing_a_library(tmp_path)
    fifo, script = handshake(tmp_path)
    bazel, _log = fake_bazel_with_a_test(tmp_path, f'case "$1" in query) {script};; esac\n',
                                         executable=exe)
    proc = start("env", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    started = pids(fifo)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig
    assert err.splitlines()[-1] == (f"bazel-ldfix: interrupted by {sig.name}; stopped "
                                    f"(exit code {128 + sig})")
    assert "Traceback" not in err
    assert all(gone(pid) for pid in started), started   # the script and its child


@pytest.mark.parametrize("sig", children.SIGNALS)
def test_a_signal_during_the_build_step_ends_the_tool_and_the_step(
        tmp_path: Path, sig: signal.Signals) -> None:
    fifo, script = handshake(tmp_path)
    bazel = fake_bazel(tmp_path, script)     # every command blocks, the build step first
    proc = start("test", "--bazel", str(bazel), "--no-cache", "//...", cwd=tmp_path)
    started = pids(fifo)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig
    assert err.splitlines()[-1].startswith(f"bazel-ldfix: interrupted by {sig.name}")
    assert "was killed" not in err and "Traceback" not in err
    assert all(gone(pid) for pid in started), started


def test_a_signal_while_bazel_is_asked_which_words_it_takes_ends_that_call_too(
        tmp_path: Path) -> None:
    # Bazel refuses its command line (exit code 2), and the tool asks `bazel help
    # completion` whether `--wrte` is a word of Bazel's or a misplaced option of its own.
    fifo, script = handshake(tmp_path)
    bazel = fake_bazel(tmp_path, f'case "$1" in test) exit 2;; help) {script};; esac\n')
    proc = start("fix", "--bazel", str(bazel), "//t:x", "--wrte", cwd=tmp_path)
    started = pids(fifo)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.splitlines()[-1] == "bazel-ldfix: interrupted by SIGTERM; stopped (exit code 143)"
    assert all(gone(pid) for pid in started), started


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGQUIT])
def test_sighup_and_sigquit_reach_a_bazel_step_as_sigterm(
        tmp_path: Path, sig: signal.Signals) -> None:
    # A Bazel client reads SIGQUIT as "make the server print its threads", and dies of
    # SIGHUP without cancelling its command; SIGTERM cancels it.
    exe = missing_a_library(tmp_path)
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    got = tmp_path / "got"
    traps = "".join(f"trap 'echo {name} > {got}; exit 8' {name}\n"
                    for name in ("HUP", "QUIT", "TERM"))
    bazel, _log = fake_bazel_with_a_test(
        tmp_path, f'case "$1" in query) {traps}sleep infinity & echo $$ > {fifo}; wait;; '
                  "esac\n", executable=exe)
    proc = start("env", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    (script,) = pids(fifo)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig
    assert err.splitlines()[-1] == (f"bazel-ldfix: interrupted by {sig.name}; stopped "
                                    f"(exit code {128 + sig})")
    assert gone(script)
    assert got.read_text() == "TERM\n"


def test_a_signal_while_work_is_held_is_handled_once_the_work_is_done() -> None:
    done = []
    with pytest.raises(children.Interrupted) as stop, children.ended_on_signals():
        with children.held():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("the files are whole")
        done.append("never reached")
    assert stop.value.exit_code == 143
    assert done == ["the files are whole"]


def test_the_users_bazel_test_gets_the_signal_and_its_exit_code_comes_back(
        tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    bazel, _log = fake_bazel_with_a_test(
        tmp_path, f"trap 'echo interrupted >&2; exit 8' INT\necho $$ > {fifo}\n"
                  "while true; do sleep 1; done\n")
    proc = start("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    pids(fifo)          # Bazel's `test` runs, its trap set
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 8
    assert "interrupted" in err and "Traceback" not in err
    assert "given its libraries" not in err and "given their libraries" not in err
    assert "repaired" not in err


# -- with Bazel 4.2.3 ----------------------------------------------------------------------

@pytest.mark.bazel
@pytest.mark.skipif(BAZEL is None, reason="no bazel")
def test_sigterm_during_a_real_rule_query_ends_its_client_and_spares_the_server(
        tmp_path: Path) -> None:
    assert BAZEL is not None
    ws = make_workspace(tmp_path / "ws", needs_x(tmp_path), env=clean_env())
    try:
        server = ws.bazel("info", "server_pid", check=True).stdout.strip()
        fifo = tmp_path / "started"
        os.mkfifo(fifo)
        wrapper = tmp_path / "bazel"
        wrapper.write_text(f'#!/bin/sh\ncase "$1" in query) echo $$ > {fifo};; esac\n'
                           f'exec {BAZEL} "$@"\n')
        wrapper.chmod(0o755)
        # //t:needs_x cannot load its library: the repair asks for the rules' env.
        proc = subprocess.Popen([sys.executable, "-m", "bazel_ldfix", "env", "--bazel",
                                 str(wrapper), "--no-cache", "//t:needs_x"], cwd=ws.root,
                                env=ws.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        (client,) = pids(fifo)
        _until_exec(client)      # the Bazel client itself runs the query now
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err
        assert err.splitlines()[-1] == ("bazel-ldfix: interrupted by SIGTERM; stopped (exit "
                                        "code 143)")
        assert gone(client)
        # The server was not touched: the same one answers the next command.
        assert ws.bazel("info", "server_pid", check=True).stdout.strip() == server
    finally:
        ws.shutdown()


def _until_exec(pid: int) -> None:
    """Until process ``pid`` runs a program that is no shell (the scripts before it exec)."""
    shells = ("sh", "bash", "dash")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) not in shells:
                return
        except OSError:
            return      # ended already: the signal then finds nothing to end
        os.sched_yield()
    raise AssertionError(f"process {pid} still runs a shell")

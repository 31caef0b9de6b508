"""Under a real remote executor (BuildGrid and our worker), Bazel 4.2.3 runs the tests there.

A worker gives an action only the files Bazel declared: a test that cannot load its library
fails remotely, whatever this machine's output_base holds. `bazel-ldfix test` then adds no
path of this machine and gives the BUILD change alone; `fix --write` with the same flags
makes it, and a remote run that accepts no cached result passes. A library an earlier build
left in bazel-out makes a local run pass; the remote run fails, and `fix --check` knows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    LDFIX,
    Workspace,
    clean_env,
    logging_bazel,
    make_workspace,
    needs_x,
)
from rexserver import Executor

from bazel_ldfix.bazel.execution import remote_refusal
from bazel_ldfix.diagnosis.report import remote_note

pytestmark = [pytest.mark.remote, pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TEST = "//t:needs_x"


class Remote:
    def __init__(self, ws: Workspace, executor: Executor, top: Path) -> None:
        self.ws, self.executor, self.top = ws, executor, top
        self.flag = f"--remote_executor={executor.address}"

    def bazel(self, *args: str) -> tuple[int, str]:
        result = self.ws.bazel("test", self.flag, *args)
        return result.returncode, result.stdout + result.stderr

    def ldfix(self, *args: str) -> tuple[int, str, str]:
        result = self.ws.ldfix(*args, env={"BAZEL": str(self.top / "bazel")})
        return result.returncode, result.stdout, result.stderr


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory,
           remote_executor: Executor) -> Iterator[Remote]:
    top = tmp_path_factory.mktemp("remote")
    ws = make_workspace(top / "ws", needs_x(top), env=clean_env())
    logging_bazel(top)
    try:
        yield Remote(ws, remote_executor, top)
    finally:
        ws.shutdown()


def test_a_test_that_cannot_load_its_library_fails_remotely(remote: Remote) -> None:
    code, out = remote.bazel(TEST)
    assert code == 3, out[-3000:] + remote.executor.log()
    assert "1 fails remotely" in out
    assert " remote." in out            # INFO: N processes: ... M remote.
    log = remote.ws.test_log("t", "needs_x")
    assert "/rexworker-" in log         # it ran in the worker's directory
    assert "libxdemo.so.11: cannot open shared object file" in log


def test_ldfix_test_adds_no_path_and_gives_the_build_change_alone(remote: Remote) -> None:
    code, _out, err = remote.ldfix("test", remote.flag, TEST)
    assert code == 3, err[-3000:]
    assert f"bazel-ldfix: {remote_refusal(LDFIX)}" in err
    calls = (remote.top / "bazel-calls.log").read_text().splitlines()
    run = [c for c in calls if c.startswith("test ") and "--build_event_json_file" not in c]
    assert run and "--test_env" not in run[-1]
    # The diagnosis after the run: the BUILD change, and no path of this machine to add.
    assert remote_note(LDFIX).split(":")[0] in err
    assert f"bazel-ldfix: for good: `{LDFIX} fix //t:needs_x` shows the BUILD change" in err
    assert "--test_env=LD_LIBRARY_PATH" not in err and ".bazelrc:" not in err


def test_fix_write_with_the_same_flags_then_a_remote_run_passes(remote: Remote) -> None:
    code, out, err = remote.ldfix("fix", "--write", remote.flag, TEST)
    assert code == 0, out + err[-3000:]
    assert 'shared_library = \\"lib/libxdemo.so.11\\"' in out
    code, out = remote.bazel("--noremote_accept_cached", TEST)
    assert code == 0, out[-3000:] + remote.executor.log()
    assert " remote." in out and "1 test passes" in out


def test_a_local_pass_through_a_leftover_fails_remotely(remote: Remote) -> None:
    # The fix reverted: Bazel stages libxdemo.so again, and the earlier build's
    # libxdemo.so.11 stays in bazel-out/.../_solib_k8, where a local run finds it.
    workspace = remote.ws.root / "WORKSPACE"
    workspace.write_text(workspace.read_text().replace("libxdemo.so.11", "libxdemo.so"))
    local = remote.ws.bazel("test", "--nocache_test_results", TEST)
    assert local.returncode == 0, local.stderr[-3000:]
    assert "1 test passes" in local.stdout + local.stderr
    code, out = remote.bazel("--noremote_accept_cached", "--nocache_test_results", TEST)
    assert code == 3, out[-3000:]
    assert "1 fails remotely" in out
    # diagnose, on this machine, finds the library only where Bazel declares nothing.
    code, out, err = remote.ldfix("diagnose", TEST)
    assert code == 1, out + err[-3000:]
    assert "a leftover of an earlier build in bazel-out" in " ".join(out.split())
    code, out, err = remote.ldfix("fix", "--check", TEST)
    assert code == 1, out + err[-3000:]
    assert 'shared_library = \\"lib/libxdemo.so.11\\"' in out

"""The diagnosis models the environment the test had: the options of the command that ran
it, rc files included, as its build events carry them (a real Bazel 4.2.3).

The workspace's .bazelrc gives the test ``--test_env=LD_LIBRARY_PATH=<toolchain>/lib``,
which holds ``libtc.so.5``; ``libnvx.so.11`` exists nowhere, so the test fails in the
loader whatever the repair does, and the loader says only that one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bazelws import BAZEL, Workspace
from newcomer_ws import toolchain_workspace

pytestmark = [pytest.mark.newcomer, pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TEST = "//app:sdk_test"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = toolchain_workspace(tmp_path_factory.mktemp("toolchain"))
    # Each run's records of its own, in this test's per-user directory.
    workspace.env["XDG_CACHE_HOME"] = str(workspace.root.parent / "cache")
    yield workspace
    workspace.shutdown()


def sonames(doc: dict[str, Any]) -> list[str]:
    return [f["soname"] for f in doc["failures"]]


def test_the_loader_says_only_the_library_the_rc_file_does_not_provide(ws: Workspace) -> None:
    # The ground truth: the real loader, in the test's real environment, found libtc.so.5
    # (it stops at the first library it cannot load, and libnvx.so.11 is the one named).
    plain = ws.bazel("test", TEST)
    assert plain.returncode == 3
    log = ws.test_log("app", "sdk_test")
    assert "libnvx.so.11: cannot open shared object file" in log
    assert "libtc.so.5" not in log


def test_after_bazel_ldfix_test_no_failure_is_predicted_that_the_rc_file_prevents(
        ws: Workspace) -> None:
    result = ws.ldfix("test", "--github", TEST)
    assert result.returncode == 3
    # On a CI page: one error for the test nothing could repair, saying what it misses.
    [error] = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert error.startswith("::error title=//app%3Asdk_test%3A cannot load,file=app/BUILD,"
                            "line=1:://app:sdk_test was stopped by the dynamic loader: "
                            "libnvx.so.11 (no usable copy anywhere searched)"), error
    ours = [line for line in result.stderr.splitlines() if line.startswith("bazel-ldfix")]
    assert any("libnvx.so.11" in line for line in ours), ours
    assert not any("libtc.so.5" in line for line in ours), ours
    # A later `diagnose` of that run knows what the test was given, from that run.
    later = ws.ldfix("diagnose", "--json")
    assert later.returncode == 1, later.stderr
    doc = json.loads(later.stdout)
    assert sonames(doc) == ["libnvx.so.11"]
    assert doc["environment"].startswith("the options of that `bazel-ldfix test`")


def test_with_the_runs_build_events_no_failure_is_predicted_that_the_rc_file_prevents(
        ws: Workspace, tmp_path: Path) -> None:
    events = tmp_path / "events.json"
    assert ws.bazel("test", f"--build_event_json_file={events}", TEST).returncode == 3
    result = ws.ldfix("diagnose", "--json", "--bep", str(events))
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert sonames(doc) == ["libnvx.so.11"]
    assert doc["environment"] == f"the options in {events} (rc files included)"


def test_after_a_plain_bazel_test_the_environment_is_said_to_be_unknown(ws: Workspace) -> None:
    # A plain `bazel test` records its options nowhere (command.log has none): the record
    # of the earlier `bazel-ldfix test` is not taken for this run.
    assert ws.bazel("test", TEST).returncode == 3
    doc = json.loads(ws.ldfix("diagnose", "--json").stdout)
    assert doc["environment"] is None
    predicted = [f for f in doc["failures"] if not f["seen_in_log"]]
    assert [f["soname"] for f in predicted] == ["libtc.so.5"]


def test_the_repair_keeps_the_rc_files_value_and_the_test_then_loads(
        ws: Workspace) -> None:
    # Give the SDK the versioned file: the repair adds its directory after the rc file's,
    # and the test passes, libtc.so.5 loaded from the toolchain the rc file names. (A file
    # added by hand inside a repository is not seen by the cached index of external/,
    # which only sees repositories come and go: --no-cache walks.)
    lib = Path(os.path.realpath(ws.output_base / "external" / "nvx" / "lib"))
    (lib / "libnvx.so.11").symlink_to("libnvx.so")
    result = ws.ldfix("env", "--no-cache", "--format", "json", TEST)
    assert result.returncode == 0, result.stderr
    [test] = json.loads(result.stdout)["tests"]
    toolchain = ws.root.parent / "toolchain" / "lib"
    assert test["library_path"].split(":")[0] == str(toolchain)
    repaired = ws.ldfix("test", "--no-cache", TEST, env={"GITHUB_ACTIONS": "true"})
    assert repaired.returncode == 0
    [notice] = [line for line in repaired.stdout.splitlines() if line.startswith("::")]
    assert notice.startswith("::notice title=//app%3Asdk_test%3A repaired,")

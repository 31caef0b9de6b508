"""A per-user directory that cannot be made: the tests that need a links directory are
named with the cause and the way out, and nothing suggests a command that cannot help
(real Bazel 4.2.3, real directories)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, needs_foo_by_link

pytestmark = [pytest.mark.bazel, pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TEST = "//t:foo_test"


@pytest.fixture(scope="module")
def top(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("unlinked")


@pytest.fixture(scope="module")
def ws(top: Path) -> Iterator[Workspace]:
    # libfoo.so.3's directory also holds a libz.so.1 the system has: a link is needed.
    workspace = make_workspace(top / "ws", needs_foo_by_link(top), env=clean_env())
    try:
        yield workspace
    finally:
        workspace.shutdown()


def under_a_file(top: Path) -> Path:
    """XDG_CACHE_HOME under a regular file: no user, root included, can make it."""
    (top / "a-file").write_text("")
    return top / "a-file" / "cache"


def read_only(top: Path) -> Path:
    """XDG_CACHE_HOME a directory of mode 0555 (root writes there all the same)."""
    cache = top / "read-only"
    cache.mkdir(exist_ok=True)
    cache.chmod(0o555)
    return cache


@pytest.mark.parametrize(("make", "reason"), [
    (under_a_file, "Not a directory"),
    pytest.param(read_only, "Permission denied", marks=pytest.mark.skipif(
        os.geteuid() == 0, reason="root is not denied by a mode")),
])
def test_an_unmakeable_store_names_the_cause_and_the_fix_and_no_rerun(
        ws: Workspace, top: Path, make: object, reason: str) -> None:
    assert callable(make)
    cache = make(top)
    env = {"XDG_CACHE_HOME": str(cache)}
    store = cache / "bazel-ldfix"
    cause = f"cannot make the per-user directory {store} ({reason})"
    result = ws.ldfix("test", TEST, env=env)
    assert result.returncode == 3, result.stderr[-3000:]     # it still fails in the loader
    ours = " ".join(line.removeprefix("bazel-ldfix:").strip()
                    for line in result.stderr.splitlines() if line.startswith("bazel-ldfix:"))
    assert (f"{cause}: the 1 test that needs a links directory is not repaired; set "
            "XDG_CACHE_HOME to a writable directory") in ours
    # No command that cannot help: neither a rerun nor the repair again.
    assert "--rerun-loader-failures" not in ours
    assert "run first" not in ours and " test //t:foo_test" not in ours
    assert "no LD_LIBRARY_PATH gives it exactly its own" not in ours
    # For scripts: the same, and `env` says no.
    listed = ws.ldfix("env", "--format", "json", TEST, env=env)
    assert listed.returncode == 1, listed.stderr[-3000:]
    assert json.loads(listed.stdout)["unlinked"] == {
        "cause": cause, "sonames": ["libfoo.so.3"], "tests": [TEST],
        "fix": "set XDG_CACHE_HOME to a writable directory"}
    # `diagnose` of that run says the cause too, and offers no `test` to run first.
    diagnosed = ws.ldfix("diagnose", env=env)
    assert diagnosed.returncode == 1
    assert "run first" not in diagnosed.stdout
    assert f"note: {cause}: " in diagnosed.stdout
    assert not store.exists()


def test_the_way_out_it_names_repairs_the_test(ws: Workspace, top: Path) -> None:
    result = ws.ldfix("test", TEST, env={"XDG_CACHE_HOME": str(top / "writable")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cannot make the per-user directory" not in result.stderr
    listed = ws.ldfix("env", "--format", "json", TEST,
                      env={"XDG_CACHE_HOME": str(top / "writable")})
    assert json.loads(listed.stdout)["unlinked"] is None

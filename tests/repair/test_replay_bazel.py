"""On a real Bazel: the same command again, with nothing changed, gives the repair kept from
the last run; a change Bazel does not see (a library file removed under external/) is seen,
and the repair is made anew."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, needs_x

from bazel_ldfix.repair import replay

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("replay")
    files = needs_x(top)
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    workspace.sdk = top / "sdks" / "xsdk"  # type: ignore[attr-defined]
    workspace.cache = top / "cache" / "bazel-ldfix" / "repair"  # type: ignore[attr-defined]
    yield workspace
    workspace.shutdown()


def _kept(ws: Workspace) -> list[tuple[int, int]]:
    """(inode, mtime) of each kept repair: a repair given again leaves its file as it was."""
    directory: Path = ws.cache  # type: ignore[attr-defined]
    if not directory.is_dir():
        return []
    return sorted((st.st_ino, st.st_mtime_ns)
                  for st in (os.stat(p) for p in directory.iterdir()))


def test_the_same_command_again_is_given_the_kept_repair_until_a_file_it_read_changes(
        ws: Workspace) -> None:
    first = ws.ldfix("env", "//t:needs_x")
    assert first.returncode == 0, first.stderr
    assert "xsdk/lib" in first.stdout
    # Kept only once every file it read is older than a clock tick can hide.
    time.sleep(replay.SETTLE_NS / 1e9 + 0.1)
    second = ws.ldfix("env", "//t:needs_x")
    assert (second.returncode, second.stdout) == (0, first.stdout)
    kept = _kept(ws)
    assert len(kept) == 1
    third = ws.ldfix("env", "//t:needs_x")
    assert (third.returncode, third.stdout) == (0, first.stdout)
    assert _kept(ws) == kept        # given again, not made and kept anew
    assert "its repair is given again" in third.stderr
    assert "given again" not in second.stderr
    # Bazel does not track the versioned file (the cc_import names the unversioned one).
    versioned = ws.sdk / "lib" / "libxdemo.so.11"  # type: ignore[attr-defined]
    data = versioned.read_bytes()
    versioned.unlink()
    try:
        gone = ws.ldfix("env", "//t:needs_x")
        fresh = ws.ldfix("env", "--no-cache", "//t:needs_x")
        assert (gone.returncode, gone.stdout) == (fresh.returncode, fresh.stdout)
        assert gone.stdout != first.stdout
        assert "given again" not in gone.stderr
    finally:
        versioned.write_bytes(data)

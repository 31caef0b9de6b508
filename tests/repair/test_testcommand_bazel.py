"""With a real Bazel: what the repair says a test will get is what the test gets.

The test prints every object it has loaded (``dl_iterate_phdr``), so what is asserted is
what it really loaded under Bazel, not only what the repair says.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, loaded, make_workspace, needs_foo_by_link

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


@dataclass
class Setup:
    ws: Workspace
    vsdk: Path        # the vendor SDK's lib/
    userdir: Path     # bazel-ldfix's per-user directory


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    top = tmp_path_factory.mktemp("flowrepair")
    files = needs_foo_by_link(top)
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    try:
        yield Setup(workspace, top / "sdks" / "vsdk" / "lib", top / "cache" / "bazel-ldfix")
    finally:
        workspace.shutdown()


def test_a_links_directory_removed_since_the_last_run_is_made_again_and_gives_the_library(
        setup: Setup) -> None:
    ws = setup.ws
    first = ws.ldfix("test", "//t:foo_test")
    assert first.returncode == 0, first.stderr[-3000:]
    links = setup.userdir / "links"
    assert links.is_dir()
    # Removed since: the links directories, and the kept repair (the prune keeps the 32
    # most recent; one not settled is not kept). The flag of the last run is still known.
    shutil.rmtree(links)
    shutil.rmtree(setup.userdir / "repair", ignore_errors=True)
    doc = json.loads(ws.ldfix("env", "--format", "json", "//t:foo_test").stdout)
    assert [(t["missing_before"], t["missing_after"]) for t in doc["tests"]] == \
        [(["libfoo.so.3"], [])]
    shutil.rmtree(links)
    shutil.rmtree(setup.userdir / "repair", ignore_errors=True)
    again = ws.ldfix("test", "//t:foo_test", "--nocache_test_results")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "will still miss" not in again.stderr
    assert "1 test repaired" in again.stderr
    got = loaded(ws, "t", "foo_test")
    assert os.path.dirname(got["libfoo.so.3"]).startswith(str(links) + "/")
    assert os.path.realpath(got["libfoo.so.3"]) == str(setup.vsdk / "libfoo.so.3")

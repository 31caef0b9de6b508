"""With a real Bazel: a GitHub ``::notice`` names what the test was really given.

The test prints every object it has loaded (``dl_iterate_phdr``), so the directory the
notice names is checked against the one the test loaded its library from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from bazelws import BAZEL, Workspace, clean_env, loaded, make_workspace, needs_foo_by_link

from tests.render.test_github import runner_parse

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("githubnotice")
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", needs_foo_by_link(top), env=env)
    try:
        yield workspace
    finally:
        workspace.shutdown()


def test_the_notice_of_a_library_given_by_a_link_names_the_links_directory(
        ws: Workspace) -> None:
    result = ws.ldfix("test", "--github", "//t:foo_test")
    assert result.returncode == 0, result.stderr[-3000:]
    given = os.path.dirname(loaded(ws, "t", "foo_test")["libfoo.so.3"])
    notices = [parsed for line in result.stdout.splitlines()
               if (parsed := runner_parse(line)) and parsed[0] == "notice"]
    assert len(notices) == 1
    message = notices[0][2]
    assert f"added {given} to its LD_LIBRARY_PATH" in message
    assert "external/vsdk" not in message

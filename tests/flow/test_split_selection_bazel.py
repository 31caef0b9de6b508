"""A split run runs what the user's command selects, on a real Bazel 4.2.3.

``//t:t1`` links ``@sdk_v1//:foo``; ``//t:t3`` and ``//t:t4`` link ``@sdk_v2//:foo``, a
file with the same SONAME, so the run is split; ``//t:t2`` needs nothing. ``//t:suite``
holds ``//t:t3``, and ``//t:t4`` is tagged ``slow``. With ``//t:all -//t:t3``, Bazel builds
t3 (the suite brings it back) and does not run it: the tests the tool counts are the ones
Bazel runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, import_repository, make_workspace
from elfbuild import cc

from tests.flow.test_split_bazel import MAPS

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("splitselection")
    for version, full in ((1, "3.1.0"), (2, "3.2.0")):
        lib = top / f"v{version}" / "lib"
        cc(lib / f"libfoo.so.{full}", "-shared", "-Wl,-soname,libfoo.so.3",
           src=f"int foo_version(void){{return {version};}}")
        (lib / "libfoo.so.3").symlink_to(f"libfoo.so.{full}")
        (lib / "libfoo.so").symlink_to("libfoo.so.3")
    files = {
        "WORKSPACE": (import_repository("sdk_v1", top / "v1", "foo")
                      + import_repository("sdk_v2", top / "v2", "foo")),
        "t/BUILD": ('cc_test(name = "t1", srcs = ["t1.c"], deps = ["@sdk_v1//:foo"])\n'
                    'cc_test(name = "t2", srcs = ["t2.c"])\n'
                    'cc_test(name = "t3", srcs = ["t3.c"], deps = ["@sdk_v2//:foo"])\n'
                    'cc_test(name = "t4", srcs = ["t3.c"], deps = ["@sdk_v2//:foo"], '
                    'tags = ["slow"])\n'
                    'test_suite(name = "suite", tests = [":t3"])\n'),
        "t/t1.c": MAPS % 1, "t/t2.c": "int main(void) { return 0; }\n", "t/t3.c": MAPS % 2,
        "patterns.txt": "//t:all\n-//t:t3\n",
    }
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    try:
        yield workspace
    finally:
        workspace.shutdown()


def bazel_runs(ws: Workspace, top: Path, patterns: list[str]) -> set[str]:
    """The tests plain `bazel test -- PATTERNS` runs, as its events say."""
    events = top / "events.json"
    ws.bazel("test", f"--build_event_json_file={events}", "--", *patterns)
    summaries = [json.loads(line)["id"].get("testSummary")
                 for line in events.read_text().splitlines()]
    return {s["label"] for s in summaries if s}


@pytest.mark.parametrize("patterns", [
    ["//t:all", "-//t:t3"],                 # t3 built through the suite, not run
    ["//t:all", "-//t:suite"],              # the suite's tests taken out
    ["//t:all", "-//t:t3", "//t:suite"],    # and brought back by a later pattern
    ["//t:suite", "-//t:all", "//t:t1"],
])
def test_the_tests_counted_are_the_tests_bazel_test_runs(
        ws: Workspace, tmp_path: Path, patterns: list[str]) -> None:
    expected = bazel_runs(ws, tmp_path, patterns)
    result = ws.ldfix("env", "--format", "json", "--", *patterns)
    assert result.returncode == 0, result.stderr[-3000:]
    assert {t["label"] for t in json.loads(result.stdout)["tests"]} == expected

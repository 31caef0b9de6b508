"""How often `bazel-ldfix test` asks Bazel, with a real Bazel: every command is logged.

Tags come from the build step's events, so a tag filter costs no query; the rules' `env` is
queried only when something is missing, only for the selected tests, and (once the last
run of the same command needed a repair) while the tests are being resolved; a rule's own
LD_LIBRARY_PATH is kept either way, and given to no other test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    LOADS_X,
    Workspace,
    clean_env,
    import_repository,
    logged_commands,
    logging_bazel,
    make_workspace,
    outside_library,
    sdk,
)

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

LOADS_XZ = ("int xdemo_value(void); int zdemo_value(void);\n"
            "int main(void) { return xdemo_value() + zdemo_value() == 14 ? 0 : 1; }\n")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("trips")
    sdk(top / "sdks" / "xsdk", "xdemo", "11")
    zlib, z_link = outside_library(top)
    files = {
        "WORKSPACE": import_repository("xsdk", top / "sdks" / "xsdk", "xdemo"),
        "t/BUILD": f"""
cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])
cc_test(name = "gpu_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"], tags = ["gpu"])
cc_test(name = "with_env", srcs = ["xz.c"], deps = ["@xsdk//:xdemo"], {z_link},
        env = {{"LD_LIBRARY_PATH": "{zlib.parent}"}}, tags = ["gpu"])
cc_test(name = "plain", srcs = ["plain.c"])
""",
        "t/x.c": LOADS_X, "t/xz.c": LOADS_XZ, "t/plain.c": "int main(void) { return 0; }\n",
    }
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    wrapper, log = logging_bazel(top)
    workspace.calls = log  # type: ignore[attr-defined]
    workspace.wrapper = wrapper  # type: ignore[attr-defined]
    workspace.zdir = zlib.parent  # type: ignore[attr-defined]
    yield workspace
    workspace.shutdown()


def _commands(ws: Workspace, *args: str) -> tuple[int, str, list[str]]:
    log: Path = ws.calls  # type: ignore[attr-defined]
    if log.exists():
        log.unlink()
    result = ws.ldfix("test", "--bazel", str(ws.wrapper), *args)  # type: ignore[attr-defined]
    return result.returncode, result.stdout + result.stderr, logged_commands(log)


def test_nothing_missing_asks_no_query(ws: Workspace) -> None:
    code, out, commands = _commands(ws, "//t:plain")
    assert code == 0, out
    assert commands == ["test", "test"]


def test_a_tag_filter_asks_no_query_for_tags(ws: Workspace) -> None:
    log: Path = ws.calls  # type: ignore[attr-defined]
    code, out, commands = _commands(ws, "--test_tag_filters=-gpu", "//t:all")
    assert code == 0, out
    assert commands == ["test", "query", "test"]
    query = next(c for c in log.read_text().splitlines() if c.startswith("query"))
    # Only the selected tests, only for the rules whose env names the variable.
    assert "//t:needs_x" in query and "//t:plain" in query
    assert "//t:gpu_x" not in query and "//t:with_env" not in query
    assert 'attr(env, "LD_LIBRARY_PATH"' in query


def test_a_rules_own_value_is_kept_on_the_first_run_and_the_next(ws: Workspace) -> None:
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    for _ in range(2):  # the second run starts the query while the tests are resolved
        # (with no remembered answer of the rules: tests/bazel/test_rulecache_bazel.py has those)
        shutil.rmtree(Path(ws.env["XDG_CACHE_HOME"]) / "bazel-ldfix" / "rules",
                      ignore_errors=True)
        code, out, commands = _commands(ws, "//t:with_env", "//t:needs_x")
        assert code == 0, out
        # The flag replaces a rule's env on Bazel 4.2.3: //t:with_env keeps its own value
        # in a run of its own, and //t:needs_x is never given it.
        assert commands == ["test", "query", "test", "test"]
        runs = [line for line in ws.calls.read_text().splitlines()  # type: ignore[attr-defined]
                if line.startswith("test ") and "--test_env=" in line
                and "--build_event_json_file=" not in line]     # not the build step
        assert len(runs) == 2
        assert sum(f"--test_env=LD_LIBRARY_PATH={zdir}:" in run for run in runs) == 1
        assert all(zdir not in run for run in runs if "-//t:with_env" in run.split())
        assert "//t:with_env" in out and "PASSED" in out
    assert os.listdir(Path(ws.env["XDG_CACHE_HOME"]) / "bazel-ldfix" / "flags")


def test_the_build_step_tells_each_test_once_as_bazel_builds_it(ws: Workspace) -> None:
    # The events are read while Bazel writes them: each test is told once, as the whole
    # file's reading at the end has it (so that it can be read while Bazel goes on).
    from bazel_ldfix.bazel.buildstep import BuildStep
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.bazel.exitcodes import NO_TESTS_FOUND
    from bazel_ldfix.bazel.targets import TestTarget

    assert BAZEL
    told: list[TestTarget] = []
    step = BuildStep(Bazel(BAZEL, str(ws.root), ws.env), ["//t:all"])
    events, code = step.result(lambda test, _head: told.append(test))
    assert code in (0, NO_TESTS_FOUND) and events.complete
    assert len(events.tests) == 4
    assert sorted(told, key=lambda t: t.label) == list(events.tests)

"""The test environment on a real Bazel 4.2.3: --action_env, and the older rule-env order.

Debian's build reports its version as ``no_version``, so the repair treats the order as
unknown: computed as before 7.2 (which is what 4.2.3 does, and the flag works), with a test
whose rule sets LD_LIBRARY_PATH not counted as fixed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    Workspace,
    clean_env,
    import_repository,
    make_workspace,
    outside_library,
    sdk,
)

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

LOADS_XZ = """
int xdemo_value(void); int zdemo_value(void);
int main(void) { return xdemo_value() + zdemo_value() == 14 ? 0 : 1; }
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("testenv")
    sdk(top / "sdks" / "xsdk", "xdemo", "11")
    # Reachable only through a value the user passes: --action_env here.
    zlib, z_link = outside_library(top)
    files = {
        "WORKSPACE": import_repository("xsdk", top / "sdks" / "xsdk", "xdemo"),
        "t/BUILD": f"""
cc_test(name = "needs_xz", srcs = ["xz.c"], deps = ["@xsdk//:xdemo"], {z_link})
cc_test(name = "with_env", srcs = ["xz.c"], deps = ["@xsdk//:xdemo"], {z_link},
        env = {{"LD_LIBRARY_PATH": "{zlib.parent}"}})
""",
        "t/xz.c": LOADS_XZ,
    }
    workspace = make_workspace(top / "ws", files, env=clean_env())
    workspace.zdir = zlib.parent  # type: ignore[attr-defined]
    yield workspace
    workspace.shutdown()


def test_action_env_reaches_tests_and_its_value_is_kept(ws: Workspace) -> None:
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    flag = f"--action_env=LD_LIBRARY_PATH={zdir}"
    # Measured: with --action_env the test finds libzdemo and stops at libxdemo.so.11.
    plain = ws.bazel("test", flag, "//t:needs_xz")
    assert plain.returncode == 3
    log = ws.test_log("t", "needs_xz")
    assert "libxdemo.so.11: cannot open shared object file" in log
    assert "libzdemo" not in log
    shown = ws.ldfix("env", "--format", "json", flag, "//t:needs_xz")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["base"] == [zdir]
    assert doc["base_source"] == flag
    assert doc["ld_library_path"].split(":")[0] == zdir
    fixed = ws.ldfix("test", flag, "//t:needs_xz")
    assert fixed.returncode == 0, fixed.stderr


def test_on_4_2_3_the_flag_replaces_a_rules_env_and_the_report_stays_honest(
        ws: Workspace) -> None:
    shown = ws.ldfix("env", "--format", "json", "//t:with_env")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    (test,) = doc["tests"]
    # Bazel says "no_version": the order is not known, so the rule's test is not counted
    # as fixed, and the change to its rule is given.
    assert test["reach"] == "unknown"
    assert "libxdemo.so.11" in test["missing_after"]
    assert test["rule_fix"].startswith('env = {"LD_LIBRARY_PATH": "')
    # The flag keeps the rule's entries, so on 4.2.3 (the older order) the test passes.
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    assert doc["ld_library_path"].split(":")[0] == zdir
    result = ws.ldfix("test", "//t:with_env")
    assert result.returncode == 0, result.stderr
    assert "may not reach //t:with_env" in result.stderr


def test_the_rule_fix_works_without_any_flag(ws: Workspace, tmp_path: Path) -> None:
    # The printed env = {...} pasted into the rule makes plain `bazel test` pass.
    doc = json.loads(ws.ldfix("env", "--format", "json", "//t:with_env").stdout)
    rule_fix = doc["tests"][0]["rule_fix"]
    build = ws.root / "t" / "BUILD"
    original = build.read_text()
    try:
        zdir = str(ws.zdir)  # type: ignore[attr-defined]
        build.write_text(original.replace(f'env = {{"LD_LIBRARY_PATH": "{zdir}"}}', rule_fix))
        assert build.read_text() != original
        plain = ws.bazel("test", "//t:with_env")
        assert plain.returncode == 0, plain.stderr
    finally:
        build.write_text(original)

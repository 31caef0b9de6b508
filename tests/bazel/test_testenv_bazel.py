"""The test environment on a real Bazel 4.2.3: --action_env, and the older rule-env order.

Debian's build reports its version as ``no_version``; its build events still show it is
older than 7.2 (a start time in milliseconds alone, :mod:`bazel_ldfix.bazel.version`). So
the order is known: the flag replaces a rule's env, and reaches every test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    LOADS_X,
    Workspace,
    clean_env,
    import_repository,
    make_workspace,
    outside_library,
    sdk,
)

from bazel_ldfix.bazel import buildtext, testenv
from bazel_ldfix.bazel.targets import parse_bep
from bazel_ldfix.bazel.testenv import Order

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

LOADS_XZ = """
int xdemo_value(void); int zdemo_value(void);
int main(void) { return xdemo_value() + zdemo_value() == 14 ? 0 : 1; }
"""
LOADS_Z = "int zdemo_value(void);\nint main(void) { return zdemo_value() == 3 ? 0 : 1; }\n"


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
        # //s:all: a test that needs the repair, one whose env alone makes it load, and one
        # that needs both.
        "s/BUILD": f"""
cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])
cc_test(name = "loads_by_env", srcs = ["z.c"], {z_link},
        env = {{"LD_LIBRARY_PATH": "{zlib.parent}"}})
cc_test(name = "env_and_repair", srcs = ["xz.c"], deps = ["@xsdk//:xdemo"], {z_link},
        env = {{"LD_LIBRARY_PATH": "{zlib.parent}"}})
""",
        "s/x.c": LOADS_X,
        "s/z.c": LOADS_Z,
        "s/xz.c": LOADS_XZ,
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


def test_the_build_events_of_4_2_3_tell_it_is_older_than_7_2(ws: Workspace,
                                                              tmp_path: Path) -> None:
    events_file = tmp_path / "events.json"
    ws.bazel("build", f"--build_event_json_file={events_file}", "//s:loads_by_env",
             check=True)
    events = parse_bep(events_file.read_text().splitlines())
    # No label (Debian's build), but the start time in milliseconds alone.
    assert events.version.label is None and events.version.older_than is not None
    assert testenv.order_of(events.version) is Order.FLAGS_WIN


def test_a_test_that_loads_is_not_said_to_still_miss(ws: Workspace) -> None:
    # Without the tool: the test whose env gives it its library passes, the others miss
    # libxdemo.so.11.
    plain = ws.bazel("test", "//s:all")
    assert plain.returncode == 3
    assert passed(plain.stdout) == {"//s:loads_by_env"}
    assert "libxdemo.so.11" in ws.test_log("s", "env_and_repair")
    result = ws.ldfix("test", "//s:all")
    assert result.returncode == 0, result.stderr
    # On 4.2.3 the flag replaces a rule's env: a test with one keeps its entries in a run
    # of its own. Every test loads, and the report says so.
    assert passed(result.stdout) == {"//s:needs_x", "//s:loads_by_env", "//s:env_and_repair"}
    assert "will still miss" not in result.stderr
    assert "may not reach" not in result.stderr
    assert "2 tests repaired (libxdemo.so.11)" in result.stderr


def passed(summary: str) -> set[str]:
    """The labels `bazel test`'s summary says passed."""
    return {line.split()[0] for line in summary.splitlines()
            if line.startswith("//") and line.split()[1:2] in (["PASSED"], ["(cached)"])
            and "PASSED" in line.split()}


def test_on_4_2_3_the_flag_replaces_a_rules_env_and_reaches_the_test(ws: Workspace) -> None:
    shown = ws.ldfix("env", "--format", "json", "//t:with_env")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    (test,) = doc["tests"]
    # Bazel says "no_version", and its events say it is older than 7.2: the flag reaches
    # the test, which is fixed, and no change to its rule is needed.
    assert test["reach"] == "yes"
    assert test["missing_before"] == ["libxdemo.so.11"] and test["missing_after"] == []
    assert test["rule_fix"] is None
    # The flag keeps the rule's entries.
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    assert doc["ld_library_path"].split(":")[0] == zdir
    result = ws.ldfix("test", "//t:with_env")
    assert result.returncode == 0, result.stderr
    assert "may not reach" not in result.stderr and "will still miss" not in result.stderr


def test_the_flags_value_works_as_the_rules_env_without_any_flag(ws: Workspace) -> None:
    # The value the flag gives, written into the rule as a Starlark string, makes plain
    # `bazel test` pass: what a rule fix on Bazel 7.2+ would write.
    doc = json.loads(ws.ldfix("env", "--format", "json", "//t:with_env").stdout)
    rule_fix = (f"env = {{{buildtext.string('LD_LIBRARY_PATH')}: "
                f"{buildtext.string(doc['ld_library_path'])}}}")
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

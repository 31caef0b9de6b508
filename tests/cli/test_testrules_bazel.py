"""From Bazel: a consumer workspace that depends on this repository (Bazel 4.2.3, offline).

The consumer's WORKSPACE has `local_repository(name = "bazel_ldfix", path = <this tree>)` and
calls `bazel_ldfix_dependencies()`, as docs/use-from-bazel.md says. Everything then runs through
Bazel: `bazel run @bazel_ldfix//:bazel-ldfix -- ...` and the rules of `@bazel_ldfix//:defs.bzl`.

The tool's Python dependencies must come from the `@bazel_ldfix_pip` repository: the Python
that runs the targets is the system's, without PYTHONPATH, and that Python is not the one
the packages were found in.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, REPO, Workspace, make_workspace, runtime_env, sdk
from elfbuild import cc

from bazel_ldfix import __version__

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

RUN = ("run", "--ui_event_filters=-info", "--noshow_progress", "@bazel_ldfix//:bazel-ldfix",
       "--")

USES_DEMO = """
int demo_value(void);
int main(void) { return demo_value() == 11 ? 0 : 1; }
"""
DEMO_SRC = "int demo_value(void){return 11;}"
USES_GOOD = """
int good_value(void);
int main(void) { return good_value() == 2 ? 0 : 1; }
"""
GOOD_SRC = "int good_value(void){return 2;}"


def demo_repository(path: Path, shared_library: str) -> str:
    """@demo_sdk, importing `shared_library` the way SDK BUILD files do."""
    build = ('package(default_visibility = ["//visibility:public"])\n'
             f'cc_import(name = "demo", shared_library = "{shared_library}")\n')
    return (f'new_local_repository(name = "demo_sdk", path = "{path}", '
            f"build_file_content = {json.dumps(build)})\n")


def consumer_workspace(top: Path, sdk_dir: Path, good_dir: Path) -> str:
    # @good_sdk imports its versioned file: what the linkage tests check loads as linked.
    good_build = ('package(default_visibility = ["//visibility:public"])\n'
                  'cc_import(name = "good", shared_library = "lib/libgood.so.2")\n'
                  'exports_files(["lib/libgood.so.2"])\n')
    return (f'local_repository(name = "bazel_ldfix", path = "{REPO}")\n'
            'load("@bazel_ldfix//:repositories.bzl", "bazel_ldfix_dependencies")\n'
            "bazel_ldfix_dependencies()\n"
            + demo_repository(sdk_dir, "lib/libdemo.so")
            + f'new_local_repository(name = "good_sdk", path = "{good_dir}", '
              f"build_file_content = {json.dumps(good_build)})\n")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("rules")
    sdk_dir = top / "sdks" / "demo"
    sdk(sdk_dir, "demo", "11", src=DEMO_SRC)
    good_dir = top / "sdks" / "good"
    sdk(good_dir, "good", "2", src=GOOD_SRC)
    files = {
        "WORKSPACE": consumer_workspace(top, sdk_dir, good_dir),
        "linkage/BUILD": """
load("@bazel_ldfix//:defs.bzl", "ldfix_linkage_test")

cc_binary(name = "shared", srcs = ["main.c"], deps = ["@good_sdk//:good"])

cc_library(name = "good_static", srcs = ["good.c"])

cc_binary(name = "private_copy", srcs = ["main.c"], deps = [":good_static"])

[ldfix_linkage_test(
    name = binary + "_linkage_test",
    binary = binary,
    needs = ["libgood.so.2"],
    imports = ["good_value"],
    no_defines = ["good_value"],
    binds = {"good_value": "libgood.so.2"},
    tags = tags,
) for binary, tags in [("shared", []), ("private_copy", ["manual"])]]
""",
        "linkage/main.c": USES_GOOD,
        "linkage/good.c": GOOD_SRC + "\n",
        "app/BUILD": """
load("@bazel_ldfix//:defs.bzl", "ldfix_load_test")

cc_test(name = "app_test", srcs = ["app_test.c"], deps = ["@demo_sdk//:demo"])

ldfix_load_test(name = "app_load_test", binary = ":app_test")

# A plugin the test would dlopen: in its runfiles, not in its own load.
cc_binary(name = "libplugin.so", srcs = ["plugin.c"], deps = ["@demo_sdk//:demo"],
          linkshared = True)

cc_test(name = "host_test", srcs = ["host.c"], data = [":libplugin.so"])

ldfix_load_test(name = "host_load_test", binary = ":host_test")
""",
        "app/app_test.c": USES_DEMO,
        "app/plugin.c": "int demo_value(void);\nint plugin_value(void){return demo_value();}\n",
        "app/host.c": "int main(void) { return 0; }\n",
        "inspect/BUILD": """
load("@bazel_ldfix//:defs.bzl", "ldfix_inspect_test")

ldfix_inspect_test(name = "real_so_test", file = "libreal.so")

# A file of another repository: its $(rootpath) is external/good_sdk/... or ../good_sdk/...
ldfix_inspect_test(name = "sdk_so_test", file = "@good_sdk//:lib/libgood.so.2")

# A static archive renamed libfake.so: what a careless prebuilt drop delivers.
ldfix_inspect_test(name = "fake_so_test", file = "libfake.so", tags = ["manual"])
""",
    }
    workspace = make_workspace(top / "ws", files, env=runtime_env(top))
    inspect = workspace.root / "inspect"
    cc(inspect / "libreal.so", "-shared", "-Wl,-soname,libreal.so", src=DEMO_SRC)
    obj = cc(top / "fake.o", "-c", src=DEMO_SRC)
    subprocess.run(["ar", "rcs", str(inspect / "libfake.so"), str(obj)], check=True)
    workspace.sdk_dir = sdk_dir  # type: ignore[attr-defined]
    try:
        yield workspace
    finally:
        workspace.shutdown()


def test_bazel_run_test_turns_the_red_test_green(ws: Workspace) -> None:
    plain = ws.bazel("test", "//...")
    assert plain.returncode == 3, plain.stderr[-3000:]
    assert "libdemo.so.11: cannot open shared object file" in ws.test_log("app", "app_test")

    result = ws.bazel(*RUN, "test", "//...")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "cannot load libdemo.so.11" in result.stderr
    assert "--test_env=LD_LIBRARY_PATH=" in result.stderr
    # The load test too, in the environment the repair gave it.
    assert "loads in this test's environment" in ws.test_log("app", "app_load_test")


def test_bazel_run_version_comes_from_the_source_tree(ws: Workspace) -> None:
    """The py_binary runs the package from its runfiles: no installed metadata there."""
    result = ws.bazel(*RUN, "--version")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f"bazel-ldfix, version {__version__}\n"


def test_bazel_run_reads_relative_paths_where_the_user_is(ws: Workspace) -> None:
    ws.bazel("build", "//app:app_test", check=True)
    result = ws.bazel(*RUN, "resolve", "bazel-bin/app/app_test")
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stdout.splitlines()[0] == "bazel-bin/app/app_test"
    # Run from app/: the same answer as the installed command gives in app/.
    sub = subprocess.run([BAZEL or "bazel", *RUN, "resolve", "../bazel-bin/app/app_test"],
                         cwd=ws.root / "app", env=ws.env, capture_output=True, text=True)
    assert sub.returncode == 1, sub.stderr[-3000:]
    assert sub.stdout.splitlines()[0] == "../bazel-bin/app/app_test"
    assert "libdemo.so.11 not found" in sub.stdout
    installed = ws.ldfix("resolve", "../bazel-bin/app/app_test", cwd=ws.root / "app",
                         env={"PYTHONPATH": str(REPO)})
    assert installed.returncode == 1
    assert installed.stdout == sub.stdout


def test_bazel_run_env_and_diagnose_work_in_the_users_workspace(ws: Workspace) -> None:
    env = ws.bazel(*RUN, "env", "--format", "json", "//app:app_test")
    assert env.returncode == 0, env.stderr[-3000:]
    doc = json.loads(env.stdout)
    assert [t["label"] for t in doc["tests"]] == ["//app:app_test"]
    assert doc["missing"][0]["soname"] == "libdemo.so.11"

    failed = ws.bazel("test", "//app:app_test")
    assert failed.returncode == 3
    diagnosis = ws.bazel(*RUN, "diagnose", "--json")
    assert diagnosis.returncode == 1, diagnosis.stderr[-3000:]
    failures = json.loads(diagnosis.stdout)["failures"]
    assert [(f["test"], f["soname"]) for f in failures] == [("//app:app_test", "libdemo.so.11")]


def test_linkage_test_passes_for_the_shared_library_and_fails_for_a_private_copy(
        ws: Workspace) -> None:
    good = ws.bazel("test", "//linkage:shared_linkage_test")
    assert good.returncode == 0, good.stderr[-3000:]
    # The same assertions on the program with good_value compiled in.
    bad = ws.bazel("test", "//linkage:private_copy_linkage_test")
    assert bad.returncode == 3, bad.stderr[-3000:]
    log = ws.test_log("linkage", "private_copy_linkage_test")
    assert "FAIL --no-defines good_value: defined in .symtab (a private copy)" in log
    assert "FAIL --needs libgood.so.2" in log


def test_inspect_test_rejects_a_static_archive_named_so(ws: Workspace) -> None:
    for links in ("--legacy_external_runfiles", "--nolegacy_external_runfiles"):
        good = ws.bazel("test", links, "//inspect:real_so_test", "//inspect:sdk_so_test")
        assert good.returncode == 0, good.stderr[-3000:]
        assert "libgood.so.2: a shared object" in ws.test_log("inspect", "sdk_so_test")
    bad = ws.bazel("test", "//inspect:fake_so_test")
    assert bad.returncode == 3, bad.stderr[-3000:]
    log = ws.test_log("inspect", "fake_so_test")
    assert "libfake.so is not a shared object" in log
    assert "static archive" in log


def test_load_test_explains_a_missing_versioned_library_and_passes_once_fixed(
        ws: Workspace) -> None:
    for links in ("--build_runfile_links", "--nobuild_runfile_links"):
        red = ws.bazel("test", links, "//app:app_load_test")
        assert red.returncode == 3, red.stderr[-3000:]
        log = ws.test_log("app", "app_load_test")
        assert "//app:app_test would not load: libdemo.so.11" in log
        assert "libdemo.so.11 not found" in log
        assert "searched, in this order:" in log
        assert 'shared_library = "lib/libdemo.so.11",  # was "lib/libdemo.so"' in log
        red = ws.bazel("test", links, "//app:host_load_test")
        assert red.returncode == 3, red.stderr[-3000:]
        log = ws.test_log("app", "host_load_test")
        assert "//app:host_test loads in this test's environment" in log
        assert ("ws/app/libplugin.so (in the runfiles, loaded with dlopen) would not load: "
                "libdemo.so.11") in log
        assert 'shared_library = "lib/libdemo.so.11",  # was "lib/libdemo.so"' in log

    # The fix the test names: import the versioned file.
    workspace_file = ws.root / "WORKSPACE"
    sdk_dir = ws.sdk_dir  # type: ignore[attr-defined]
    workspace_file.write_text(workspace_file.read_text().replace(
        demo_repository(sdk_dir, "lib/libdemo.so"),
        demo_repository(sdk_dir, "lib/libdemo.so.11")))
    for links in ("--build_runfile_links", "--nobuild_runfile_links"):
        green = ws.bazel("test", links, "//app:app_load_test", "//app:app_test",
                         "//app:host_load_test")
        assert green.returncode == 0, green.stderr[-3000:]
        assert "loads in this test's environment" in ws.test_log("app", "app_load_test")
        assert "would not load" not in ws.test_log("app", "host_load_test")

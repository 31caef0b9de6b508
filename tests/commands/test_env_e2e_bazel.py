"""End to end with a real Bazel: tests that die in the loader pass under bazel-ldfix.

One workspace serves the module (a Bazel server start and the C++ toolchain set-up cost
tens of seconds); each test runs its own Bazel commands against it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, import_repository, make_workspace, sdk
from elfbuild import cc, patch_machine

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

LOADS_XY = """
int xdemo_value(void); int ydemo_value(void);
int main(void) { return xdemo_value() == 11 && ydemo_value() == 13 ? 0 : 1; }
"""
LOADS_X = """
int xdemo_value(void);
int main(void) { return xdemo_value() == 11 ? 0 : 1; }
"""
LOADS_XYZ = """
int xdemo_value(void); int ydemo_value(void); int zdemo_value(void);
int main(void) { return xdemo_value() + ydemo_value() + zdemo_value() == 27 ? 0 : 1; }
"""
LOADS_BUT_FAILS = """
int xdemo_value(void);
int main(void) { return xdemo_value() == 11 ? 1 : 0; }
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("e2e")
    ylib = sdk(top / "sdks" / "ysdk", "ydemo", "13")
    sdk(top / "sdks" / "xsdk", "xdemo", "11", needs=[ylib])
    # An aarch64 copy that a careless glob would pick first (sorted before "lib").
    decoy = top / "sdks" / "ysdk" / "aarch64" / "libydemo.so.13"
    decoy.parent.mkdir()
    decoy.write_bytes(ylib.read_bytes())
    patch_machine(decoy, 183)
    # A library outside Bazel, reachable only through a value the user already has.
    zlib = cc(top / "zdir" / "libzdemo.so.3", "-shared", "-Wl,-soname,libzdemo.so.3",
              src="int zdemo_value(void){return 3;}")
    deps = '["@xsdk//:xdemo", "@ysdk//:ydemo"]'
    z_link = f'linkopts = ["-L{zlib.parent}", "-l:libzdemo.so.3"]'
    files = {
        "WORKSPACE": import_repository("xsdk", top / "sdks" / "xsdk", "xdemo")
        + import_repository("ysdk", top / "sdks" / "ysdk", "ydemo"),
        "t/BUILD": f"""
cc_test(name = "needs_xy", srcs = ["xy.c"], deps = {deps})
cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])
cc_test(name = "needs_xyz", srcs = ["xyz.c"], deps = {deps}, {z_link})
cc_test(name = "with_env", srcs = ["xyz.c"], deps = {deps}, {z_link},
        env = {{"LD_LIBRARY_PATH": "{zlib.parent}"}})
cc_test(name = "fails", srcs = ["fails.c"], deps = {deps})
cc_test(name = "plain", srcs = ["plain.c"])
cc_test(name = "gpu", srcs = ["xy.c"], deps = {deps}, tags = ["gpu"])
cc_test(name = "needs_local", srcs = ["local.c"], deps = ["//third_party/local:localdemo"])
cc_binary(name = "tool", srcs = ["plain.c"])
""",
        "t/xy.c": LOADS_XY, "t/x.c": LOADS_X, "t/xyz.c": LOADS_XYZ, "t/fails.c": LOADS_BUT_FAILS,
        "t/plain.c": "int main(void) { return 0; }\n",
        "t/local.c": "int localdemo_value(void);\n"
                     "int main(void) { return localdemo_value() == 5 ? 0 : 1; }\n",
        "third_party/local/BUILD": 'package(default_visibility = ["//visibility:public"])\n'
                                   'cc_import(name = "localdemo", '
                                   'shared_library = "lib/liblocaldemo.so")\n',
    }
    workspace = make_workspace(top / "ws", files, env=clean_env())
    # A vendored library in the main repository: its versioned file is in the source tree.
    sdk(workspace.root / "third_party" / "local", "localdemo", "5")
    workspace.zdir = zlib.parent  # type: ignore[attr-defined]
    yield workspace
    workspace.shutdown()


def test_plain_bazel_test_fails_in_the_loader_and_ldfix_test_passes(ws: Workspace) -> None:
    plain = ws.bazel("test", "//t:needs_xy")
    assert plain.returncode == 3, plain.stderr
    assert "libxdemo.so.11: cannot open shared object file" in ws.test_log("t", "needs_xy")

    fixed = ws.ldfix("test", "//t:needs_xy")
    assert fixed.returncode == 0, fixed.stderr
    assert "//t:needs_xy" in fixed.stdout + fixed.stderr
    assert "PASSED" in fixed.stdout + fixed.stderr


def test_env_json_follows_dependencies_and_passes_over_the_wrong_machine(
        ws: Workspace) -> None:
    # needs_x links only libxdemo; libydemo.so.13 is needed by libxdemo.so.11 itself, so it
    # shows up once that is found, and is not beside anything the test links: found by a
    # walk through the symlinked repository, past an aarch64 copy.
    result = ws.ldfix("env", "--format", "json", "//t:needs_x")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    output_base = ws.bazel("info", "output_base").stdout.strip()
    assert doc["output_base"] == output_base
    by_name = {m["soname"]: m for m in doc["missing"]}
    assert set(by_name) == {"libxdemo.so.11", "libydemo.so.13"}
    sdks = Path(ws.root).parent / "sdks"
    x, y = by_name["libxdemo.so.11"], by_name["libydemo.so.13"]
    assert Path(x["dir"], "libxdemo.so.11").resolve() == sdks / "xsdk/lib/libxdemo.so.11"
    assert Path(y["dir"], "libydemo.so.13").resolve() == sdks / "ysdk/lib/libydemo.so.13"
    assert y["dir"].startswith(os.path.join(output_base, "external", "ysdk"))
    assert [p["reason"] for p in y["passed_over"]] == ["wrong machine: aarch64"]
    assert all(name.endswith("/t/needs_x") for name in x["needed_by"])
    assert y["needed_by"] == [str(Path(x["dir"]) / "libxdemo.so.11")]
    assert doc["ld_library_path"] == f"{x['dir']}:{y['dir']}"
    assert doc["flags"] == [f"--test_env=LD_LIBRARY_PATH={doc['ld_library_path']}"]
    assert ws.ldfix("test", "//t:needs_x").returncode == 0


def test_an_existing_test_env_value_is_kept(ws: Workspace) -> None:
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    result = ws.ldfix("test", f"--test_env=LD_LIBRARY_PATH={zdir}", "//t:needs_xyz")
    assert result.returncode == 0, result.stderr
    shown = ws.ldfix("env", "--format", "json", f"--test_env=LD_LIBRARY_PATH={zdir}",
                     "//t:needs_xyz")
    assert json.loads(shown.stdout)["ld_library_path"].split(":")[0] == zdir


def test_the_clients_ld_library_path_is_kept(ws: Workspace) -> None:
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    plain = ws.bazel("test", "//t:needs_xyz", env={"LD_LIBRARY_PATH": zdir})
    assert plain.returncode == 3
    result = ws.ldfix("test", "//t:needs_xyz", env={"LD_LIBRARY_PATH": zdir})
    assert result.returncode == 0, result.stderr


def test_a_rule_env_value_is_kept(ws: Workspace) -> None:
    result = ws.ldfix("test", "//t:with_env")
    assert result.returncode == 0, result.stderr


def test_prepend_puts_new_directories_first(ws: Workspace) -> None:
    zdir = str(ws.zdir)  # type: ignore[attr-defined]
    shown = ws.ldfix("env", "--prepend", "--format", "json",
                     f"--test_env=LD_LIBRARY_PATH={zdir}", "//t:needs_xyz")
    assert json.loads(shown.stdout)["ld_library_path"].split(":")[-1] == zdir


def test_nothing_is_added_when_nothing_is_missing(ws: Workspace) -> None:
    result = ws.ldfix("env", "--format", "json", "//t:plain")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["missing"] == [] and doc["flags"] == [] and doc["ld_library_path"] is None
    dry = ws.ldfix("test", "--dry-run", "//t:plain")
    assert dry.returncode == 0
    assert "--test_env" not in dry.stdout


def test_bazels_exit_code_is_passed_through(ws: Workspace) -> None:
    assert ws.ldfix("test", "//t:fails").returncode == 3
    broken = ws.ldfix("test", "//t:no_such_target")
    assert broken.returncode == 1
    assert "Traceback" not in broken.stderr


def test_options_before_a_double_dash_and_target_patterns_after_it(ws: Workspace) -> None:
    # The first `--` is Bazel's, as with `bazel test`: the repair goes before it.
    dry = ws.ldfix("test", "--dry-run", "--test_output=errors", "--", "//t:needs_xy")
    assert dry.returncode == 0, dry.stderr
    words = dry.stdout.split()
    assert words.index("--") > max(i for i, w in enumerate(words) if w.startswith("--test_env"))


def test_patterns_that_select_no_test(ws: Workspace) -> None:
    env = ws.ldfix("env", "//t:tool")
    assert env.returncode == 67
    assert env.stderr.strip().splitlines()[-1].startswith(
        "error: the target patterns and test filters select no test")
    assert ws.ldfix("test", "//t:tool").returncode == 4


def test_outside_a_workspace(ws: Workspace, tmp_path: Path) -> None:
    result = ws.ldfix("env", "//...", cwd=tmp_path)
    assert result.returncode == 64
    assert result.stderr.strip().splitlines() == [
        "error: not inside a Bazel workspace (no WORKSPACE or MODULE.bazel above the current "
        "directory)"]


def test_test_outside_a_workspace_says_why_once_and_runs_bazel_test(
        ws: Workspace, tmp_path: Path) -> None:
    result = ws.ldfix("test", "//...", cwd=tmp_path)
    assert result.returncode == 2       # Bazel's own code, from its own error
    ours = [line for line in result.stderr.splitlines() if line.startswith("bazel-ldfix:")]
    assert ours == ["bazel-ldfix: no repair: not inside a Bazel workspace (no WORKSPACE or "
                    "MODULE.bazel above the current directory); running `bazel test` "
                    "unchanged"]
    assert "only supported from within a workspace" in result.stderr
    # Quiet, it says no more than `env --quiet`, whose one line is its error.
    quiet = ws.ldfix("test", "--quiet", "//...", cwd=tmp_path)
    assert quiet.returncode == 2
    assert [line for line in quiet.stderr.splitlines()
            if line.startswith(("bazel-ldfix", "error:"))] == []
    assert "only supported from within a workspace" in quiet.stderr


def test_an_output_base_that_does_not_exist(ws: Workspace, tmp_path: Path) -> None:
    result = ws.ldfix("env", "--output-base", str(tmp_path / "nope"), "//t:needs_xy")
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: output_base {tmp_path / 'nope'} does not exist"


def test_given_output_base_skips_the_query(ws: Workspace) -> None:
    output_base = ws.bazel("info", "output_base").stdout.strip()
    result = ws.ldfix("env", "--output-base", output_base, "--format", "shell", "//t:needs_xy")
    assert result.returncode == 0, result.stderr
    ext = f"{output_base}/external"
    assert result.stdout == f"export LD_LIBRARY_PATH={ext}/xsdk/lib:{ext}/ysdk/lib\n"
    as_json = ws.ldfix("env", "--output-base", output_base, "--format", "json", "//t:needs_xy")
    assert json.loads(as_json.stdout)["output_base"] == output_base


def test_tests_the_users_filters_exclude_are_not_examined(ws: Workspace) -> None:
    result = ws.ldfix("env", "--format", "json", "--test_tag_filters=-gpu", "//t:gpu",
                      "//t:plain")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [t["label"] for t in doc["tests"]] == ["//t:plain"]
    assert doc["missing"] == []
    only_gpu = ws.ldfix("env", "--test_tag_filters=-gpu", "//t:gpu")
    assert only_gpu.returncode == 67


def test_a_vendored_library_of_the_main_repository_is_found_beside_its_import(
        ws: Workspace) -> None:
    assert ws.bazel("test", "//t:needs_local").returncode == 3
    result = ws.ldfix("env", "--format", "json", "//t:needs_local")
    assert result.returncode == 0, result.stderr
    (missing,) = json.loads(result.stdout)["missing"]
    assert missing["soname"] == "liblocaldemo.so.5"
    assert missing["dir"] == str(ws.root / "third_party" / "local" / "lib")
    assert ws.ldfix("test", "//t:needs_local").returncode == 0


@pytest.mark.parametrize(("args", "meant"), [
    (["env", "--formt", "json"], "--formt is not an option of bazel-ldfix env; did you mean "
                                 "--format?"),
    (["fix", "--wrte"], "--wrte is not an option of bazel-ldfix fix; did you mean --write?"),
])
def test_a_misspelt_option_bazel_refuses_is_named_with_the_one_meant_and_exit_2(
        ws: Workspace, args: list[str], meant: str) -> None:
    result = ws.ldfix(*args, "//t:needs_x")
    assert result.returncode == 2
    assert "Unrecognized option: " + args[1] in result.stderr    # Bazel's own words
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: Bazel refused its command line (exit code 2") and meant in last


def test_test_names_the_option_meant_and_keeps_bazels_exit_code(ws: Workspace) -> None:
    result = ws.ldfix("test", "--quite", "//t:needs_x")
    assert result.returncode == 2
    # The error line env and fix end with too.
    assert result.stderr.strip().splitlines()[-1] == (
        "error: Bazel refused its command line (exit code 2, its error is above): --quite is "
        "not an option of bazel-ldfix test; did you mean --quiet? The tool's options go "
        "before Bazel's arguments")


def test_a_bazel_option_bazel_refuses_for_another_reason_gets_no_guess(ws: Workspace) -> None:
    result = ws.ldfix("env", "--no_such_bazel_flag", "//t:needs_x")
    assert result.returncode == 2       # Bazel's own code, as `test` ends with it
    assert "did you mean" not in result.stderr
    # --bes_timeout is close to --bazel-timeout, and Bazel takes it: it is never guessed at.
    result = ws.ldfix("env", "--bes_timeout=10s", "--no_such_bazel_flag", "//t:needs_x")
    assert result.returncode == 2
    assert "did you mean" not in result.stderr


@pytest.mark.parametrize(("word", "said"), [
    ("--prepend=true", "--prepend is a flag of bazel-ldfix env and takes no value: write "
                       "--prepend alone"),
    ("--bazelrc=/dev/null", "--bazelrc is a startup option of Bazel's, not an option of its "
                            "test command: give it as --startup-option=--bazelrc=/dev/null"),
])
def test_a_flag_given_a_value_and_a_startup_option_are_named_as_such(
        ws: Workspace, word: str, said: str) -> None:
    result = ws.ldfix("env", word, "//t:needs_x")
    assert result.returncode == 2
    assert said in result.stderr.strip().splitlines()[-1]

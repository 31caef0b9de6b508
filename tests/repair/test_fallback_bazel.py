"""`bazel-ldfix test` is never worse than `bazel test`, against a real Bazel.

Tests whose runfiles hold files the repair cannot model (libraries of another machine or
class, a linker script, a text file, a truncated library, a file that cannot be read, a
dangling symlink) run beside a test that needs repairing: each such file is skipped with a
note, every test runs and the repairable one passes.

Tests run as root, who reads every file; so the tool runs without the two capabilities that
let root read a file of mode 000 (setpriv), while Bazel's server, started before with all of
them, builds and runs the tests as usual. The dangling symlink is Bazel's own (an unresolved
symlink artifact). A FIFO is left to tests/repair/test_fallback.py: Bazel would block reading it.

A library a Python test opens with ctypes by name, which no plan made before the run can
know, is repaired by one rerun of exactly that test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, LOADS_X, Workspace, clean_env, make_workspace, sdk
from elfbuild import cc, truncated
from foreign import aarch64_lib, i386_lib, linker_script, text_file

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

SDK_BUILD = """package(default_visibility = ["//visibility:public"])
cc_import(name = "xdemo", shared_library = "lib/libxdemo.so")
filegroup(name = "odd", srcs = glob(["odd/**"]))
"""
PY_DLOPEN = ("import ctypes\n"
             "assert ctypes.CDLL('libpdemo.so.3').pdemo_value() == 3\n")
DANGLING_RULE = """
def _impl(ctx):
    out = ctx.actions.declare_symlink(ctx.attr.name)
    ctx.actions.symlink(output = out, target_path = "nowhere.so")
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles([out]))]

dangling = rule(implementation = _impl)
"""
# Capabilities that let root read any file: without them a file of mode 000 is unreadable,
# to root too. Bazel's server (started before, with every capability) still reads it.
NO_READ_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
# Each odd file, and the kind of note the repair gives for it.
ODD = {"libarm64.so": "other_machine", "libi386.so": "other_class",
       "libscript.so": "linker_script", "libtext.so": "not_elf",
       "libtrunc.so": "malformed", "liblocked.so": "unreadable", "libgone.so": "gone"}


@dataclass
class Setup:
    ws: Workspace
    sdk: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    top = tmp_path_factory.mktemp("fallback")
    root = top / "sdk"
    sdk(root, "xdemo", "11")
    # The library the Python test opens by name (in a directory the repair does not add for
    # libxdemo), and an aarch64 copy that a choice by path alone would take ("arm" sorts
    # before "plib"; both are as deep).
    cc(root / "plib" / "libpdemo.so.3", "-shared", "-Wl,-soname,libpdemo.so.3",
       src="int pdemo_value(void){return 3;}")
    aarch64_lib(root / "arm" / "libpdemo.so.3", "libpdemo.so.3")
    odd = root / "odd"
    aarch64_lib(odd / "libarm64.so", "libarm64.so")
    i386_lib(odd / "libi386.so", "libi386.so")
    linker_script(odd / "libscript.so")
    text_file(odd / "libtext.so")
    # The first 200 bytes of a real library: the ELF header is whole, the rest is not.
    truncated(odd / "libtrunc.so", root / "lib" / "libxdemo.so.11", 200)
    locked = cc(odd / "liblocked.so", "-shared", "-Wl,-soname,liblocked.so")
    locked.chmod(0)
    files = {
        "WORKSPACE": f'new_local_repository(name = "sdk", path = "{root}", '
                     f"build_file_content = {json.dumps(SDK_BUILD)})\n",
        # Bazel itself puts a dangling symlink into the runfiles (an unresolved symlink
        # artifact): a file that is gone by the time anything reads it.
        ".bazelrc": "build --experimental_allow_unresolved_symlinks\n",
        "t/defs.bzl": DANGLING_RULE,
        "t/BUILD": """
load(":defs.bzl", "dangling")
exports_files(["ok.sh"])
dangling(name = "libgone.so")
sh_test(name = "odd_sh", srcs = ["ok.sh"], data = ["@sdk//:odd", ":libgone.so"])
cc_test(name = "odd_cc", srcs = ["plain.c"], data = ["@sdk//:odd", ":libgone.so"])
cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@sdk//:xdemo"])
py_test(name = "py_dlopen", srcs = ["py_dlopen.py"])
cc_test(name = "fails", srcs = ["fails.c"])
""",
        "b/BUILD": 'cc_binary(name = "broken", srcs = ["broken.c"])\n'
                   'sh_test(name = "ok", srcs = ["//t:ok.sh"])\n',
        "b/broken.c": "this does not compile\n",
        "t/ok.sh": "#!/bin/sh\nexit 0\n",
        "t/plain.c": "int main(void) { return 0; }\n",
        "t/fails.c": "int main(void) { return 1; }\n",
        "t/x.c": LOADS_X,
        "t/py_dlopen.py": PY_DLOPEN,
    }
    ws = make_workspace(top / "ws", files, env=clean_env())
    (ws.root / "t" / "ok.sh").chmod(0o755)
    # Start Bazel's server with every capability, and build everything once.
    built = ws.bazel("build", "//t:all")
    assert built.returncode == 0, built.stderr[-3000:]
    try:
        yield Setup(ws, root)
    finally:
        ws.shutdown()
        locked.chmod(0o644)


def ldfix_without_read_override(ws: Workspace, *args: str
                                ) -> subprocess.CompletedProcess[str]:
    """``bazel-ldfix ARGS`` as root that cannot read a file of mode 000."""
    assert shutil.which("setpriv"), "setpriv (util-linux) is missing"
    # Bazel's server must be the one with every capability (started again here if it quit).
    assert ws.bazel("info", "release").returncode == 0
    return subprocess.run([*NO_READ_OVERRIDE, sys.executable, "-m", "bazel_ldfix", *args],
                          cwd=ws.root, env=ws.env, capture_output=True, text=True)


def test_the_locked_file_is_unreadable_here(setup: Setup) -> None:
    # What the notes below rely on: the capability drop really makes the file unreadable.
    proc = subprocess.run([*NO_READ_OVERRIDE, "head", "-c1", str(setup.sdk / "odd" /
                                                                  "liblocked.so")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "Permission denied" in proc.stderr


def test_every_test_runs_and_the_repairable_one_passes(setup: Setup) -> None:
    ws = setup.ws
    plain = ws.bazel("test", "//t:odd_sh", "//t:odd_cc", "//t:needs_x")
    assert plain.returncode == 3  # needs_x cannot load libxdemo.so.11
    result = ldfix_without_read_override(ws, "test", "//t:odd_sh", "//t:odd_cc", "//t:needs_x")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for label in ("//t:odd_sh", "//t:odd_cc", "//t:needs_x"):
        assert re.search(re.escape(label) + r"\s+PASSED", out), out
    # One note per skipped file (the same file in two tests' runfiles is noted once).
    for name, kind in ODD.items():
        notes = [line for line in out.splitlines() if "note: skipped" in line and name in line]
        assert len(notes) == 1, (name, out)
        assert f"({kind.replace('_', ' ').replace('elf', 'ELF')})" in notes[0], notes[0]


def test_env_reports_skipped_files(setup: Setup) -> None:
    result = ldfix_without_read_override(setup.ws, "env", "--format", "json", "//t:odd_sh",
                                         "//t:needs_x")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    kinds = {os.path.basename(s["path"]): s["kind"] for s in doc["skipped"]}
    assert kinds == ODD
    assert all(s["reason"] for s in doc["skipped"])
    assert doc["flags"], doc


def summaries(stdout: str) -> list[str]:
    """Each Bazel run's test summary, in order (each ends with "Executed N out of M")."""
    return [part for part in re.split(r"Executed \d+ out of \d+ tests?.*\n", stdout)
            if "//t:" in part]


def test_a_library_opened_by_name_is_repaired_by_one_rerun(setup: Setup) -> None:
    ws = setup.ws
    plain = ws.bazel("test", "//t:py_dlopen")
    assert plain.returncode == 3
    assert "libpdemo.so.3: cannot open shared object file" in ws.test_log("t", "py_dlopen")
    # No ELF file names it: the repair made before the run cannot know it.
    assert ws.ldfix("test", "//t:py_dlopen", "//t:needs_x").returncode == 3

    result = ws.ldfix("test", "--rerun-loader-failures", "//t:py_dlopen", "//t:needs_x")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    flag = re.search(r"rerunning //t:py_dlopen with --test_env=LD_LIBRARY_PATH=(\S+)", out)
    assert flag, out
    # The rerun keeps the first run's value and adds the directory of the x86-64 copy (the
    # aarch64 one sorts first and is passed over).
    first, *rest = flag.group(1).split(":")
    assert os.path.realpath(os.path.join(first, "libxdemo.so.11")) == str(
        setup.sdk / "lib" / "libxdemo.so.11")
    (added,) = rest
    assert os.path.realpath(os.path.join(added, "libpdemo.so.3")) == str(
        setup.sdk / "plib" / "libpdemo.so.3")
    assert "/arm" not in flag.group(1)
    # Bazel's summaries (stdout): the first run's, then the rerun's, of exactly that test.
    first_run, rerun = summaries(result.stdout)
    assert re.search(r"//t:py_dlopen\s+FAILED", first_run), first_run
    assert re.search(r"//t:py_dlopen\s+PASSED", rerun), rerun
    assert "//t:needs_x" not in rerun
    assert "after the rerun, //t:py_dlopen passes" in result.stderr
    assert result.stderr.count("bazel-ldfix: rerunning") == 1


def test_a_test_that_failed_for_another_reason_is_not_rerun(setup: Setup) -> None:
    ws = setup.ws
    result = ws.ldfix("test", "--rerun-loader-failures", "--keep_going", "//t:py_dlopen",
                      "//t:fails")
    out = result.stdout + result.stderr
    assert result.returncode == 3, out           # //t:fails still failed in the first run
    first_run, rerun = summaries(result.stdout)
    assert re.search(r"//t:fails\s+FAILED", first_run), first_run
    assert re.search(r"//t:py_dlopen\s+PASSED", rerun), rerun
    assert "//t:fails" not in rerun
    assert "not rerun, failed in the first run: //t:fails" in result.stderr


def test_nothing_to_rerun_leaves_bazels_code(setup: Setup) -> None:
    result = setup.ws.ldfix("test", "--rerun-loader-failures", "//t:fails")
    assert result.returncode == 3
    assert "rerunning" not in result.stderr


def test_a_failing_build_step_runs_bazel_test_unchanged(setup: Setup) -> None:
    # --build_tests_only: `bazel test` builds the tests alone. The build step must build
    # more (it selects no test), so a broken binary beside the tests fails it.
    ws = setup.ws
    args = ["--build_tests_only", "//b:all"]
    assert ws.bazel("test", *args).returncode == 0
    result = ws.ldfix("test", *args)
    assert result.returncode == 0, result.stderr
    assert ("bazel-ldfix: no repair: the build step of `bazel test` failed (exit code 1): "
            "it built more than `bazel test --build_tests_only` builds; running `bazel test` "
            "unchanged") in result.stderr.splitlines()
    assert re.search(r"//b:ok\s+(\(cached\) )?PASSED", result.stdout), result.stdout


def test_without_a_runfiles_tree_the_manifest_is_judged_the_same(setup: Setup) -> None:
    # --nobuild_runfile_links (which --remote_download_minimal sets): the repair reads what
    # each test stages from its runfiles manifest. No tree is left over from before.
    tree = (setup.ws.root / "bazel-bin" / "t" / "odd_sh.runfiles").resolve()
    shutil.rmtree(tree, ignore_errors=True)
    result = ldfix_without_read_override(setup.ws, "env", "--format", "json",
                                         "--nobuild_runfile_links", "//t:odd_sh")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    kinds = {os.path.basename(s["path"]): s["kind"] for s in doc["skipped"]}
    assert not tree.is_dir()
    # The dangling symlink is named among the files not on disk (in the notes).
    assert any("libgone.so" in note for note in doc["notes"]), doc["notes"]
    assert {k: v for k, v in kinds.items() if k != "libgone.so"} == {
        k: v for k, v in ODD.items() if k != "libgone.so"}

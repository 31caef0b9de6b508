"""`fix` plans over every program a test runs, on a real Bazel 4.2.3.

An ``sh_test`` and a ``py_test`` each run a ``cc_binary`` from their ``data``. One binary
links a ``cc_import`` of an unversioned file (``libxdemo.so``, SONAME ``libxdemo.so.11``);
the other links ``libztop.so.1`` of an SDK whose libraries have no RUNPATH, and
``libztop.so.1`` needs ``libzmid.so.3``. Plain ``bazel test`` stops in the loader of the
binary. One ``fix --write`` must make plain ``bazel test`` pass from a clean output tree,
and ``--check`` must say so afterwards. Each binary prints the SDK lines of its
``/proc/self/maps``, and that is what is read: the file each library was mapped from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, import_repository, make_workspace, sdk
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TESTS = ["//app:run_x_sh", "//app:run_x_py", "//app:run_z_sh"]


def prints_maps(function: str, value: int) -> str:
    """A binary that prints the lines of its maps naming an SDK file, then calls into it."""
    return ("#include <stdio.h>\n#include <string.h>\n"
            f"int {function}(void);\n"
            "int main(void) {\n"
            '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
            "  while (f && fgets(line, sizeof line, f))\n"
            '    if (strstr(line, "/libxdemo") || strstr(line, "/libz")) '
            'printf("maps %s", line);\n'
            f"  return {function}() == {value} ? 0 : 1;\n"
            "}\n")


RUN_SH = "#!/bin/sh\nexec app/{tool}\n"
RUN_PY = ("import subprocess\nimport sys\n\n"
          "sys.exit(subprocess.call(['app/{tool}']))\n")


@dataclass
class Programs:
    ws: Workspace
    xdemo: Path         # libxdemo.so.11, the file its SONAME names
    ztop: Path
    zmid: Path
    before: dict[str, str]      # the workspace's files before any change


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Programs]:
    top = tmp_path_factory.mktemp("programs")
    xdemo = sdk(top / "sdks" / "xsdk", "xdemo", "11")
    zlib = top / "sdks" / "zsdk" / "lib"
    zmid = cc(zlib / "libzmid.so.3", "-shared", "-Wl,-soname,libzmid.so.3",
              src="int zmid_value(void){return 3;}")
    (zlib / "libzmid.so").symlink_to(zmid.name)
    ztop = cc(zlib / "libztop.so.1", "-shared", "-Wl,-soname,libztop.so.1", "-L", str(zlib),
              "-l:libzmid.so.3", src="int zmid_value(void);\n"
                                    "int ztop_value(void){return zmid_value() + 1;}")
    (zlib / "libztop.so").symlink_to(ztop.name)
    files = {
        "WORKSPACE": (import_repository("xsdk", top / "sdks" / "xsdk", "xdemo")
                      + 'new_local_repository(name = "zsdk", path = "'
                      + f'{zlib.parent}", build_file = "//third_party:zsdk.BUILD")\n'),
        "third_party/BUILD": "",
        "third_party/zsdk.BUILD": (
            'package(default_visibility = ["//visibility:public"])\n\n'
            'cc_import(\n    name = "ztop",\n    shared_library = "lib/libztop.so",\n)\n\n'
            'cc_import(\n    name = "zmid",\n    shared_library = "lib/libzmid.so",\n)\n'),
        "app/BUILD": (
            'cc_binary(name = "x_tool", srcs = ["x_tool.c"], deps = ["@xsdk//:xdemo"])\n'
            'cc_binary(name = "z_tool", srcs = ["z_tool.c"], deps = ["@zsdk//:ztop"])\n'
            'sh_test(name = "run_x_sh", srcs = ["run_x.sh"], data = [":x_tool"])\n'
            'py_test(name = "run_x_py", srcs = ["run_x_py.py"], data = [":x_tool"],\n'
            '        python_version = "PY3")\n'
            'sh_test(name = "run_z_sh", srcs = ["run_z.sh"], data = [":z_tool"])\n'),
        "app/x_tool.c": prints_maps("xdemo_value", 11),
        "app/z_tool.c": prints_maps("ztop_value", 4),
        "app/run_x.sh": RUN_SH.format(tool="x_tool"),
        "app/run_x_py.py": RUN_PY.format(tool="x_tool"),
        "app/run_z.sh": RUN_SH.format(tool="z_tool"),
    }
    ws = make_workspace(top / "ws", files, env=clean_env())
    for name in ("run_x.sh", "run_z.sh"):
        (ws.root / "app" / name).chmod(0o755)
    try:
        yield Programs(ws, xdemo.resolve(), ztop.resolve(), zmid.resolve(),
                       {"WORKSPACE": (ws.root / "WORKSPACE").read_text(),
                        "third_party/zsdk.BUILD": files["third_party/zsdk.BUILD"]})
    finally:
        ws.shutdown()


def mapped(ws: Workspace, name: str) -> set[Path]:
    """The SDK files the binary a test ran had mapped, by real path."""
    return {Path(line.split()[-1]).resolve()
            for line in ws.test_log("app", name).splitlines()
            if line.startswith("maps ") and len(line.split()) >= 7}


def test_plain_bazel_test_stops_in_the_loader_of_the_binary(programs: Programs) -> None:
    result = programs.ws.bazel("test", *TESTS)
    assert result.returncode == 3, result.stderr[-3000:]
    for name in ("run_x_sh", "run_x_py"):
        assert "libxdemo.so.11: cannot open shared object file" in \
            programs.ws.test_log("app", name)
    assert "libztop.so.1: cannot open shared object file" in \
        programs.ws.test_log("app", "run_z_sh")


def test_env_finds_what_the_binary_misses(programs: Programs) -> None:
    result = programs.ws.ldfix("env", *TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("libxdemo.so.11", "libztop.so.1"):
        assert f"cannot load {name}" in result.stderr


def test_test_gives_the_binary_what_it_misses(programs: Programs) -> None:
    result = programs.ws.ldfix("test", *TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert mapped(programs.ws, "run_x_sh") == {programs.xdemo}
    assert mapped(programs.ws, "run_z_sh") == {programs.ztop, programs.zmid}


def test_check_says_a_change_is_needed_for_the_binary(programs: Programs) -> None:
    result = programs.ws.ldfix("fix", "--check", *TESTS)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert '+new_local_repository(name = "xsdk"' in result.stdout
    assert 'lib/libxdemo.so.11' in result.stdout
    # The SDK's own BUILD file gets the edge: whatever links ztop links zmid too.
    assert '+    name = "ztop_import",' in result.stdout
    assert '+        ":zmid",' in result.stdout
    assert "--- a/app/BUILD" not in result.stdout
    assert "no BUILD change needed" not in result.stderr


def test_one_write_makes_plain_bazel_test_pass_from_a_clean_tree(programs: Programs) -> None:
    ws = programs.ws
    written = ws.ldfix("fix", "--write", "--verify", *TESTS)
    assert written.returncode == 0, written.stdout + written.stderr[-3000:]
    assert "verified: plain `bazel test` passes" in written.stderr
    assert ws.bazel("clean").returncode == 0
    plain = ws.bazel("test", *TESTS)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert mapped(ws, "run_x_sh") == {programs.xdemo}
    assert mapped(ws, "run_x_py") == {programs.xdemo}
    assert mapped(ws, "run_z_sh") == {programs.ztop, programs.zmid}
    check = ws.ldfix("fix", "--check", *TESTS)
    assert check.returncode == 0, check.stdout + check.stderr[-3000:]
    assert "no BUILD change needed" in check.stderr


def test_a_binary_that_finds_its_library_only_in_a_leftover_still_needs_the_change(
        programs: Programs) -> None:
    """The change undone: the versioned file staged before stays in bazel-out, and the
    binary's RUNPATH, from where its file really is, finds it there. Bazel does not
    declare it, so --check still says the change is needed."""
    ws = programs.ws
    for rel, text in programs.before.items():
        (ws.root / rel).write_text(text)
    assert ws.bazel("build", *TESTS).returncode == 0
    check = ws.ldfix("fix", "--check", "//app:run_x_sh")
    assert check.returncode == 1, check.stdout + check.stderr[-3000:]
    assert "lib/libxdemo.so.11" in check.stdout


SDK_RULE = '''def _impl(ctx):
    ctx.symlink(ctx.attr.path + "/lib", "lib")
    ctx.file("BUILD.bazel", """package(default_visibility = ["//visibility:public"])
cc_import(name = "top", shared_library = "lib/libztop.so.1")
cc_import(name = "mid", shared_library = "lib/libzmid.so.3")
""")

sdk_repository = repository_rule(implementation = _impl, attrs = {"path": attr.string()})
'''


def test_where_a_rule_writes_the_sdk_build_file_the_binary_carries_the_edge(
        tmp_path: Path) -> None:
    """``libztop.so.1`` needs ``libzmid.so.3``; a repository rule writes the SDK's BUILD
    file, which fix does not edit. The cc_binary links what needs the name, so it loads
    it too; the sh_test that runs it takes no cc_import."""
    lib = tmp_path / "rsdk" / "lib"
    mid = cc(lib / "libzmid.so.3", "-shared", "-Wl,-soname,libzmid.so.3",
             src="int zmid_value(void){return 3;}")
    top = cc(lib / "libztop.so.1", "-shared", "-Wl,-soname,libztop.so.1", "-L", str(lib),
             "-l:libzmid.so.3", src="int zmid_value(void);\n"
                                   "int ztop_value(void){return zmid_value() + 1;}")
    files = {
        "WORKSPACE": ('load("//tools:sdk.bzl", "sdk_repository")\n'
                      f'sdk_repository(name = "rsdk", path = "{tmp_path / "rsdk"}")\n'),
        "tools/BUILD": "",
        "tools/sdk.bzl": SDK_RULE,
        "app/BUILD": (
            'cc_binary(name = "z_tool", srcs = ["z_tool.c"], deps = ["@rsdk//:top"])\n'
            'sh_test(name = "run_z_sh", srcs = ["run_z.sh"], data = [":z_tool"])\n'),
        "app/z_tool.c": prints_maps("ztop_value", 4),
        "app/run_z.sh": RUN_SH.format(tool="z_tool"),
    }
    ws = make_workspace(tmp_path / "ws", files, env=clean_env())
    (ws.root / "app" / "run_z.sh").chmod(0o755)
    try:
        assert ws.bazel("test", "//app:run_z_sh").returncode == 3
        written = ws.ldfix("fix", "--write", "--verify", "//app:run_z_sh")
        assert written.returncode == 0, written.stdout + written.stderr[-3000:]
        build = (ws.root / "app" / "BUILD").read_text()
        assert 'deps = ["@rsdk//:top", "@rsdk//:mid"])' in build
        assert ws.bazel("clean").returncode == 0
        plain = ws.bazel("test", "//app:run_z_sh")
        assert plain.returncode == 0, plain.stderr[-3000:]
        assert mapped(ws, "run_z_sh") == {top.resolve(), mid.resolve()}
    finally:
        ws.shutdown()

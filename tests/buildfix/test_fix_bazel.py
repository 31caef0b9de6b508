"""`bazel-ldfix fix` on a real Bazel 4.2.3 workspace, one layout per repository.

Every repository stages the unversioned "dev" name of its library, so each test fails to
load. `fix` must find the file a person edits for each layout, print the diff, write it,
and leave a workspace where a plain `bazel test` (no --test_env) passes.
"""

from __future__ import annotations

import json
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, sdk
from elfbuild import cc

from bazel_ldfix.buildfix import staging

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


def import_build(library: str, path: str, comment: str = "") -> str:
    return ('package(default_visibility = ["//visibility:public"])\n\n'
            f"{comment}"
            "cc_import(\n"
            f'    name = "{library}",\n'
            f'    shared_library = "{path}",  # the dev link\n'
            '    hdrs = [],\n'
            ")\n")


def main_src(*names_values: tuple[str, int]) -> str:
    decls = "".join(f"int {n}_value(void);\n" for n, _ in names_values)
    checks = " && ".join(f"{n}_value() == {v}" for n, v in names_values)
    return f"{decls}int main(void) {{ return {checks} ? 0 : 1; }}\n"


def several_versions(root: Path) -> Path:
    """libxdemo.so.11.2.0 (SONAME libxdemo.so.11), with the .so.11 and .so links."""
    real = root / "lib" / "libxdemo.so.11.2.0"
    cc(real, "-shared", "-Wl,-soname,libxdemo.so.11", "-L", str(root.parent / "ysdk" / "lib"),
       "-l:libydemo.so.13", src="int xdemo_value(void){return 11;}")
    (root / "lib" / "libxdemo.so.11").symlink_to(real.name)
    (root / "lib" / "libxdemo.so").symlink_to("libxdemo.so.11")
    return real


@dataclass
class Layouts:
    ws: Workspace
    top: Path


TESTS = ["//t:needs_m", "//t:needs_l", "//t:needs_xy", "//t:needs_x", "//t:needs_z",
         "//t:needs_a", "//t:needs_b"]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layouts]:
    top = tmp_path_factory.mktemp("fix")
    sdks = top / "sdks"
    sdk(sdks / "ysdk", "ydemo", "13")
    several_versions(sdks / "xsdk")
    sdk(sdks / "zsdk", "zdemo", "4")
    sdk(sdks / "csdk", "cdemo", "5")
    # local_repository: a directory with its own WORKSPACE and BUILD file.
    sdk(sdks / "lsdk", "ldemo", "7")
    (sdks / "lsdk" / "WORKSPACE").write_text('workspace(name = "lsdk")\n')
    (sdks / "lsdk" / "BUILD").write_text(import_build("ldemo", "lib/libldemo.so"))
    # http_archive: tarballs served from file:// URLs.
    for name, soversion in (("asdk", "8"), ("bsdk", "9")):
        library = name[0] + "demo"
        sdk(sdks / name, library, soversion)
        with tarfile.open(top / f"{name}.tar.gz", "w:gz") as tar:
            tar.add(sdks / name / "lib", arcname=f"{name}-1.0/lib")
    # A library of the main repository (vendored).
    ws_root = top / "ws"
    sdk(ws_root / "vendor", "mdemo", "2")
    z_build = import_build("zdemo", "lib/libzdemo.so", "# kept as written\n")
    files = {
        "WORKSPACE": f"""
load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")
load("//tools:sdk.bzl", "sdk_repository")

local_repository(name = "lsdk", path = "{sdks / 'lsdk'}")

new_local_repository(
    name = "xsdk",
    path = "{sdks / 'xsdk'}",
    build_file = "//third_party:xsdk.BUILD",  # shared with nobody
)

new_local_repository(name = "ysdk", path = "{sdks / 'ysdk'}",
                     build_file_content = {json.dumps(import_build('ydemo', 'lib/libydemo.so'))})

new_local_repository(
    name = "zsdk",
    path = "{sdks / 'zsdk'}",
    build_file_content = \"\"\"{z_build}\"\"\",
)

http_archive(
    name = "asdk",
    urls = ["file://{top / 'asdk.tar.gz'}"],
    strip_prefix = "asdk-1.0",
    build_file = "@//third_party:asdk.BUILD",
)

http_archive(
    name = "bsdk",
    urls = ["file://{top / 'bsdk.tar.gz'}"],
    strip_prefix = "bsdk-1.0",
    build_file_content = {json.dumps(import_build('bdemo', 'lib/libbdemo.so'))},
)

sdk_repository(name = "csdk", path = "{sdks / 'csdk'}")
""",
        "tools/BUILD": "",
        "tools/sdk.bzl": """
def _impl(ctx):
    for name in ["libcdemo.so.5", "libcdemo.so"]:
        ctx.symlink(ctx.attr.path + "/lib/" + name, "lib/" + name)
    ctx.file("BUILD.bazel", 'package(default_visibility = ["//visibility:public"])\\n' +
             'cc_import(name = "cdemo", shared_library = "lib/libcdemo.so")\\n')

sdk_repository = repository_rule(implementation = _impl, attrs = {"path": attr.string()})
""",
        "third_party/BUILD": "",
        "third_party/xsdk.BUILD": import_build("xdemo", "lib/libxdemo.so"),
        "third_party/asdk.BUILD": import_build("ademo", "lib/libademo.so"),
        "vendor/BUILD": import_build("mdemo", "lib/libmdemo.so", "# vendored\n"),
        "t/BUILD": """
cc_test(name = "needs_m", srcs = ["m.c"], deps = ["//vendor:mdemo"])
cc_test(name = "needs_l", srcs = ["l.c"], deps = ["@lsdk//:ldemo"])
cc_test(name = "needs_xy", srcs = ["xy.c"], deps = ["@xsdk//:xdemo", "@ysdk//:ydemo"])
cc_test(
    name = "needs_x",
    srcs = ["x.c"],
    deps = [
        "@xsdk//:xdemo",  # libxdemo.so.11 needs libydemo.so.13
    ],
)
cc_test(name = "needs_z", srcs = ["z.c"], deps = ["@zsdk//:zdemo"])
cc_test(name = "needs_a", srcs = ["a.c"], deps = ["@asdk//:ademo"])
cc_test(name = "needs_b", srcs = ["b.c"], deps = ["@bsdk//:bdemo"])
cc_test(name = "needs_c", srcs = ["c.c"], deps = ["@csdk//:cdemo"])
""",
        "t/m.c": main_src(("mdemo", 2)), "t/l.c": main_src(("ldemo", 7)),
        "t/xy.c": main_src(("xdemo", 11), ("ydemo", 13)), "t/x.c": main_src(("xdemo", 11)),
        "t/z.c": main_src(("zdemo", 4)), "t/a.c": main_src(("ademo", 8)),
        "t/b.c": main_src(("bdemo", 9)), "t/c.c": main_src(("cdemo", 5)),
    }
    ws = make_workspace(ws_root, files, env=clean_env())
    try:
        yield Layouts(ws, top)
    finally:
        ws.shutdown()


def snapshot(root: Path) -> dict[str, str]:
    """Every BUILD-like file of a source tree (Bazel's convenience links are not followed)."""
    return {str(p): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and (p.name in ("WORKSPACE", "BUILD", "BUILD.bazel")
                                or p.suffix in (".BUILD", ".bzl"))}


def test_every_layout_fails_before_the_fix(layouts: Layouts) -> None:
    result = layouts.ws.bazel("test", "--keep_going", *TESTS, "//t:needs_c")
    assert result.returncode == 3, result.stderr[-3000:]
    log = layouts.ws.test_log("t", "needs_m")
    assert "libmdemo.so.2: cannot open shared object file" in log


def test_fix_prints_one_diff_per_file_and_changes_nothing(layouts: Layouts) -> None:
    before = snapshot(layouts.ws.root) | snapshot(layouts.top / "sdks" / "lsdk")
    result = layouts.ws.ldfix("fix", *TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert before == snapshot(layouts.ws.root) | snapshot(layouts.top / "sdks" / "lsdk")
    # The main repository, local_repository, build_file (both label spellings).
    assert "--- a/vendor/BUILD\n+++ b/vendor/BUILD\n" in out
    assert '-    shared_library = "lib/libmdemo.so",  # the dev link\n' \
           '+    shared_library = "lib/libmdemo.so.2",  # the dev link\n' in out
    lsdk = layouts.top / "sdks" / "lsdk" / "BUILD"
    assert f"--- {lsdk}\n+++ {lsdk}\n" in out and '"lib/libldemo.so.7"' in out
    assert "--- a/third_party/xsdk.BUILD\n" in out and "--- a/third_party/asdk.BUILD\n" in out
    # Of libxdemo.so.11 and libxdemo.so.11.2.0, the name the loader asks for.
    assert '+    shared_library = "lib/libxdemo.so.11",' in out
    assert "libxdemo.so.11.2.0" not in out
    # build_file_content: escaped single-line strings and triple-quoted text, in WORKSPACE.
    assert "--- a/WORKSPACE\n" in out
    assert r'shared_library = \"lib/libydemo.so.13\"' in out
    assert r'shared_library = \"lib/libbdemo.so.9\"' in out
    assert '+    shared_library = "lib/libzdemo.so.4",  # the dev link\n' in out
    # The dependency edge: libxdemo.so.11 needs libydemo.so.13, so the SDK's own BUILD
    # file wraps xdemo's import in a cc_library that links both; t/BUILD is not edited.
    assert '+    name = "xdemo_import",\n' in out
    assert '+        ":xdemo_import",\n+        "@ysdk//:ydemo",\n' in out
    assert "--- a/t/BUILD" not in out
    # The only-described layout is not asked for here.
    assert "sdk_repository`" not in out


def test_check_exits_1_when_a_change_is_needed(layouts: Layouts) -> None:
    result = layouts.ws.ldfix("fix", "--check", "//t:needs_m")
    assert result.returncode == 1, result.stderr[-3000:]


def test_a_repository_rule_is_described_not_edited(layouts: Layouts) -> None:
    before = snapshot(layouts.ws.root)
    result = layouts.ws.ldfix("fix", "--write", "//t:needs_c")
    assert result.returncode == 1, result.stderr[-3000:]
    assert before == snapshot(layouts.ws.root)
    out = result.stdout
    assert "repository rule `sdk_repository` (loaded from //tools:sdk.bzl)" in out
    assert '+cc_import(name = "cdemo", shared_library = "lib/libcdemo.so.5")' in out
    assert "bazel-ldfix: wrote" not in result.stderr


def test_the_staged_tree_is_what_the_loader_model_sees(layouts: Layouts) -> None:
    # The test failed for real (above); the model of its staged tree agrees, and with the
    # versioned name added where Bazel would stage it, nothing is missing.
    exe = os.path.realpath(layouts.ws.root / "bazel-bin" / "t" / "needs_m")
    solib = next(p for p in os.listdir(os.path.dirname(os.path.dirname(exe)))
                 if p.startswith("_solib_"))
    directory = "_U_S_Svendor_Cmdemo___Uvendor_Slib"
    assert staging.missing_after(exe, [], None) == ("libmdemo.so.2",)
    versioned = layouts.ws.root / "vendor" / "lib" / "libmdemo.so.2"
    added = [(f"{solib}/{directory}/libmdemo.so.2", str(versioned))]
    assert staging.missing_after(exe, added, None) == ()
    # Under a name the loader does not ask for, it still misses it.
    wrong = [(f"{solib}/{directory}/libmdemo.so.2.0", str(versioned))]
    assert staging.missing_after(exe, wrong, None) == ("libmdemo.so.2",)


def test_a_read_only_file_stops_the_write_and_nothing_is_written(layouts: Layouts) -> None:
    build = layouts.ws.root / "vendor" / "BUILD"
    before = snapshot(layouts.ws.root)
    os.chmod(build, 0o444)
    try:
        result = layouts.ws.ldfix("fix", "--write", "//t:needs_m", "//t:needs_z")
    finally:
        os.chmod(build, 0o644)
    assert result.returncode == 68, result.stderr[-3000:]
    assert "# cannot fix: " in result.stdout and "vendor/BUILD is read-only" in result.stdout
    assert result.stderr.rstrip().splitlines()[-1] == (
        "error: 1 change(s) cannot be made (see above); nothing written")
    assert snapshot(layouts.ws.root) == before


def test_the_interface_shape_written_and_verified(layouts: Layouts) -> None:
    result = layouts.ws.ldfix("fix", "--write", "--interface", "--verify", "//t:needs_l")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = (layouts.top / "sdks" / "lsdk" / "BUILD").read_text()
    assert text == import_build("ldemo", "lib/libldemo.so.7").replace(
        "  # the dev link\n", '  # the dev link\n    interface_library = "lib/libldemo.so",\n')


def test_write_then_plain_bazel_test_passes(layouts: Layouts) -> None:
    result = layouts.ws.ldfix("fix", "--write", "--verify", *TESTS)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "bazel-ldfix: wrote" in result.stderr
    # Formatting and comments kept; only the one attribute changed.
    vendor = (layouts.ws.root / "vendor" / "BUILD").read_text()
    assert vendor == import_build("mdemo", "lib/libmdemo.so.2", "# vendored\n")
    # A plain `bazel test`, no --test_env anywhere.
    again = layouts.ws.bazel("test", *TESTS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "--test_env" not in (layouts.ws.root / ".bazelrc").read_text()
    # Nothing left to do.
    check = layouts.ws.ldfix("fix", "--check", *TESTS)
    assert check.returncode == 0, check.stdout + check.stderr[-3000:]


def test_nothing_under_the_output_base_was_edited(layouts: Layouts) -> None:
    generated = layouts.ws.output_base / "external" / "csdk" / "BUILD.bazel"
    assert "libcdemo.so.5" not in generated.read_text()
    assert not list(layouts.ws.root.rglob(".bazel-ldfix-*"))     # no temporary file left


def test_a_disk_cache_and_a_cached_result_change_nothing_the_repair_decides(
        layouts: Layouts) -> None:
    ws = layouts.ws
    plain = ws.ldfix("env", "//t:needs_c")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "/external/csdk/lib" in plain.stdout
    cached = ws.ldfix("env", f"--disk_cache={layouts.top / 'disk-cache'}", "//t:needs_c")
    assert (cached.returncode, cached.stdout) == (0, plain.stdout)
    for _ in range(2):
        run = ws.ldfix("test", "//t:needs_c")
        assert run.returncode == 0, run.stderr[-3000:]
    assert "(cached) PASSED" in run.stdout + run.stderr
    after = ws.ldfix("env", "//t:needs_c")
    assert (after.returncode, after.stdout) == (0, plain.stdout)

"""`fix` on a real Bazel 4.2.3 workspace: Bazel judges every change before it is shown.

Each package holds one case: a py_test whose extension needs a library nothing it links
stages (the edge goes on the extension's cc_binary); an edge Bazel rejects (the import is
not visible to the test: every file gets its bytes back, exit 68); a SONAME no file is
named after (a copy_file makes it); a TensorRT builder resource's sentinel SONAME (never
linked); a library left in bazel-out by an earlier build (not a pass); an import whose
library the system provides (system_provided: no shared_library can go beside it), said
as a literal, which `fix` reads, and through a variable, which only Bazel's analysis sees.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    Workspace,
    clean_env,
    logged_commands,
    logging_bazel,
    make_workspace,
    sdk,
)
from diagnose_fixtures import EXTENSION_SRC
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

SENTINEL = "do_not_link_against_nvinfer_builder_resource"
PY_IMPORT = ("import os, sys\n"
             "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
             "try:\n"
             "    import _ext\n"
             "except SystemError:\n"
             "    print('loaded _ext and the libraries it needs')\n")


def system_build(name: str, system_provided: str) -> str:
    """An import of the unversioned file as ``interface_library``, the library itself
    said to come from the system at run time."""
    return ("SYSTEM = True\n\n"
            "cc_import(\n"
            f'    name = "{name}",\n'
            f'    interface_library = "lib/lib{name}.so",\n'
            f"    system_provided = {system_provided},\n"
            '    visibility = ["//visibility:public"],\n'
            ")\n")


def import_build(name: str, path: str, visibility: str = '"//visibility:public"') -> str:
    return ("cc_import(\n"
            f'    name = "{name}",\n'
            f'    shared_library = "{path}",\n'
            f"    visibility = [{visibility}],\n"
            ")\n")


def main_src(*names: str) -> str:
    decls = "".join(f"int {n}(void);\n" for n in names)
    calls = " + ".join(f"{n}()" for n in names)
    return f'{decls}#include <stdio.h>\nint main(void) {{ printf("%d\\n", {calls}); ' \
           "return 0; }\n"


@dataclass
class Case:
    ws: Workspace
    top: Path
    log: Path

    def ldfix(self, *args: str) -> tuple[int, str, str]:
        """bazel-ldfix through the Bazel that logs its calls (a diff may hold any byte)."""
        result = subprocess.run([sys.executable, "-m", "bazel_ldfix", *args],
                                cwd=self.ws.root, capture_output=True,
                                env={**self.ws.env, "BAZEL": str(self.top / "bazel")})
        return (result.returncode, result.stdout.decode(errors="surrogateescape"),
                result.stderr.decode(errors="surrogateescape"))


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    top = tmp_path_factory.mktemp("fixsafe")
    sdks = top / "sdks"
    ylib = sdk(sdks / "ysdk", "ydemo", "13")
    sdk(sdks / "xsdk", "xdemo", "11", needs=[ylib])
    wlib = sdk(sdks / "wsdk", "wdemo", "1")
    sdk(sdks / "vsdk", "vdemo", "2", needs=[wlib])
    sdk(sdks / "lsdk", "ldemo", "4")
    sdk(sdks / "psdk", "pdemo", "5")
    sdk(sdks / "qsdk", "qdemo", "6")
    # A SONAME no file is named after, as some CMake installs leave them.
    foo = cc(sdks / "fsdk" / "lib" / "libfoo-3.17.0.so", "-shared",
             "-Wl,-soname,libfoo.so.3", src="int foo_value(void){return 3;}")
    (foo.parent / "libfoo.so").symlink_to(foo.name)
    # A builder resource, linked by mistake: its SONAME says not to.
    cc(sdks / "tsdk" / "lib" / "libnvinfer_builder_resource.so.10.0.1", "-shared",
       f"-Wl,-soname,{SENTINEL}", src="int trt_value(void){return 10;}")
    workspace = ""
    files: dict[str, str] = {"third_party/BUILD": ""}
    for repo, build in (
            ("ysdk", import_build("ydemo", "lib/libydemo.so.13")),
            ("xsdk", import_build("xdemo", "lib/libxdemo.so.11")),
            ("wsdk", import_build("wdemo", "lib/libwdemo.so.1", '"@//other:__pkg__"')),
            ("vsdk", import_build("vdemo", "lib/libvdemo.so.2")),
            ("lsdk", import_build("ldemo", "lib/libldemo.so.4")),
            ("fsdk", import_build("foo", "lib/libfoo.so")),
            ("tsdk", import_build("builder", "lib/libnvinfer_builder_resource.so.10.0.1")),
            ("psdk", system_build("pdemo", "1")),
            ("qsdk", system_build("qdemo", "SYSTEM"))):
        workspace += (f'new_local_repository(name = "{repo}", path = "{sdks / repo}", '
                      f'build_file = "//third_party:{repo}.BUILD")\n')
        files[f"third_party/{repo}.BUILD"] = build
    files.update({
        "WORKSPACE": workspace,
        "py/BUILD": ('cc_binary(name = "_ext.so", srcs = ["ext.c"], linkshared = True, '
                     'deps = ["@xsdk//:xdemo"])\n'
                     'py_test(name = "ext_test", srcs = ["ext_test.py"], '
                     'data = [":_ext.so"])\n'),
        "py/ext.c": EXTENSION_SRC, "py/ext_test.py": PY_IMPORT,
        "other/BUILD": ('cc_test(name = "needs_xy", srcs = ["xy.c"], '
                        'deps = ["@xsdk//:xdemo", "@ysdk//:ydemo"])\n'
                        'cc_test(name = "needs_vw", srcs = ["vw.c"], '
                        'deps = ["@vsdk//:vdemo", "@wsdk//:wdemo"])\n'),
        "other/xy.c": main_src("xdemo_value", "ydemo_value"),
        "other/vw.c": main_src("vdemo_value", "wdemo_value"),
        "v/BUILD": 'cc_test(name = "needs_v", srcs = ["v.c"], deps = ["@vsdk//:vdemo"])\n',
        "v/v.c": main_src("vdemo_value"),
        "c/BUILD": 'cc_test(name = "needs_foo", srcs = ["c.c"], deps = ["@fsdk//:foo"])\n',
        "c/c.c": main_src("foo_value"),
        "s/BUILD": ('cc_test(name = "needs_trt", srcs = ["s.c"], '
                    'deps = ["@tsdk//:builder"])\n'),
        "s/s.c": main_src("trt_value"),
        "l/BUILD": 'cc_test(name = "needs_l", srcs = ["l.c"], deps = ["@lsdk//:ldemo"])\n',
        "l/l.c": main_src("ldemo_value"),
        "p/BUILD": 'cc_test(name = "needs_p", srcs = ["p.c"], deps = ["@psdk//:pdemo"])\n',
        "p/p.c": main_src("pdemo_value"),
        "q/BUILD": 'cc_test(name = "needs_q", srcs = ["q.c"], deps = ["@qsdk//:qdemo"])\n',
        "q/q.c": main_src("qdemo_value"),
    })
    ws = make_workspace(top / "ws", files, env=clean_env())
    _wrapper, log = logging_bazel(top)
    try:
        yield Case(ws, top, log)
    finally:
        ws.shutdown()


def test_every_case_fails_to_load_before_the_fix(case: Case) -> None:
    result = case.ws.bazel("test", "--keep_going", "//py:ext_test", "//v:needs_v",
                           "//c:needs_foo", "//s:needs_trt", "//other:all")
    assert result.returncode == 3, result.stderr[-3000:]
    assert "libydemo.so.13: cannot open shared object file" in case.ws.test_log(
        "py", "ext_test")
    assert "libwdemo.so.1: cannot open" in case.ws.test_log("v", "needs_v")
    assert "libfoo.so.3: cannot open" in case.ws.test_log("c", "needs_foo")
    assert f"{SENTINEL}: cannot open" in case.ws.test_log("s", "needs_trt")
    for passing in ("//other:needs_xy", "//other:needs_vw"):
        assert f"{passing}                       " in result.stdout + result.stderr


def test_the_edge_goes_into_the_sdk_and_bazel_analyses_it(case: Case) -> None:
    build = case.ws.root / "third_party" / "xsdk.BUILD"
    py_build = (case.ws.root / "py" / "BUILD").read_text()
    code, out, err = case.ldfix("fix", "--write", "//py:ext_test")
    assert code == 0, out + err[-3000:]
    # libxdemo.so.11 needs libydemo.so.13: whatever links xdemo (here the extension
    # the py_test loads) gets ydemo too, so the SDK's BUILD file carries the edge.
    text = build.read_text()
    assert 'cc_import(\n    name = "xdemo_import",' in text
    assert ('cc_library(\n    name = "xdemo",\n    deps = [\n        ":xdemo_import",\n'
            '        "@ysdk//:ydemo",\n    ],\n'
            '    visibility = ["//visibility:public"],\n)\n') in text
    assert (case.ws.root / "py" / "BUILD").read_text() == py_build
    assert "bazel-ldfix: wrote" in err
    # Bazel analysed the change (build --nobuild) with the user's arguments.
    assert "build //py:ext_test --nobuild --color=no --curses=no -- @xsdk//:xdemo" in \
        case.log.read_text()
    # A plain `bazel test` now passes: the extension loads what it needs.
    again = case.ws.bazel("test", "--test_output=all", "//py:ext_test")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "loaded _ext and the libraries it needs" in again.stdout


def test_a_change_bazel_rejects_is_restored_byte_for_byte(case: Case) -> None:
    build = case.ws.root / "third_party" / "vsdk.BUILD"
    build.write_bytes(build.read_bytes() + b"# \xff not UTF-8, kept\n")
    os.utime(build, ns=(1_000_000_000, 1_500_000_000))
    before = build.read_bytes()
    # The edge's import is staged for //other:needs_vw (built by the first test) and
    # visible to //other alone. For a script, one JSON document; for people, one line.
    code, out, err = case.ldfix("fix", "--write", "--json", "//v:needs_v")
    assert code == 68, out + err[-3000:]
    doc = json.loads(out)
    diff = doc["files"][0]["diff"]      # not UTF-8: the JSON encoder's base64 form
    assert b'+        "@wsdk//:wdemo",\n+    ],\n+    visibility = ["//visibility:public"],\n' \
        b'+)\n # \xff not UTF-8, kept\n' \
        in base64.b64decode(diff["base64"])
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("error: Bazel rejects the change: ERROR: ")
    assert "target '@wsdk//:wdemo' is not visible from target '@vsdk//:vdemo'" in last
    assert last.endswith("every file written was restored as it was")
    assert (doc["error"]["exit_code"], doc["analysis"]["accepted"]) == (68, False)
    assert doc["analysis"]["error"] in last
    assert [e["state"] for e in doc["edits"]] == ["rejected"]
    assert build.read_bytes() == before
    assert os.stat(build).st_mtime_ns == 1_500_000_000


def test_fix_json_lists_each_planned_edit(case: Case) -> None:
    build = str(case.ws.root / "third_party" / "fsdk.BUILD")
    os.utime(build, ns=(1_000_000_000, 1_500_000_000))
    before = Path(build).read_bytes()
    code, out, err = case.ldfix("fix", "--json", "//c:needs_foo")
    assert code == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["version"] == 1
    # Bazel analysed the change, then the file got its bytes and times back.
    assert doc["analysis"] == {"accepted": True, "error": None}
    assert "build //c:needs_foo --nobuild --color=no --curses=no -- @fsdk//:foo" in \
        case.log.read_text()
    assert Path(build).read_bytes() == before
    assert os.stat(build).st_mtime_ns == 1_500_000_000
    assert [(e["file"], e["kind"], e["attribute"], e["old"], e["new"], e["state"])
            for e in doc["edits"]] == [
        (build, "rule", "copy_file", None, doc["edits"][0]["new"], "planned"),
        (build, "set", "shared_library", "lib/libfoo.so", "lib/libfoo.so.3", "planned")]
    assert doc["edits"][0]["new"].startswith('copy_file(\n    name = "foo_libfoo_so_3",\n')
    assert all("//c:needs_foo needs libfoo.so.3" in e["why"] for e in doc["edits"])
    assert doc["files"][0]["diff"].startswith("--- a/third_party/fsdk.BUILD\n")


def test_a_soname_no_file_is_named_after_is_made_by_copy_file(case: Case) -> None:
    code, out, err = case.ldfix("fix", "--write", "--verify", "//c:needs_foo")
    assert code == 0, out + err[-3000:]
    text = (case.ws.root / "third_party" / "fsdk.BUILD").read_text()
    assert text == (
        'load("@bazel_skylib//rules:copy_file.bzl", "copy_file")\n\n'
        + import_build("foo", "lib/libfoo.so.3") + "\n"
        'copy_file(\n    name = "foo_libfoo_so_3",\n    src = "lib/libfoo.so",\n'
        '    out = "lib/libfoo.so.3",\n    allow_symlink = True,\n)\n')
    again = case.ws.bazel("test", "--test_output=all", "//c:needs_foo")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "\n3\n" in again.stdout


def test_a_sentinel_soname_is_never_linked(case: Case) -> None:
    before = (case.ws.root / "third_party" / "tsdk.BUILD").read_bytes()
    code, out, err = case.ldfix("fix", "--write", "//s:needs_trt")
    assert code == 68, out + err[-3000:]
    assert f"whose SONAME {SENTINEL} names no shared object: that library is not to be " \
           "linked" in out
    assert (case.ws.root / "third_party" / "tsdk.BUILD").read_bytes() == before
    assert not [p for p in case.ws.root.rglob(f"*{SENTINEL}*")]


def test_a_library_left_by_an_earlier_build_is_no_pass(case: Case) -> None:
    ws = case.ws
    first = ws.bazel("test", "//l:needs_l")
    assert first.returncode == 0, first.stderr[-3000:]
    # The BUILD change reverted (another branch): Bazel stages libldemo.so now, and the
    # earlier build's libldemo.so.4 stays in bazel-out, where the test still finds it.
    lsdk = ws.root / "third_party" / "lsdk.BUILD"
    lsdk.write_text(import_build("ldemo", "lib/libldemo.so"))
    by_accident = ws.bazel("test", "//l:needs_l")
    assert by_accident.returncode == 0, by_accident.stderr[-3000:]
    code, out, err = case.ldfix("fix", "--check", "//l:needs_l")
    assert code == 1, out + err[-3000:]
    assert '+    shared_library = "lib/libldemo.so.4",' in out
    code, out, err = case.ldfix("test", "//l:needs_l")
    assert code == 0, err[-3000:]
    warning = ("bazel-ldfix: warning: //l:needs_l loads libldemo.so.4 from a file no rule "
               "declares for it now:")
    lines = err.splitlines()
    at = lines.index(warning)
    assert lines[at + 1].startswith("bazel-ldfix:   ") and \
        lines[at + 1].endswith("/_solib_k8/_U@lsdk_S_S_Cldemo___Ulib/libldemo.so.4")
    assert all(len(line) <= 100 for line in lines[at + 2:at + 5])
    code, out, err = case.ldfix("env", "//l:needs_l")
    assert code == 0 and out == "", err[-3000:]   # nothing to add: it loads, by accident
    assert warning in err.splitlines()
    # (That Bazel itself fails the test where only the declared files are, on a remote
    # executor, is tests/bazel/test_execution_remote.py's.)
    code, out, err = case.ldfix("fix", "--write", "--verify", "//l:needs_l")
    assert code == 0, out + err[-3000:]
    assert logged_commands(case.log).count("test") >= 2


def test_a_system_provided_import_cannot_be_fixed(case: Case) -> None:
    build = case.ws.root / "third_party" / "psdk.BUILD"
    before = build.read_bytes()
    failed = case.ws.bazel("test", "//p:needs_p")
    assert failed.returncode == 3, failed.stderr[-3000:]
    assert "libpdemo.so.5: cannot open" in case.ws.test_log("p", "needs_p")
    for mode in ((), ("--check",), ("--write",)):
        code, out, err = case.ldfix("fix", *mode, "//p:needs_p")
        assert code == 68, out + err[-3000:]
        assert "# cannot fix: third_party/psdk.BUILD:3: @psdk//:pdemo says the system " \
               "provides its library at run time (system_provided)" in out
        assert "Install libpdemo.so.5 where the loader looks, or import " \
               "lib/libpdemo.so.5 as shared_library without system_provided" in out
        assert "--- a/" not in out and "+++ b/" not in out
        assert build.read_bytes() == before


def test_a_diff_bazel_rejects_is_never_shown(case: Case) -> None:
    # system_provided through a variable: the plan cannot read it, Bazel's analysis can.
    build = case.ws.root / "third_party" / "qsdk.BUILD"
    os.utime(build, ns=(1_000_000_000, 1_500_000_000))
    before = build.read_bytes()
    rejects = ("Bazel rejects the change: ERROR: ", "in cc_import rule @qsdk//:qdemo: "
               "'shared_library' shouldn't be specified when 'system_provided' is true")
    for mode in ((), ("--check",)):
        code, out, err = case.ldfix("fix", *mode, "//q:needs_q")
        assert code == 68, out + err[-3000:]
        assert "--- a/" not in out and "+++ b/" not in out
        line = out.rstrip().splitlines()[-1]
        assert line.startswith("# cannot fix: " + rejects[0]) and rejects[1] in line
        last = err.rstrip().splitlines()[-1]
        assert last.startswith("error: " + rejects[0]) and rejects[1] in last
        assert last.endswith("every file written was restored as it was")
        assert build.read_bytes() == before
        assert os.stat(build).st_mtime_ns == 1_500_000_000
    code, out, err = case.ldfix("fix", "--json", "//q:needs_q")
    assert code == 68, out + err[-3000:]
    doc = json.loads(out)
    assert doc["analysis"]["accepted"] is False and rejects[1] in doc["analysis"]["error"]
    assert [e["state"] for e in doc["edits"]] == ["rejected"]
    assert doc["error"]["exit_code"] == 68
    assert build.read_bytes() == before

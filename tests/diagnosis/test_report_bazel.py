"""`diagnose` against a real Bazel: real test failures, a real BEP file, fixes that work.

One workspace and one `bazel test` of every scenario serve the module; the diagnoses of
that run are computed once. The fixes are then applied (a flag, then the BUILD change)
and shown to make the tests pass, with as few Bazel runs as that takes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bazelws import BAZEL, LDFIX, Workspace, clean_env, make_workspace, sdk
from diagnose_fixtures import EXTENSION_SRC, versioned_lib
from elfbuild import patch_class, patch_machine

from bazel_ldfix import cli
from bazel_ldfix.diagnosis import logs, report

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

MAIN_XY = ("int xdemo_value(void); int ydemo_value(void);\n"
           "int main(void) { return xdemo_value() == 11 && ydemo_value() == 13 ? 0 : 1; }\n")
MAIN_X = "int xdemo_value(void);\nint main(void) { return xdemo_value() == 11 ? 0 : 1; }\n"
MAIN_W = "int wdemo_value(void);\nint main(void) { return wdemo_value() == 1 ? 0 : 1; }\n"
MAIN_V = "int vdemo_new(void);\nint main(void) { return vdemo_new() == 2 ? 0 : 1; }\n"
PY_IMPORT = ("import os, sys\n"
             "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
             "try:\n"
             "    import _ext\n"
             "except SystemError:\n"
             "    pass  # it loaded: the stub's PyInit__ext returns no module, on purpose\n")
PY_CTYPES = "import ctypes\nctypes.CDLL('libydemo.so.13')\n"
LOADER_TESTS = ["//t:needs_xy", "//t:needs_x", "//t:needs_w", "//t:needs_v", "//t:py_import",
                "//t:py_ctypes"]


def repository_build(library: str, path: str) -> str:
    return ('package(default_visibility = ["//visibility:public"])\n'
            f'cc_import(name = "{library}", shared_library = "{path}")\n'
            'exports_files(glob(["**"]))\n')


@dataclass
class Scenario:
    ws: Workspace
    top: Path
    output_base: str
    bep: Path
    doc: dict[str, Any]        # `diagnose --json` of the run, by default (command.log)
    text: str
    code: int

    def findings(self, test: str) -> list[dict[str, Any]]:
        return [f for f in self.doc["failures"] if f["test"] == test]

    def finding(self, test: str, soname: str) -> dict[str, Any]:
        found = [f for f in self.findings(test) if f["soname"] == soname]
        assert len(found) == 1, self.findings(test)
        return found[0]


def run_diagnose(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """The diagnose command, in this process (cli.py's once it has one)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["diagnose", *args])
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    top = tmp_path_factory.mktemp("diagnose")
    sdks = top / "sdks"
    ylib = sdk(sdks / "ysdk", "ydemo", "13")
    sdk(sdks / "xsdk", "xdemo", "11", needs=[ylib])
    arm = sdks / "ysdk" / "aarch64" / "libydemo.so.13"       # a decoy, passed over
    arm.parent.mkdir()
    arm.write_bytes(ylib.read_bytes())
    patch_machine(arm, 183)
    wlib = sdk(sdks / "wsdk", "wdemo", "1")
    lib32 = sdks / "wsdk" / "lib32" / "libwdemo.so.1"        # the same, as ELFCLASS32
    lib32.parent.mkdir()
    lib32.write_bytes(wlib.read_bytes())
    patch_class(lib32, 1)
    vsrc = "int vdemo_old(void){return 1;} int vdemo_new(void){return 2;}"
    vlib = versioned_lib(sdks / "vsdk" / "lib" / "libvdemo.so.3", "libvdemo.so.3",
                         ["VDEMO_1", "VDEMO_2"], src=vsrc)
    (vlib.parent / "libvdemo.so").symlink_to(vlib.name)
    old = versioned_lib(top / "old" / "lib" / "libvdemo.so.3", "libvdemo.so.3", ["VDEMO_1"],
                        src="int vdemo_old(void){return 1;}")
    workspace = ""
    files = {}
    for repo, library, path in (("xsdk", "xdemo", "lib/libxdemo.so"),
                                ("ysdk", "ydemo", "lib/libydemo.so"),
                                ("wsdk", "wdemo", "lib/libwdemo.so"),
                                ("vsdk", "vdemo", "lib/libvdemo.so")):
        workspace += (f'new_local_repository(name = "{repo}", path = "{sdks / repo}", '
                      f'build_file = "//third_party:{repo}.BUILD")\n')
        files[f"third_party/{repo}.BUILD"] = repository_build(library, path)
    files.update({
        "WORKSPACE": workspace,
        "third_party/BUILD": "",
        "t/BUILD": f"""
cc_test(name = "needs_xy", srcs = ["xy.c"], deps = ["@xsdk//:xdemo", "@ysdk//:ydemo"])
cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])
cc_test(name = "needs_w", srcs = ["w.c"], deps = ["@wsdk//:wdemo"],
        env = {{"LD_LIBRARY_PATH": "{lib32.parent}"}})
cc_test(name = "needs_v", srcs = ["v.c"], deps = ["@vsdk//:vdemo"],
        env = {{"LD_LIBRARY_PATH": "{old.parent}"}})
cc_binary(name = "_ext.so", srcs = ["ext.c"], linkshared = True, deps = ["@xsdk//:xdemo"])
py_test(name = "py_import", srcs = ["py_import.py"], data = [":_ext.so"])
py_test(name = "py_ctypes", srcs = ["py_ctypes.py"])
cc_test(name = "fails", srcs = ["fails.c"])
cc_test(name = "passes", srcs = ["passes.c"])
""",
        "t/xy.c": MAIN_XY, "t/x.c": MAIN_X, "t/w.c": MAIN_W, "t/v.c": MAIN_V,
        "t/ext.c": EXTENSION_SRC, "t/py_import.py": PY_IMPORT, "t/py_ctypes.py": PY_CTYPES,
        "t/fails.c": "int main(void) { return 1; }\n",
        "t/passes.c": "int main(void) { return 0; }\n",
    })
    ws = make_workspace(top / "ws", files, env=clean_env())
    bep = top / "bep.json"
    try:
        first = ws.bazel("test", "--keep_going", f"--build_event_json_file={bep}", "//t:all")
        assert first.returncode == 3, first.stderr[-3000:]
        output_base = ws.bazel("info", "output_base").stdout.strip()
        # `bazel info` rewrote command.log; run the tests again (cached, fast) so that the
        # last invocation is the test run, as it is for a user.
        again = ws.bazel("test", "--keep_going", "//t:all")
        assert again.returncode == 3, again.stderr[-3000:]
        code, out, _ = run_diagnose(["--json"], ws.root)
        text_code, text, _ = run_diagnose(["-v"], ws.root)
        assert text_code == code
        yield Scenario(ws, top, output_base, bep, json.loads(out), text, code)
    finally:
        ws.shutdown()


def test_the_failed_tests_of_the_last_invocation(scenario: Scenario) -> None:
    assert scenario.code == 1
    assert {f["test"] for f in scenario.doc["failures"]} == set(LOADER_TESTS)
    assert scenario.doc["other_failures"] == ["//t:fails"]
    assert "//t:passes" not in scenario.text
    assert scenario.doc["source"].startswith("the last `bazel test`")


def test_a_missing_library_with_the_three_fixes(scenario: Scenario) -> None:
    f = scenario.finding("//t:needs_xy", "libxdemo.so.11")
    ob = scenario.output_base
    exe = f"{ob}/execroot/ws/bazel-out/k8-fastbuild/bin/t/needs_xy"
    assert (f["error_kind"], f["seen_in_log"], f["needed_by"], f["needed_by_source"]) == (
        "cannot_open", True, [exe], "loader model")
    assert "error while loading shared libraries: libxdemo.so.11" in f["message"]
    assert f["log"] == f"{ob}/execroot/ws/bazel-out/k8-fastbuild/testlogs/t/needs_xy/test.log"
    # The file, wherever it was reached (the output_base or the real directory behind it).
    assert [os.path.realpath(p) for p in f["found"]] == [
        os.path.realpath(f"{ob}/external/xsdk/lib/libxdemo.so.11")]
    value = f"{ob}/external/xsdk/lib:{ob}/external/ysdk/lib"
    assert f["fix"]["flag"] == f"--test_env=LD_LIBRARY_PATH={value}"
    assert f["fix"]["command"] == "bazel-ldfix test //t:needs_xy"   # cli.main, a library call
    assert f["fix"]["bazelrc"].endswith(f"\ntest --test_env=LD_LIBRARY_PATH={value}")
    assert "@xsdk//:xdemo (a cc_import" in f["fix"]["build"]
    assert 'shared_library = "lib/libxdemo.so.11",  # was "lib/libxdemo.so"' \
        in f["fix"]["build"]
    assert "label" not in f["fix"]["build"]          # decoded and verified: no caveat


def test_the_next_missing_library_is_predicted(scenario: Scenario) -> None:
    f = scenario.finding("//t:needs_xy", "libydemo.so.13")
    ob = scenario.output_base
    assert (f["seen_in_log"], f["message"]) == (False, "")
    assert f["needed_by"][0] == f"{ob}/execroot/ws/bazel-out/k8-fastbuild/bin/t/needs_xy"
    # The file, wherever it was reached (the output_base or the real directory behind it).
    assert [os.path.realpath(p) for p in f["found"]] == [
        os.path.realpath(f"{ob}/external/ysdk/lib/libydemo.so.13")]
    # Found beside what the test's cc_import stages: nothing is walked, so no other copy
    # (the aarch64 one) is seen (tests/test_bazel_e2e.py covers one found by a walk).
    assert f["passed_over"] == []
    assert "@ysdk//:ydemo (a cc_import" in f["fix"]["build"]


def test_a_dependency_the_test_lacks_is_named_with_the_target_to_add(
        scenario: Scenario) -> None:
    f = scenario.finding("//t:needs_x", "libydemo.so.13")
    assert not f["seen_in_log"]
    # needs_x links libxdemo only; libydemo.so.13 is libxdemo.so.11's own dependency.
    assert f["needed_by"] == [f"{scenario.output_base}/external/xsdk/lib/libxdemo.so.11"]
    assert 'add "@ysdk//:ydemo" to the deps of //t:needs_x' in f["fix"]["build"]
    assert 'shared_library = "lib/libydemo.so.13"' in f["fix"]["build"]


def test_the_wrong_class(scenario: Scenario) -> None:
    f = scenario.finding("//t:needs_w", "libwdemo.so.1")
    ob = scenario.output_base
    assert (f["error_kind"], f["seen_in_log"]) == ("wrong_elf_class", True)
    assert "wrong ELF class: ELFCLASS32" in f["message"]
    # The file, wherever it was reached (the output_base or the real directory behind it).
    assert [os.path.realpath(p) for p in f["found"]] == [
        os.path.realpath(f"{ob}/external/wsdk/lib/libwdemo.so.1")]
    # The copies of the other class, which the loader went past: the 32-bit one.
    assert [(os.path.realpath(p["path"]), p["reason"]) for p in f["passed_over"]] == [
        (os.path.realpath(f"{ob}/external/wsdk/lib32/libwdemo.so.1"),
         "wrong ELF class: ELFCLASS32")]


def test_a_version_not_found(scenario: Scenario) -> None:
    f = scenario.finding("//t:needs_v", "libvdemo.so.3")
    ob = scenario.output_base
    assert (f["error_kind"], f["version"]) == ("version_not_found", "VDEMO_2")
    # The message names the sandbox path of the test; the finding, the real one.
    assert "/sandbox/" in f["message"]
    assert f["needed_by"] == [f"{ob}/execroot/ws/bazel-out/k8-fastbuild/bin/t/needs_v"]
    assert f["needed_by_source"] == "message"
    # The copy beside the file the test's cc_import stages comes first (the repair's choice);
    # that is the repository's real directory, behind output_base/external/vsdk.
    assert [os.path.realpath(p) for p in f["found"]] == [
        os.path.realpath(f"{ob}/external/vsdk/lib/libvdemo.so.3")]
    assert f["fix"]["flag"] == f"--test_env=LD_LIBRARY_PATH={os.path.dirname(f['found'][0])}"
    old = scenario.top / "old" / "lib"
    assert f"{old} is not a system directory" in f["fix"]["build"]
    assert 'shared_library = "lib/libvdemo.so.3"' in f["fix"]["build"]


def test_an_extension_module_that_python_cannot_import(scenario: Scenario) -> None:
    f = scenario.finding("//t:py_import", "libxdemo.so.11")
    assert f["message"].startswith("ImportError: libxdemo.so.11: cannot open shared object")
    assert len(f["needed_by"]) == 1 and f["needed_by"][0].endswith("/t/_ext.so")
    assert f["fix"]["command"] == "bazel-ldfix test //t:py_import"
    assert "@xsdk//:xdemo (a cc_import" in f["fix"]["build"]


def test_a_library_python_dlopens_by_name(scenario: Scenario) -> None:
    f = scenario.finding("//t:py_ctypes", "libydemo.so.13")
    ob = scenario.output_base
    assert f["message"].startswith("OSError: libydemo.so.13: cannot open shared object")
    assert f["needed_by_source"] == "dlopen"
    # The file, wherever it was reached (the output_base or the real directory behind it).
    assert [os.path.realpath(p) for p in f["found"]] == [
        os.path.realpath(f"{ob}/external/ysdk/lib/libydemo.so.13")]
    assert f["fix"]["command"].startswith("bazel test //t:py_ctypes --test_env=")
    assert 'data = ["@ysdk//:lib/libydemo.so.13"]' in f["fix"]["build"]


def test_the_text_output_after_the_summary_line(scenario: Scenario) -> None:
    assert "//t:needs_xy cannot load libxdemo.so.11: not found" in scenario.text
    assert "//t:needs_xy will next fail: cannot load libydemo.so.13" in scenario.text
    assert scenario.text.rstrip().splitlines()[-1].endswith(
        "6 failed tests were stopped by the dynamic loader; 1 failed for another reason: "
        "//t:fails")


def test_patterns_narrow_the_diagnosis(scenario: Scenario) -> None:
    code, out, _ = run_diagnose(["--json", "//t:needs_w", "//t:fails"], scenario.ws.root)
    doc = json.loads(out)
    assert code == 1
    assert {f["test"] for f in doc["failures"]} == {"//t:needs_w"}
    assert doc["other_failures"] == ["//t:fails"]
    # A pattern that selects no failed test (this one passed) is named, exit 2.
    code, out, err = run_diagnose(["//t:passes"], scenario.ws.root)
    assert code == 2 and "no failed test matches //t:passes" in err


def key(doc: dict[str, Any]) -> set[tuple[str, str, str, bool]]:
    return {(f["test"], f["soname"], f["error_kind"], f["seen_in_log"])
            for f in doc["failures"]}


def test_a_real_bep_file_gives_the_same_diagnosis(scenario: Scenario) -> None:
    code, out, _ = run_diagnose(["--json", "--bep", str(scenario.bep)], scenario.top)
    doc = json.loads(out)
    assert code == 1
    assert doc["source"] == f"the test results in {scenario.bep}"
    assert doc["output_base"] == scenario.output_base
    assert key(doc) == key(scenario.doc)
    assert doc["passed"] == 1


def test_a_truncated_bep_file(scenario: Scenario, tmp_path: Path) -> None:
    lines = scenario.bep.read_text().splitlines(keepends=True)
    # Cut inside the last test result's event: what an interrupted Bazel leaves.
    last = max(i for i, line in enumerate(lines) if '"testResult"' in line)
    short = tmp_path / "short.json"
    short.write_text("".join(lines[:last]) + lines[last][: len(lines[last]) // 2])
    code, out, _ = run_diagnose(["--json", "--bep", str(short)], scenario.top)
    doc = json.loads(out)
    assert code == 1
    assert any("ends in the middle of an event" in n for n in doc["notes"])
    assert key(doc) and key(doc) <= key(scenario.doc)


def test_logs_are_found_through_the_bazel_testlogs_link(scenario: Scenario) -> None:
    # command.log names the logs by their output_base path; bazel-testlogs leads there too.
    link = scenario.ws.root / "bazel-testlogs"
    assert os.path.realpath(link).startswith(scenario.output_base)
    found = logs.from_testlogs(os.path.realpath(link), scenario.output_base)
    assert {log.label for log in found.logs} >= set(LOADER_TESTS)


def test_the_flags_make_the_tests_pass(scenario: Scenario) -> None:
    dirs: list[str] = []
    for f in scenario.doc["failures"]:
        value = f["fix"]["flag"].split("=", 2)[2]
        dirs += [d for d in value.split(":") if d not in dirs]
    # libvdemo.so.3's directory goes first, as its finding says.
    v_dir = scenario.finding("//t:needs_v", "libvdemo.so.3")["found"][0].rsplit("/", 1)[0]
    dirs.remove(v_dir)
    flag = "--test_env=LD_LIBRARY_PATH=" + ":".join([v_dir, *dirs])
    result = scenario.ws.bazel("test", flag, *LOADER_TESTS)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_bazel_ldfix_test_run_is_followed_by_the_diagnosis(scenario: Scenario) -> None:
    # The repair cannot see a library loaded by dlopen("libydemo.so.13"): the test still
    # fails, and the diagnosis of that run says why.
    result = scenario.ws.ldfix("test", "//t:py_ctypes")
    assert result.returncode == 3, result.stderr[-3000:]
    after = report.after_test(scenario.output_base, result.returncode)
    assert after is not None
    assert [(f.test, f.soname) for f in after.findings] == [("//t:py_ctypes",
                                                             "libydemo.so.13")]
    # Bazel's summary goes to stdout as the test ends; the diagnosis follows, on stderr.
    assert "Executed 1 out of 1 test" in result.stdout
    ours = [line for line in result.stderr.splitlines() if line.startswith("bazel-ldfix: ")]
    assert re.search(r"^bazel-ldfix:     libydemo\.so\.13 +in \S+  for //t:py_ctypes$",
                     "\n".join(ours), re.M), ours
    plain = scenario.ws.ldfix("test", "--no-repair", "//t:needs_xy")
    assert plain.returncode == 3, plain.stderr[-3000:]
    ours = [line for line in plain.stderr.splitlines() if line.startswith("bazel-ldfix: ")]
    # Bazel's summary first, then the command that repairs it, then the library.
    assert ours[0] == f"bazel-ldfix: run first: {LDFIX} test //t:needs_xy"
    assert any(re.match(r"bazel-ldfix:     libxdemo\.so\.11 +in \S+  for //t:needs_xy$",
                        line) for line in ours), ours


def apply_build_fix(build: str, files: dict[Path, str], interface: bool) -> None:
    """Edit a repository's BUILD file as a finding's BUILD text says."""
    match = re.search(r"^(@\w+)//:(\w+) \(a cc_import", build, re.M)
    assert match, build
    repo = match.group(1)[1:]
    blocks = re.findall(r"    cc_import\(\n(.*?)\n    \)", build, re.S)
    block = blocks[1 if interface else 0]
    attrs = dict(re.findall(r'(\w+) = "([^"]+)"', block))
    path = next(p for p in files if p.name == f"{repo}.BUILD")
    text = files[path]
    old = re.search(r'cc_import\(name = "' + attrs["name"] + r'"[^)]*\)', text)
    assert old, text
    new = "cc_import(" + ", ".join(f'{k} = "{v}"' for k, v in attrs.items()) + ")"
    path.write_text(text.replace(old.group(0), new))


def test_the_hermetic_build_fix_makes_plain_bazel_test_pass(scenario: Scenario) -> None:
    third_party = scenario.ws.root / "third_party"
    files = {p: p.read_text() for p in third_party.glob("*.BUILD")}
    try:
        x = scenario.finding("//t:needs_xy", "libxdemo.so.11")["fix"]["build"]
        y = scenario.finding("//t:needs_xy", "libydemo.so.13")["fix"]["build"]
        apply_build_fix(x, files, interface=False)       # the versioned file itself
        apply_build_fix(y, files, interface=True)        # interface_library + versioned
        result = scenario.ws.bazel("test", "//t:needs_xy")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "PASSED" in result.stdout + result.stderr
    finally:
        for path, text in files.items():
            path.write_text(text)

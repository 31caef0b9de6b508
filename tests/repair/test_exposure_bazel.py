"""With a real Bazel: a repaired test loads what it was missing and nothing else changes.

Each test of the workspace prints every object it has loaded (``dl_iterate_phdr``, or
/proc/self/maps from Python), so what is asserted is what the test really loaded under
Bazel's sandbox, not what the model says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

SHOW = r"""
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
static int show(struct dl_phdr_info *i, size_t s, void *d) {
  if (i->dlpi_name[0]) printf("loaded %s\n", i->dlpi_name);
  return 0;
}
"""
SDK_TEST = SHOW + r"""
#include <string.h>
int foo_value(void); int bar_value(void); const char *zlibVersion(void);
int main(void) {
  dl_iterate_phdr(show, 0);
  return foo_value() == 3 && bar_value() == 2 && strcmp(zlibVersion(), "vendor") ? 0 : 1;
}
"""
ODD_TEST = SHOW + r"""
int odd_value(void);
int main(void) { dl_iterate_phdr(show, 0); return odd_value() == 17 ? 0 : 1; }
"""
EXTENSION = "int dep_value(void); int foo_value(void);\n" \
            "int ext_value(void) { return dep_value() + foo_value(); }\n"
PY_TEST = """
import ctypes, os, sys
ext = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "_ext.so"))
for line in open("/proc/self/maps"):
    if ".so" in line:
        print("loaded " + line.split()[-1])
sys.exit(0 if ext.ext_value() == 4 else 1)
"""


def _repository(name: str, path: Path, build: str) -> str:
    return (f'new_local_repository(name = "{name}", path = "{path}", '
            f"build_file_content = {json.dumps(build)})\n")


@dataclass
class Setup:
    ws: Workspace
    vsdk: Path        # the vendor SDK's lib/
    bar: Path         # the tests' own libbar.so.2


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    top = tmp_path_factory.mktemp("exposure")
    # The vendor SDK: the libfoo.so.3 the tests miss, an older libbar.so.2 and its own zlib.
    vsdk = top / "sdks" / "vsdk" / "lib"
    cc(vsdk / "libfoo.so.3", "-shared", "-Wl,-soname,libfoo.so.3",
       src="int foo_value(void){return 3;}")
    (vsdk / "libfoo.so").symlink_to("libfoo.so.3")
    cc(vsdk / "libbar.so.2", "-shared", "-Wl,-soname,libbar.so.2",
       src="int bar_value(void){return 1;}")
    cc(vsdk / "libz.so.1", "-shared", "-Wl,-soname,libz.so.1",
       src='const char *zlibVersion(void){return "vendor";}')
    # The tests' own libbar.so.2, imported by its versioned name (staged as it is).
    bar = cc(top / "sdks" / "barsdk" / "lib" / "libbar.so.2", "-shared",
             "-Wl,-soname,libbar.so.2", src="int bar_value(void){return 2;}")
    # A library no file is named after by its SONAME.
    odd = top / "sdks" / "oddsdk" / "lib"
    cc(odd / "libodd-3.17.0.so", "-shared", "-Wl,-soname,libodd.so.3",
       src="int odd_value(void){return 17;}")
    # Found by the extension's RUNPATH $ORIGIN only where its runfiles link is.
    dep = cc(top / "depdir" / "libdep.so.1", "-shared", "-Wl,-soname,libdep.so.1",
             src="int dep_value(void){return 1;}")
    public = 'package(default_visibility = ["//visibility:public"])\n'
    files = {
        "WORKSPACE": _repository("vsdk", vsdk.parent, public + 'cc_import(name = "foo", '
                                 'shared_library = "lib/libfoo.so")\n')
        + _repository("barsdk", bar.parent.parent, public + 'cc_import(name = "bar", '
                      'shared_library = "lib/libbar.so.2")\n')
        + _repository("oddsdk", odd.parent, public + 'cc_import(name = "odd", '
                      'shared_library = "lib/libodd-3.17.0.so")\n'),
        "t/BUILD": """
cc_test(name = "sdk_test", srcs = ["sdk.c"], deps = ["@vsdk//:foo", "@barsdk//:bar"],
        linkopts = ["-lz"])
cc_test(name = "odd_test", srcs = ["odd.c"], deps = ["@oddsdk//:odd"])
""",
        "t/sdk.c": SDK_TEST, "t/odd.c": ODD_TEST,
        "py/BUILD": f"""
cc_binary(name = "_ext.so", srcs = ["ext.c"], linkshared = True, deps = ["@vsdk//:foo"],
          linkopts = ["-L{dep.parent}", "-l:libdep.so.1", "-Wl,-rpath,$$ORIGIN"])
py_test(name = "ext_test", srcs = ["ext_test.py"], data = [":_ext.so", "libdep.so.1"])
""",
        "py/ext.c": EXTENSION, "py/ext_test.py": PY_TEST,
    }
    workspace = make_workspace(top / "ws", files, env=clean_env())
    (workspace.root / "py" / "libdep.so.1").write_bytes(dep.read_bytes())
    try:
        yield Setup(workspace, vsdk, bar)
    finally:
        workspace.shutdown()


def loaded(ws: Workspace, package: str, name: str) -> dict[str, str]:
    """What the test printed it loaded: each file's name to its real path."""
    out = {}
    for line in ws.test_log(package, name).splitlines():
        if line.startswith("loaded /"):
            path = line.removeprefix("loaded ")
            out[os.path.basename(path)] = os.path.realpath(path)
    return out


def test_the_sdk_directory_would_shadow_the_tests_own_libraries(setup: Setup) -> None:
    ws = setup.ws
    # The usual fix, the SDK's directory on LD_LIBRARY_PATH: the test loads the SDK's older
    # libbar.so.2 and its zlib, and fails.
    naive = ws.bazel("test", "//t:sdk_test", f"--test_env=LD_LIBRARY_PATH={setup.vsdk}")
    assert naive.returncode == 3
    got = loaded(ws, "t", "sdk_test")
    assert got["libbar.so.2"] == str(setup.vsdk / "libbar.so.2")
    assert got["libz.so.1"] == str(setup.vsdk / "libz.so.1")


def test_the_repair_gives_the_missing_library_alone(setup: Setup) -> None:
    ws = setup.ws
    result = ws.ldfix("test", "//t:sdk_test")
    assert result.returncode == 0, result.stderr[-3000:]
    got = loaded(ws, "t", "sdk_test")
    assert got["libfoo.so.3"] == str(setup.vsdk / "libfoo.so.3")
    assert got["libbar.so.2"] == str(setup.bar)
    assert not got["libz.so.1"].startswith(str(setup.vsdk))
    lines = [line for line in result.stderr.splitlines() if "libfoo.so.3 is in" in line]
    assert len(lines) == 1 and "given by a link" in lines[0] and "libz.so.1" in lines[0]
    assert "1 test repaired" in result.stderr


def test_prepended_before_the_callers_entry_the_sdk_still_shadows_nothing(
        setup: Setup) -> None:
    ws = setup.ws
    caller = str(setup.bar.parent)
    result = ws.ldfix("test", "--prepend", "//t:sdk_test",
                      f"--test_env=LD_LIBRARY_PATH={caller}")
    assert result.returncode == 0, result.stderr[-3000:]
    flag = next(line for line in result.stderr.splitlines() if "adding --test_env" in line)
    assert flag.endswith(f":{caller}") and "/external/vsdk" not in flag
    assert loaded(ws, "t", "sdk_test")["libbar.so.2"] == str(setup.bar)


def test_a_soname_no_file_is_named_after_is_given_by_a_link(setup: Setup) -> None:
    ws = setup.ws
    plain = ws.bazel("test", "//t:odd_test")
    assert plain.returncode == 3
    assert "libodd.so.3: cannot open shared object file" in ws.test_log("t", "odd_test")
    result = ws.ldfix("test", "//t:odd_test")
    assert result.returncode == 0, result.stderr[-3000:]
    assert loaded(ws, "t", "odd_test")["libodd.so.3"].endswith("/lib/libodd-3.17.0.so")
    assert "libodd-3.17.0.so has that SONAME" in result.stderr


def test_an_extension_opened_through_its_runfiles_link_finds_its_origin_there(
        setup: Setup) -> None:
    ws = setup.ws
    env = ws.ldfix("env", "--format", "json", "//py:ext_test")
    assert env.returncode == 0, env.stderr[-3000:]
    doc = json.loads(env.stdout)
    # libdep.so.1 is found through $ORIGIN where the extension's runfiles link is; only
    # the SDK's library is missing.
    assert [m["soname"] for m in doc["missing"]] == ["libfoo.so.3"]
    assert doc["tests"][0]["missing_after"] == []
    result = ws.ldfix("test", "//py:ext_test")
    assert result.returncode == 0, result.stderr[-3000:]
    got = loaded(ws, "py", "ext_test")
    assert got["libdep.so.1"] == str(ws.root / "py" / "libdep.so.1")
    assert got["libfoo.so.3"] == str(setup.vsdk / "libfoo.so.3")


def test_the_diagnosis_offers_the_missing_library_alone(setup: Setup) -> None:
    ws = setup.ws
    plain = ws.bazel("test", "//t:sdk_test")
    assert plain.returncode == 3
    doc = json.loads(ws.ldfix("diagnose", "--json").stdout)
    (failure,) = doc["failures"]
    assert failure["soname"] == "libfoo.so.3"
    flag = failure["fix"]["flag"]
    assert flag.startswith("--test_env=LD_LIBRARY_PATH=") and "/external/vsdk" not in flag
    # The value the diagnosis offers, given to the test as it is: it passes.
    given = ws.bazel("test", "//t:sdk_test", flag)
    assert given.returncode == 0, given.stderr[-2000:]
    assert loaded(ws, "t", "sdk_test")["libbar.so.2"] == str(setup.bar)

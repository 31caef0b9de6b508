"""With a real Bazel: what ``test`` says of a run is what the run's tests got.

A Python test opens ``libacme.so.3`` with ctypes, by name: no ELF file names it, so the
repair made before the run cannot see it. A cc_test links libfoo.so.3, which the repair
gives. Each test prints the objects it has loaded, so what is asserted is what it loaded.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    LDFIX,
    SHOWS_FOO,
    Workspace,
    clean_env,
    loaded,
    make_workspace,
    sdk,
)

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

ACME_TEST = """
import ctypes, sys
lib = ctypes.CDLL("libacme.so.3")
for line in open("/proc/self/maps"):
    if ".so" in line:
        print("loaded " + line.split()[-1])
sys.exit(0 if lib.acme_value() == 3 else 1)
"""


def _repository(name: str, path: Path, library: str) -> str:
    build = ('package(default_visibility = ["//visibility:public"])\n'
             f'cc_import(name = "{library}", shared_library = "lib/lib{library}.so")\n'
             'filegroup(name = "files", srcs = glob(["lib/*"]))\n')
    return (f'new_local_repository(name = "{name}", path = "{path}", '
            f"build_file_content = {json.dumps(build)})\n")


@dataclass
class Setup:
    ws: Workspace
    asdk: Path        # the SDK's lib/ that holds libacme.so.3


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    top = tmp_path_factory.mktemp("flowtest")
    sdk(top / "sdks" / "vsdk", "foo", "3")
    sdk(top / "sdks" / "asdk", "acme", "3")
    files = {
        "WORKSPACE": _repository("vsdk", top / "sdks" / "vsdk", "foo")
        + _repository("asdk", top / "sdks" / "asdk", "acme"),
        "t/BUILD": 'cc_test(name = "foo_test", srcs = ["foo.c"], deps = ["@vsdk//:foo"])\n'
                   'py_test(name = "acme_test", srcs = ["acme_test.py"], '
                   'data = ["@asdk//:files"])\n',
        "t/foo.c": SHOWS_FOO,
        "t/acme_test.py": ACME_TEST,
    }
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    try:
        yield Setup(workspace, top / "sdks" / "asdk" / "lib")
    finally:
        workspace.shutdown()


def test_env_does_not_claim_a_library_opened_at_run_time_loads(setup: Setup) -> None:
    result = setup.ws.ldfix("env", "//t:acme_test")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "every test loads" not in result.stderr
    assert "bazel-ldfix: nothing to add for what the tests link; libraries opened at run " \
        "time are not seen" in result.stderr.splitlines()


def test_a_library_opened_at_run_time_that_fails_points_at_the_rerun(setup: Setup) -> None:
    ws = setup.ws
    result = ws.ldfix("test", "//t:all")
    assert result.returncode == 3, result.stderr[-3000:]
    assert "libacme.so.3: cannot open shared object file" in ws.test_log("t", "acme_test")
    lines = result.stderr.splitlines()
    at = lines.index("bazel-ldfix: //t:acme_test failed to open libacme.so.3 at run time, "
                     "which no file names;")
    told = [lines[at], *itertools.takewhile(lambda line: line.startswith("bazel-ldfix:   "),
                                            lines[at + 1:])]
    assert " ".join(line.removeprefix("bazel-ldfix:").strip() for line in told) == (
        "//t:acme_test failed to open libacme.so.3 at run time, which no file names; "
        f"`{LDFIX} test --rerun-loader-failures //t:all` runs it once more with what this run "
        "revealed")
    # The command whole, on one line.
    assert any(f"`{LDFIX} test --rerun-loader-failures //t:all`" in line for line in told)



def test_the_summary_counts_every_test_that_loaded_and_names_what_each_was_given(
        setup: Setup) -> None:
    ws = setup.ws
    result = ws.ldfix("test", "--rerun-loader-failures", "//t:all", "--nocache_test_results")
    assert result.returncode == 0, result.stderr[-3000:]
    # /proc/self/maps names the real file, here the SDK's own.
    assert loaded(ws, "t", "acme_test")["libacme.so.3"] == str(setup.asdk / "libacme.so.3")
    assert loaded(ws, "t", "foo_test")["libfoo.so.3"].startswith(str(ws.output_base))
    (line,) = [line for line in result.stderr.splitlines() if "repaired" in line]
    assert line.startswith("bazel-ldfix: 2 tests repaired (libfoo.so.3, libacme.so.3); ")

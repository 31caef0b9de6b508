"""Two tests of one run that need different files under one SONAME, on a real Bazel 4.2.3.

``//t:t1`` links ``@sdk_v1//:foo`` and ``//t:t3`` links ``@sdk_v2//:foo``; both files have
the SONAME ``libfoo.so.3``. One LD_LIBRARY_PATH gives one of them to both, so
``bazel-ldfix test`` splits the run, and each test must load its own file: each prints its
``/proc/self/maps``, and that is what is read. ``//t:t0`` needs nothing and joins the first
run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, two_foo_sdks

from bazel_ldfix.bazel.exitcodes import worst

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

MAPS = ("#include <stdio.h>\n#include <string.h>\nint foo_version(void);\n"
        "int main(void) {\n"
        '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
        '  while (f && fgets(line, sizeof line, f)) if (strstr(line, "/libfoo")) '
        "fputs(line, stdout);\n"
        "  return foo_version() == %d ? 0 : 1;\n}\n")


@pytest.fixture(scope="module")
def two_sdks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("split")
    files = {
        "WORKSPACE": two_foo_sdks(top),
        "t/BUILD": ('cc_test(name = "t0", srcs = ["t0.c"])\n'
                    'cc_test(name = "t1", srcs = ["t1.c"], deps = ["@sdk_v1//:foo"])\n'
                    'cc_test(name = "t3", srcs = ["t3.c"], deps = ["@sdk_v2//:foo"])\n'),
        "t/t0.c": "int main(void) { return 0; }\n",
        "t/t1.c": MAPS % 1, "t/t3.c": MAPS % 2,
    }
    ws = make_workspace(top / "ws", files, env=clean_env())
    try:
        yield ws
    finally:
        ws.shutdown()


def mapped(ws: Workspace, name: str) -> set[str]:
    return {Path(line.split()[-1]).name for line in ws.test_log("t", name).splitlines()
            if "/libfoo" in line}


def test_one_value_gives_one_sdk_to_both_tests(two_sdks: Workspace) -> None:
    # The ground truth the split answers: with either directory, one test fails.
    for wrong, value in (("t3", "sdk_v1"), ("t1", "sdk_v2")):
        path = two_sdks.output_base / "external" / value / "lib"
        result = two_sdks.bazel("test", f"--test_env=LD_LIBRARY_PATH={path}", "//t:all")
        assert result.returncode == 3, result.stderr[-3000:]
        assert f"//t:{wrong} " in result.stdout + result.stderr


def test_the_split_run_gives_each_test_its_own_file(two_sdks: Workspace) -> None:
    result = two_sdks.ldfix("test", "//t:all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the run is split into 2 `bazel test` runs" in result.stderr
    assert "run 1 of 2: //t:t0, //t:t1" in result.stderr
    assert "run 2 of 2: //t:t3" in result.stderr
    assert mapped(two_sdks, "t1") == {"libfoo.so.3.1.0"}
    assert mapped(two_sdks, "t3") == {"libfoo.so.3.2.0"}


def test_quiet_test_says_nothing_of_the_split_as_quiet_env_says_nothing(
        two_sdks: Workspace) -> None:
    quiet = two_sdks.ldfix("test", "--quiet", "//t:all")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert [line for line in quiet.stderr.splitlines() if line.startswith("bazel-ldfix")] == []
    assert "//t:t3" in quiet.stdout + quiet.stderr       # Bazel's own summaries, both runs
    env = two_sdks.ldfix("env", "--quiet", "//t:all")
    assert env.returncode == 0, env.stderr[-3000:]
    assert [line for line in env.stderr.splitlines() if line.startswith("bazel-ldfix")] == []


def test_env_lists_the_groups_and_refuses_one_bazelrc_line(two_sdks: Workspace) -> None:
    flags = two_sdks.ldfix("env", "//t:all")
    assert flags.returncode == 0, flags.stderr[-3000:]
    lines = flags.stdout.splitlines()
    assert len(lines) == 2 and lines[0].endswith(" -- //t:t0 //t:t1")
    assert "sdk_v2/lib -- //t:t3" in lines[1]
    doc = json.loads(two_sdks.ldfix("env", "--format", "json", "//t:all").stdout)
    assert [g["labels"] for g in doc["groups"]] == [["//t:t0", "//t:t1"], ["//t:t3"]]
    assert [(c["label"], c["soname"]) for c in doc["conflicts"]] == [("//t:t3", "libfoo.so.3")]
    rc = two_sdks.ldfix("env", "--format", "bazelrc", "//t:all")
    assert rc.returncode == 1 and rc.stdout == ""
    last = rc.stderr.rstrip().splitlines()[-1]
    assert last.startswith("error: //t:t3 needs libfoo.so.3 from ")
    assert "one LD_LIBRARY_PATH cannot serve both" in last


@pytest.mark.parametrize(("codes", "merged"), [
    ((0, 0), 0), ((0, 3), 3), ((3, 0), 3), ((3, 1), 1), ((1, 8), 8),
    # A run that found no test to run (4) counts only when no run found one.
    ((4, 0), 0), ((0, 4), 0), ((4, 3), 3), ((4, 4), 4), ((4, 1), 1)])
def test_the_runs_exit_with_the_worst_code(codes: tuple[int, ...], merged: int) -> None:
    assert worst(codes) == merged

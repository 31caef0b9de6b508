"""`fix` after a reverted fix: what an earlier build left in bazel-out changes no verdict.

The SDK ships ``libw2.so.1``, which needs ``libw3.so.1``; its BUILD file imports each
unversioned file. One ``fix --write`` wraps ``w2`` (the import becomes ``w2_import``) and
imports ``libw3.so.1``; a build stages both. The BUILD file is then put back, as a branch
switch does, and the build's ``_solib_`` directories stay: ``_U@w2_S_S_Cw2_Uimport___Ulib``
(a rule that no longer exists) and ``libw3.so.1`` under ``w3``'s label (a file it no longer
imports). ``fix`` must then say what it says after ``bazel clean``, on a real Bazel 4.2.3.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, sdk

from bazel_ldfix.buildfix.planner import TestMissing, plan_fix

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TEST = "//t:needs_w2"
SDK_BUILD = ('package(default_visibility = ["//visibility:public"])\n'
             'cc_import(name = "w2", shared_library = "lib/libw2.so")\n'
             'cc_import(name = "w3", shared_library = "lib/libw3.so")\n')
# What `fix` writes for TEST from a clean output tree.
DIFF = ('--- a/third_party/w2.BUILD\n'
        '+++ b/third_party/w2.BUILD\n'
        '@@ -1,3 +1,11 @@\n'
        ' package(default_visibility = ["//visibility:public"])\n'
        '-cc_import(name = "w2", shared_library = "lib/libw2.so")\n'
        '-cc_import(name = "w3", shared_library = "lib/libw3.so")\n'
        '+cc_import(name = "w2_import", shared_library = "lib/libw2.so.1")\n'
        '+\n'
        '+cc_library(\n'
        '+    name = "w2",\n'
        '+    deps = [\n'
        '+        ":w2_import",\n'
        '+        ":w3",\n'
        '+    ],\n'
        '+)\n'
        '+cc_import(name = "w3", shared_library = "lib/libw3.so.1")\n')


@dataclass
class Reverted:
    ws: Workspace
    build: Path


@pytest.fixture(scope="module")
def reverted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reverted]:
    top = tmp_path_factory.mktemp("leftovers")
    lib = top / "sdks" / "w2"
    w3 = sdk(lib, "w3", "1")
    sdk(lib, "w2", "1", needs=[w3])
    ws = make_workspace(top / "ws", {
        "WORKSPACE": (f'new_local_repository(name = "w2", path = "{lib}", '
                      'build_file = "//third_party:w2.BUILD")\n'),
        "third_party/BUILD": "",
        "third_party/w2.BUILD": SDK_BUILD,
        "t/BUILD": 'cc_test(name = "needs_w2", srcs = ["t.c"], deps = ["@w2//:w2"])\n',
        "t/t.c": "int w2_value(void);\nint main(void) { return w2_value() == 1 ? 0 : 1; }\n",
    }, env=clean_env())
    try:
        yield Reverted(ws, ws.root / "third_party" / "w2.BUILD")
    finally:
        ws.shutdown()


def solib_dir(ws: Workspace) -> Path:
    exe = Path(os.path.realpath(ws.root / "bazel-bin" / "t" / "needs_w2"))
    return exe.parent.parent / "_solib_k8"


def test_the_first_fix_is_written_and_the_test_passes(reverted: Reverted) -> None:
    ws = reverted.ws
    check = ws.ldfix("fix", "--check", TEST)
    assert check.returncode == 1, check.stderr[-3000:]
    assert check.stdout == DIFF
    written = ws.ldfix("fix", "--write", "--verify", TEST)
    assert written.returncode == 0, written.stdout + written.stderr[-3000:]


def test_a_revert_leaves_the_solib_dirs_of_the_fix_and_the_right_diff(
        reverted: Reverted) -> None:
    ws = reverted.ws
    reverted.build.write_text(SDK_BUILD)        # a branch switch
    assert ws.bazel("build", TEST).returncode == 0
    solib = solib_dir(ws)
    assert (solib / "_U@w2_S_S_Cw2_Uimport___Ulib" / "libw2.so.1").exists()
    assert (solib / "_U@w2_S_S_Cw3___Ulib" / "libw3.so.1").exists()
    before = reverted.build.read_bytes()
    check = ws.ldfix("fix", "--check", TEST)
    assert check.returncode == 1, check.stdout + check.stderr[-3000:]
    assert check.stdout == DIFF
    assert "no call with name" not in check.stdout + check.stderr
    assert reverted.build.read_bytes() == before


def test_a_leftover_that_stages_a_tests_own_file_is_no_import(reverted: Reverted) -> None:
    # The repair may name the leftover copy as what needs libw3.so.1 (it found libw2.so.1
    # there): the plan must not take @w2//:w2_import, which no BUILD file declares now,
    # for the import that needs it.
    ws = reverted.ws
    exe = os.path.realpath(ws.root / "bazel-bin" / "t" / "needs_w2")
    left = solib_dir(ws) / "_U@w2_S_S_Cw2_Uimport___Ulib" / "libw2.so.1"
    test = TestMissing(TEST, exe, ("libw2.so.1", "libw3.so.1"), {"libw3.so.1": (str(left),)})
    plan = plan_fix([test], str(ws.root), str(ws.output_base))
    assert plan.problems == ()
    assert {(c.label, c.kind.value, c.attribute) for f in plan.files for c in f.changes} == {
        ("@w2//:w2", "set", "shared_library"), ("@w2//:w2", "wrap", "deps"),
        ("@w2//:w3", "set", "shared_library")}


def test_the_write_after_the_revert_passes_from_a_clean_tree(reverted: Reverted) -> None:
    ws = reverted.ws
    written = ws.ldfix("fix", "--write", TEST)
    assert written.returncode == 0, written.stdout + written.stderr[-3000:]
    assert ws.bazel("clean").returncode == 0
    plain = ws.bazel("test", TEST)
    assert plain.returncode == 0, plain.stderr[-3000:]

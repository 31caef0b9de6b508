"""Tests that load alike are resolved once; every other one gets the same answer moved.

The rule: a plan made with twins shared (``Session()``) equals, whole, the plan made with
every test resolved on its own (``Session(share=False)``), whatever differs between the
twins' trees; and twins are shared when nothing differs but their paths.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from bazelws import BAZEL, clean_env, import_repository, make_workspace, sdk
from elfbuild import lib, program
from modelhelp import plan_of

from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import Repair, TestInput


def _family(top: Path, count: int, *, manifest: bool = True) -> list[TestInput]:
    """``count`` cc_tests of one package as Bazel lays them out: each links the SDK's
    unversioned file (SONAME libsdk.so.11, not staged), finds it through
    ``$ORIGIN/../_solib_k8/sdk``, and stages it in its runfiles tree; with ``manifest``,
    the tree has the MANIFEST Bazel builds it from."""
    ext = top / "ob" / "external" / "sdk" / "lib"
    dep = lib(ext / "libdep.so.2")
    real = lib(ext / "libsdk.so.11", needs=[dep])
    os.symlink(real.name, ext / "libsdk.so")
    bin_dir = top / "ob" / "execroot" / "ws" / "bin"
    solib = bin_dir / "_solib_k8" / "sdk"
    solib.mkdir(parents=True)
    os.symlink(ext / "libsdk.so", solib / "libsdk.so")
    first = program(bin_dir / "p" / "t0", needs=[real], runpath="$ORIGIN/../_solib_k8/sdk")
    data = first.read_bytes()
    inputs = []
    for i in range(count):
        exe = bin_dir / "p" / f"t{i}"
        if i:
            exe.write_bytes(data)     # the same dynamic section, a file of its own
            exe.chmod(0o755)
        tree = Path(f"{exe}.runfiles")
        staged = tree / "ws" / "_solib_k8" / "sdk" / "libsdk.so"
        staged.parent.mkdir(parents=True)
        os.symlink(solib / "libsdk.so", staged)
        (tree / "ws" / "p").mkdir()
        os.symlink(exe, tree / "ws" / "p" / f"t{i}")
        if manifest:
            (tree / "MANIFEST").write_text(f"ws/_solib_k8/sdk/libsdk.so {solib}/libsdk.so\n"
                                           f"ws/p/t{i} {exe}\n")
        inputs.append(TestInput(f"//p:t{i}", str(exe)))
    return inputs


def _plan(output_base: Path, inputs: list[TestInput], session: Models,
          value: str | None = None) -> Repair:
    return plan_of(output_base, inputs, session, value)


def _shared_and_alone(output_base: Path, inputs: list[TestInput],
                      value: str | None = None) -> tuple[Repair, Repair, int]:
    shared = Models()
    together = _plan(output_base, inputs, shared, value)
    alone = _plan(output_base, inputs, Models(share=False), value)
    return together, alone, shared.twins


def test_twins_are_resolved_once_and_get_the_same_answer(tmp_path: Path) -> None:
    inputs = _family(tmp_path, 5)
    together, alone, moved = _shared_and_alone(tmp_path / "ob", inputs)
    assert together == alone
    assert together.added == (str(tmp_path / "ob" / "external" / "sdk" / "lib"),)
    assert all(t.missing_before and not t.missing_after for t in together.tests)
    # Two values of the search path (today's, the repaired one): one test of the five is
    # resolved under each, the four others are moved.
    assert moved == 2 * 4
    # The answer names each test's own files, not its twin's.
    missing = {m.soname: m for m in together.missing}
    assert set(missing["libsdk.so.11"].needed_by) == {t.executable for t in inputs}


def test_a_tree_without_a_manifest_is_resolved_on_its_own(tmp_path: Path) -> None:
    inputs = _family(tmp_path, 3, manifest=False)
    together, alone, moved = _shared_and_alone(tmp_path / "ob", inputs)
    assert together == alone
    assert moved == 0


def test_a_tree_changed_by_hand_is_not_given_its_twins_answer(tmp_path: Path) -> None:
    inputs = _family(tmp_path, 4)
    # After Bazel made it, one tree's staged library is replaced by another file of the
    # same name (its manifest still says otherwise): its test loads something else.
    other = lib(tmp_path / "other" / "libsdk.so", soname="libsdk.so.11")
    staged = Path(inputs[2].executable + ".runfiles/ws/_solib_k8/sdk/libsdk.so")
    staged.unlink()
    os.symlink(other, staged)
    together, alone, moved = _shared_and_alone(tmp_path / "ob", inputs)
    assert together == alone
    assert moved == 2 * 2   # the changed tree's test is resolved itself, both times


def test_a_search_path_naming_one_tree_is_not_moved(tmp_path: Path) -> None:
    inputs = _family(tmp_path, 3)
    staged_dir = inputs[0].executable + ".runfiles/ws/_solib_k8/sdk"
    together, alone, moved = _shared_and_alone(tmp_path / "ob", inputs, value=staged_dir)
    assert together == alone
    # Today's value names t0's tree: t0 is resolved on its own, t1 too (the first of the
    # others), t2 gets t1's answer. The repaired value keeps each test's own value, so it
    # names t0's tree too: the same again. The load without any value, against which what
    # the tests' own value shadows is told, names no tree: t1 and t2 get t0's.
    assert moved == 1 + 1 + 2


def test_a_twin_whose_needed_name_is_its_own_name_is_resolved_alone(tmp_path: Path) -> None:
    # A DT_NEEDED entry that is the name of one twin's executable could find that file in
    # its own package directory of the tree: the twins' trees differ there.
    inputs = _family(tmp_path, 3)
    ext = tmp_path / "ob" / "external" / "sdk" / "lib"
    named = lib(tmp_path / "elsewhere" / "t1", soname="t1")
    odd = program(tmp_path / "odd", needs=[ext / "libsdk.so.11", named],
                  runpath="$ORIGIN/../_solib_k8/sdk")
    for t in inputs:
        Path(t.executable).write_bytes(odd.read_bytes())
    # Relative to the test's working directory, <tree>/ws: its package directory, where
    # only t1's tree has a file named t1.
    together, alone, _ = _shared_and_alone(tmp_path / "ob", inputs, value="p")
    assert together == alone
    assert "t1" in together.tests[0].missing_before
    assert "t1" not in together.tests[1].missing_before


@pytest.mark.bazel
@pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")
def test_bazels_own_trees_share_and_answer_as_alone(tmp_path: Path) -> None:
    """On trees and manifests Bazel 4.2.3 made: tests of one package with the same deps
    are twins (one with a data file of its own too: its manifest differs), and the plan
    is the plan of every test resolved on its own."""
    dep = sdk(tmp_path / "sdks" / "dsdk", "ddemo", "2")
    sdk(tmp_path / "sdks" / "vsdk", "vdemo", "3", needs=[dep])
    source = "int vdemo_value(void);\nint main(void) { return vdemo_value() == 3 ? 0 : 1; }\n"
    files = {
        "WORKSPACE": import_repository("vsdk", tmp_path / "sdks" / "vsdk", "vdemo")
        + import_repository("dsdk", tmp_path / "sdks" / "dsdk", "ddemo"),
        "p/BUILD": "".join(
            f'cc_test(name = "t{i}", srcs = ["t.c"], deps = ["@vsdk//:vdemo", '
            f'"@dsdk//:ddemo"]{data})\n'
            for i, data in enumerate(["", "", "", ', data = ["extra.txt"]'])),
        "p/t.c": source, "p/extra.txt": "data\n",
    }
    ws = make_workspace(tmp_path / "ws", files, env=clean_env())
    try:
        built = ws.bazel("build", "//p:all")
        assert built.returncode == 0, built.stderr
        bin_dir = ws.root / "bazel-bin" / "p"
        inputs = [TestInput(f"//p:t{i}", str(bin_dir / f"t{i}")) for i in range(4)]
        together, alone, moved = _shared_and_alone(ws.output_base, inputs)
    finally:
        ws.shutdown()
    assert together == alone
    assert together.added and not together.unresolved
    assert all(set(t.missing_before) == {"libvdemo.so.3", "libddemo.so.2"}
               and not t.missing_after for t in together.tests)
    # t1 and t2 are t0's twins under both values; t3's data file changes its manifest.
    assert moved == 2 * 2


def test_script_twins_share_and_answer_as_alone(tmp_path: Path) -> None:
    """A test that is a script (sh_test, py_test) runs under this machine's interpreter,
    which would load each staged object: twins of scripts share that work too."""
    inputs = _family(tmp_path, 4)
    for t in inputs:
        Path(t.executable).write_text("#!/bin/sh\nexit 0\n")
    together, alone, moved = _shared_and_alone(tmp_path / "ob", inputs)
    assert together == alone
    assert all("libdep.so.2" in t.missing_before for t in together.tests)
    assert moved > 0


def test_a_fifo_for_a_manifest_is_not_waited_on(tmp_path: Path) -> None:
    """A FIFO planted where a manifest should be (in the tree, or beside the executable
    when there is no tree) is not opened for reading as a file would be: opening it would
    wait for a writer forever. Such a tree has no twin."""
    inputs = _family(tmp_path, 3, manifest=False)
    os.mkfifo(inputs[0].executable + ".runfiles/MANIFEST")
    tree = Path(inputs[1].executable + ".runfiles")
    shutil.rmtree(tree)
    os.mkfifo(inputs[1].executable + ".runfiles_manifest")

    def stuck(signum: int, frame: object) -> None:
        raise _Stuck("the plan waited on a FIFO")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(60)
    try:
        together, alone, moved = _shared_and_alone(tmp_path / "ob", inputs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert together == alone
    assert moved == 0


class _Stuck(Exception):
    """Not an OSError: nothing on the way catches it."""

"""One test as the repair reads it: its executable, its runfiles' objects, where it runs,
on a cc_test laid out as Bazel lays it out."""

from __future__ import annotations

import shutil
from pathlib import Path

from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.testread import Subject
from tests.repair.test_loadalike import _family


def test_a_cc_test_is_read_with_its_runfiles_objects_and_runs_in_its_workspace_dir(
        tmp_path: Path) -> None:
    [test] = _family(tmp_path, 1)
    subject = Subject.of(test, host_header())
    tree = f"{test.executable}.runfiles"
    assert subject.info is not None and subject.info.needed[0] == "libsdk.so.11"
    assert subject.extras == (f"{tree}/ws/_solib_k8/sdk/libsdk.so",)
    assert subject.cwd == f"{tree}/ws"
    assert (subject.skipped, subject.notes, subject.programs) == ((), (), ())


def test_the_manifest_names_what_is_staged_when_there_is_no_tree(tmp_path: Path) -> None:
    [test] = _family(tmp_path, 1)
    shutil.rmtree(f"{test.executable}.runfiles")
    solib = tmp_path / "ob" / "execroot" / "ws" / "bin" / "_solib_k8" / "sdk"
    Path(f"{test.executable}.runfiles_manifest").write_text(
        f"ws/_solib_k8/sdk/libsdk.so {solib}/libsdk.so\n"
        f"ws/gone/libg.so {tmp_path}/nowhere/libg.so\n")
    subject = Subject.of(test, host_header())
    assert subject.extras == (f"{solib}/libsdk.so",)
    assert subject.notes == (f"//p:t0: cannot read {tmp_path}/nowhere/libg.so: not on disk "
                             "(a remote cache that did not download it?)",)


def test_a_script_is_no_elf_and_runs_as_this_machines_programs(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "p" / "script_test"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    subject = Subject.of(TestInput("//p:script_test", str(script)), host_header())
    assert subject.info is None and subject.host == host_header()
    assert subject.extras == () and subject.cwd == str(script.parent)

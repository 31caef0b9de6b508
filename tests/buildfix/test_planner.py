"""The plan of ``fix`` on Bazel 4.2.3's layout, imitated: the change it plans is the one
that makes the real loader load the test once Bazel stages it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from diagnose_fixtures import fake_bazel

from bazel_ldfix.buildfix.change import Change, Kind
from bazel_ldfix.buildfix.planner import TestMissing, _unique, plan_fix

SOLIB_DIR = "_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib"


def set_to(path: str) -> Change:
    return Change("//p:x", Kind.SET, "shared_library", path, "test")


def test_two_fixes_that_disagree_are_a_conflict() -> None:
    problems: list[str] = []
    kept = _unique([set_to("a.so.1"), set_to("a.so.1"), set_to("a.so.2")], problems)
    assert kept == [set_to("a.so.1")]
    assert problems == ['conflicting fixes for //p:x: shared_library = "a.so.1" (test) and '
                        '"a.so.2" (test)']



def test_an_import_of_the_unversioned_file_gets_the_versioned_one(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    build = fake.output_base / "external" / "xsdk" / "BUILD.bazel"
    build.write_text('cc_import(name = "xdemo", shared_library = "lib/libxdemo.so")\n')
    test = TestMissing("//t:app_test", str(fake.executable), ("libxdemo.so.11",))
    plan = plan_fix([test], str(fake.workspace), str(fake.output_base))
    assert plan.problems == () and plan.unprovided == ()
    [f] = plan.files
    [change] = f.changes
    assert (change.label, change.kind, change.attribute, change.value, change.old) == (
        "@xsdk//:xdemo", Kind.SET, "shared_library", "lib/libxdemo.so.11", "lib/libxdemo.so")
    assert f.after == build.read_text().replace('"lib/libxdemo.so"', '"lib/libxdemo.so.11"')
    # Nothing is written by a plan; and it is one Bazel generates, so only described.
    assert build.read_text() == f.before and not f.editable and plan.described_only
    # Staged as Bazel stages the versioned file, the real test loads.
    (fake.bin / SOLIB_DIR / "libxdemo.so.11").symlink_to(fake.sdk_lib / "libxdemo.so.11")
    ran = subprocess.run([str(fake.executable)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


def test_the_plan_is_the_same_whatever_order_the_tests_come_in(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    (fake.output_base / "external" / "xsdk" / "BUILD.bazel").write_text(
        'cc_import(name = "xdemo", shared_library = "lib/libxdemo.so")\n')
    one = TestMissing("//t:app_test", str(fake.executable), ("libxdemo.so.11",))
    two = TestMissing("//t:also_test", str(fake.executable), ("libxdemo.so.11",))
    first = plan_fix([one, two], str(fake.workspace), str(fake.output_base))
    second = plan_fix([two, one], str(fake.workspace), str(fake.output_base))
    assert [f.after for f in first.files] == [f.after for f in second.files]
    assert [c.value for f in first.files for c in f.changes] == ["lib/libxdemo.so.11"]

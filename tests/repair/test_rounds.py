"""The rounds of one group: what the tests miss, found round after round through every
level of the closure, and the value that gives it, checked by running the real tests."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

from elfbuild import lib, program
from modelhelp import resolver

from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import Part, TestInput
from bazel_ldfix.repair.rounds import plan_rounds
from bazel_ldfix.repair.setting import PlanContext, Setting


def _layout(top: Path) -> list[TestInput]:
    """A test that finds libsdk.so (SONAME libsdk.so.11) in its _solib_ directory; the
    versioned file is in @sdk, and what it needs, libdep.so.2, only in @dep."""
    ext = top / "ob" / "external"
    dep = lib(ext / "dep" / "lib" / "libdep.so.2")
    real = lib(ext / "sdk" / "lib" / "libsdk.so.11", needs=[dep])
    os.symlink(real.name, real.parent / "libsdk.so")
    solib = top / "ob" / "execroot" / "ws" / "bin" / "_solib_k8" / "sdk"
    solib.mkdir(parents=True)
    os.symlink(real.parent / "libsdk.so", solib / "libsdk.so")
    exe = program(solib.parent.parent / "p" / "t", needs=[real],
                  runpath="$ORIGIN/../_solib_k8/sdk")
    return [TestInput("//p:t", str(exe))]


def _rounds(top: Path, inputs: list[TestInput], base: tuple[str, ...] = (), *,
            search: bool = True, prepend: bool = False) -> Part:
    models = Models()
    env = TestEnvironment((), "nothing", {t.label: None for t in inputs})
    context = PlanContext(str(top / "ob"), resolver(models), models=models,
                          host=host_header(), setting=Setting(prepend=prepend))
    return plan_rounds(inputs, env, context, base, search=search)


def _runs(executable: str, library_path: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env.update({"LD_LIBRARY_PATH": library_path} if library_path else {})
    return subprocess.run([executable], env=env, capture_output=True).returncode


def test_a_dependency_the_first_round_reveals_is_found_in_the_next(tmp_path: Path) -> None:
    inputs = _layout(tmp_path)
    part = _rounds(tmp_path, inputs)
    ext = tmp_path / "ob" / "external"
    assert part.given.added == (str(ext / "sdk" / "lib"), str(ext / "dep" / "lib"))
    [test] = part.tests
    assert test.missing_before == ("libsdk.so.11",) and test.missing_after == ()
    needers = {m.soname: m.needed_by for m in part.missing}
    assert needers == {"libsdk.so.11": (inputs[0].executable,),
                       "libdep.so.2": (str(ext / "sdk" / "lib" / "libsdk.so.11"),)}
    assert _runs(inputs[0].executable, None) == 127
    assert _runs(inputs[0].executable, part.given.ld_library_path) == 0


def test_without_search_only_what_is_missing_is_said(tmp_path: Path) -> None:
    part = _rounds(tmp_path, _layout(tmp_path), search=False)
    assert part.given.added == () and part.missing == ()
    assert part.tests[0].missing_after == ("libsdk.so.11",)


def test_the_base_comes_first_unless_the_added_are_prepended(tmp_path: Path) -> None:
    inputs = _layout(tmp_path)
    after = _rounds(tmp_path, inputs, ("/opt/base",))
    before = _rounds(tmp_path, inputs, ("/opt/base",), prepend=True)
    added = ":".join(after.given.added)
    assert after.given.ld_library_path == f"/opt/base:{added}"
    assert before.given.ld_library_path == f"{added}:/opt/base"
    assert dataclasses.replace(before.given, prepend=False) == after.given
    assert _runs(inputs[0].executable, after.given.ld_library_path) == 0

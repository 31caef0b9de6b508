"""A program in a test's runfiles is a load of its own, which the repair models.

An ``sh_test`` or ``py_test`` that runs a ``cc_binary`` from its ``data`` stops in the
loader when the binary does: the binary is a process of its own, whose loader starts from
the binary's DT_NEEDED, its RUNPATH and its ``$ORIGIN``. The trees are laid out as Bazel's
build-runfiles lays them out, with real ELF files; each program is only read by the model.
The real loader is asked too: the program is run through its runfiles path.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from elfbuild import cc, lib, program
from foreign import aarch64_program
from runfilestree import both_ways, lay_out, tree_of

from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.diagnosis.model import HOST_LOADERS
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext
from bazel_ldfix.repair.testread import Subject


def script(path: Path, text: str = "#!/bin/sh\nexec ws/app/tool\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def plan(label: str, executable: Path, output_base: Path) -> Repair:
    env = TestEnvironment((), "nothing", {label: None})
    context = PlanContext(str(output_base), HOST_LOADERS)
    return plan_repair([TestInput(label, str(executable))], env, context)


def tool_tree(tmp_path: Path, runpath: str) -> tuple[Path, Path, Path]:
    """``bin/app/run_tool``, a script whose runfiles hold ``bin/app/tool``: a program that
    needs libxdemo.so.11, with ``runpath``. The SDK's file sits in ``sdk/lib``; the tree
    stages it under its unversioned name only, as a cc_import of ``libxdemo.so`` does."""
    sdk = lib(tmp_path / "ob" / "external" / "xsdk" / "lib" / "libxdemo.so.11")
    (sdk.parent / "libxdemo.so").symlink_to(sdk.name)
    tool = program(tmp_path / "bin" / "app" / "tool", needs=[sdk], runpath=runpath)
    test = script(tmp_path / "bin" / "app" / "run_tool")
    tree_of(test, [f"ws/app/run_tool {test}", f"ws/app/tool {tool}",
                   f"ws/_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib/libxdemo.so {sdk.parent}/libxdemo.so"])
    return test, tool, sdk


def test_a_script_that_runs_a_program_of_its_runfiles_misses_what_the_program_misses(
        tmp_path: Path) -> None:
    test, _tool, sdk = tool_tree(tmp_path, "$ORIGIN/../_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib")
    from_manifest, walked = both_ways("//app:run_tool", test)
    assert from_manifest == walked
    assert walked.programs == (f"{test}.runfiles/ws/app/tool",)
    result = plan("//app:run_tool", test, tmp_path / "ob")
    (only,) = result.tests
    assert only.missing_before == ("libxdemo.so.11",)
    assert only.programs == walked.programs
    (missing,) = result.missing
    assert missing.dir == str(sdk.parent)
    assert missing.needed_by == (f"{test}.runfiles/ws/app/tool",)
    # The real loader says the same of the program started from the tree.
    real = subprocess.run([f"{test}.runfiles/ws/app/tool"], capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", "")})
    assert "libxdemo.so.11: cannot open shared object file" in real.stderr
    given = subprocess.run([f"{test}.runfiles/ws/app/tool"], capture_output=True, text=True,
                           env={"LD_LIBRARY_PATH": result.ld_library_path or ""})
    assert given.returncode == 0, given.stderr


def test_a_program_s_origin_is_where_its_file_really_is(tmp_path: Path) -> None:
    """The kernel starts it, and /proc/self/exe resolves the tree's links: a RUNPATH of
    ``$ORIGIN/../lib`` leads beside the real file, not into the runfiles tree."""
    test, tool, _sdk = tool_tree(tmp_path, "$ORIGIN/../lib")
    beside = tool.parent.parent / "lib"
    beside.mkdir()
    (beside / "libxdemo.so.11").symlink_to(tmp_path / "ob/external/xsdk/lib/libxdemo.so.11")
    result = plan("//app:run_tool", test, tmp_path / "ob")
    assert result.tests[0].missing_before == ()
    real = subprocess.run([f"{test}.runfiles/ws/app/tool"], capture_output=True, text=True,
                          env={})
    assert real.returncode == 0, real.stderr


def test_a_cc_test_that_runs_a_program_misses_what_the_program_misses(tmp_path: Path) -> None:
    _script, tool, _sdk = tool_tree(tmp_path, "$ORIGIN/../_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib")
    cc_test = program(tmp_path / "bin" / "app" / "tool_test")
    tree_of(cc_test, [f"ws/app/tool_test {cc_test}", f"ws/app/tool {tool}"])
    result = plan("//app:tool_test", cc_test, tmp_path / "ob")
    assert result.tests[0].missing_before == ("libxdemo.so.11",)
    assert result.tests[0].programs == (f"{cc_test}.runfiles/ws/app/tool",)


def test_what_is_no_program_of_the_tree_is_not_one(tmp_path: Path) -> None:
    """A script, an ELF program without an execute bit, a library with one, and the
    test's own executable are not programs the test starts."""
    src = tmp_path / "src"
    plain = program(src / "plain")
    plain.chmod(0o644)
    odd = lib(src / "odd_plugin", soname="libodd.so.1")
    odd.chmod(0o755)
    shell = script(src / "run.sh")
    runs = program(src / "runs")
    exe = tmp_path / "bin" / "t" / "t_test"
    lay_out(exe, [f"ws/t/t_test {exe}", f"ws/data/plain {plain}", f"ws/data/odd_plugin {odd}",
                  f"ws/data/run.sh {shell}", f"ws/data/runs {runs}",
                  f"ws/data/again {runs}"])
    from_manifest, walked = both_ways("//t:t_test", exe)
    assert from_manifest == walked
    # One file through two paths counts once, where it sorts first.
    assert walked.programs == (f"{exe}.runfiles/ws/data/again",)


def test_a_program_of_another_machine_is_not_modelled(tmp_path: Path) -> None:
    arm = aarch64_program(tmp_path / "src" / "arm_tool")
    arm.chmod(0o755)
    test = script(tmp_path / "bin" / "t" / "t_test")
    tree_of(test, [f"ws/t/t_test {test}", f"ws/t/arm_tool {arm}"])
    subject = Subject.of(TestInput("//t:t_test", str(test)), host_header())
    assert subject.programs == ()


def test_a_pie_and_a_fixed_address_program_are_both_programs(tmp_path: Path) -> None:
    pie = program(tmp_path / "src" / "pie")
    fixed = cc(tmp_path / "src" / "fixed", "-no-pie", src="int main(void){return 0;}")
    test = script(tmp_path / "bin" / "t" / "t_test")
    tree_of(test, [f"ws/t/t_test {test}", f"ws/t/pie {pie}", f"ws/t/fixed {fixed}"])
    subject = Subject.of(TestInput("//t:t_test", str(test)), host_header())
    assert subject.programs == (f"{test}.runfiles/ws/t/fixed", f"{test}.runfiles/ws/t/pie")

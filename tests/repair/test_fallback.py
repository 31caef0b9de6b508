"""Each kind of file the repair cannot model is skipped with its reason, and the plan goes on.

Real files: libraries linked for aarch64 and for 32-bit x86, a linker script, a text file, a
Git LFS pointer, a truncated library, a FIFO, a dangling symlink and a file that vanishes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import empty, lfs_pointer, lib, truncated
from foreign import aarch64_lib, aarch64_program, i386_lib, linker_script, text_file

from bazel_ldfix import elf
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.loader.closure import Options, cache_lookup, host_header, host_of, interp_for
from bazel_ldfix.loader.resolution import Environment
from bazel_ldfix.loader.search import Loader, Loaders
from bazel_ldfix.repair import fallback
from bazel_ldfix.repair.fallback import Fallback, SkipKind, Skipped
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.setting import PlanContext
from bazel_ldfix.repair.testread import Subject


def kind_of(path: Path) -> SkipKind | None:
    verdict = fallback.examine(str(path), host_header())
    return verdict.kind if isinstance(verdict, Skipped) else None


def test_a_library_of_this_machine_is_taken(tmp_path: Path) -> None:
    good = lib(tmp_path / "libgood.so.1")
    assert fallback.examine(str(good), host_header()) == elf.read_header(str(good))


@pytest.mark.parametrize(("make", "kind"), [
    (lambda p: aarch64_lib(p, p.name), SkipKind.OTHER_MACHINE),
    (lambda p: i386_lib(p, p.name), SkipKind.OTHER_CLASS),
    (linker_script, SkipKind.LINKER_SCRIPT),
    (text_file, SkipKind.NOT_ELF),
    (lfs_pointer, SkipKind.NOT_ELF),
    (empty, SkipKind.NOT_ELF),
])
def test_each_kind_of_file_is_skipped_with_its_reason(
        tmp_path: Path, make: Callable[[Path], Path], kind: SkipKind) -> None:
    path = make(tmp_path / "libodd.so")
    verdict = fallback.examine(str(path), host_header())
    assert isinstance(verdict, Skipped) and verdict.kind is kind
    assert verdict.reason and str(path) in verdict.note()


def test_a_truncated_library_is_malformed_in_the_loaders_words(tmp_path: Path) -> None:
    whole = lib(tmp_path / "libwhole.so.1")
    for size in (200, 1000):
        cut = truncated(tmp_path / f"libcut{size}.so", whole, size)
        verdict = fallback.examine(str(cut), host_header())
        assert isinstance(verdict, Skipped) and verdict.kind is SkipKind.MALFORMED
        assert verdict.reason.startswith("the loader would refuse it: ")
    short = truncated(tmp_path / "libshort.so", whole, 20)
    assert kind_of(short) is SkipKind.MALFORMED


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    assert kind_of(fifo) is SkipKind.NOT_A_FILE   # an open would block: the test would hang


def test_a_dangling_symlink_and_a_directory(tmp_path: Path) -> None:
    link = tmp_path / "libgone.so"
    link.symlink_to(tmp_path / "nowhere.so")
    verdict = fallback.examine(str(link), host_header())
    assert isinstance(verdict, Skipped) and verdict.kind is SkipKind.GONE
    assert "dangling symlink" in verdict.reason
    (tmp_path / "libdir.so").mkdir()
    assert kind_of(tmp_path / "libdir.so") is SkipKind.NOT_A_FILE


def test_an_executable_named_like_a_library(tmp_path: Path) -> None:
    from elfbuild import cc

    exe = cc(tmp_path / "libexe.so", "-no-pie", src="int main(void){return 0;}")
    assert kind_of(exe) is SkipKind.NOT_SHARED


def make_loader(info: elf.ElfInfo, env: Environment) -> Loader:
    return Loader(host_of(interp_for(info)), env)


def cache_for(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
    return cache_lookup(info, Options())


def script_test(tmp_path: Path) -> tuple[Path, Path]:
    """A test that is a script, whose runfiles hold one good library and every odd file."""
    exe = tmp_path / "bin" / "t" / "odd_test"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    odd = exe.parent / "odd_test.runfiles" / "sdk" / "odd"
    missing_dep = lib(tmp_path / "elsewhere" / "libdep.so.2")
    lib(odd / "libgood.so.1", needs=[missing_dep])
    aarch64_lib(odd / "libarm64.so", "libarm64.so")
    i386_lib(odd / "libi386.so", "libi386.so")
    linker_script(odd / "libscript.so")
    text_file(odd / "libtext.so")
    os.mkfifo(odd / "libfifo.so")
    (odd / "libgone.so").symlink_to("nowhere.so")
    return exe, missing_dep


def test_the_plan_goes_on_past_every_odd_file(tmp_path: Path) -> None:
    # Before, the aarch64 library alone stopped everything: "the program interpreter
    # /lib/ld-linux-aarch64.so.1 is not installed on this machine".
    exe, missing_dep = script_test(tmp_path)
    (tmp_path / "ob" / "external" / "dep").mkdir(parents=True)
    (tmp_path / "ob" / "external" / "dep" / "libdep.so.2").write_bytes(missing_dep.read_bytes())
    env = TestEnvironment((), "nothing", {"//t:odd_test": None})
    context = PlanContext(str(tmp_path / "ob"), Loaders(make_loader, cache_for))
    result = plan_repair([TestInput("//t:odd_test", str(exe))], env, context)
    kinds = {os.path.basename(s.path): s.kind for s in result.skipped}
    assert kinds == {"libarm64.so": SkipKind.OTHER_MACHINE, "libi386.so": SkipKind.OTHER_CLASS,
                     "libscript.so": SkipKind.LINKER_SCRIPT, "libtext.so": SkipKind.NOT_ELF,
                     "libfifo.so": SkipKind.NOT_A_FILE, "libgone.so": SkipKind.GONE}
    (test,) = result.tests
    assert test.missing_before == ("libdep.so.2",) and test.missing_after == ()
    assert result.added == (str(tmp_path / "ob" / "external" / "dep"),)


def test_a_file_that_vanishes_after_the_walk_is_skipped(tmp_path: Path) -> None:
    exe, _ = script_test(tmp_path)
    good = exe.parent / "odd_test.runfiles" / "sdk" / "odd" / "libgood.so.1"
    subject = Subject.of(TestInput("//t:odd_test", str(exe)), host_header())
    assert subject.extras == (str(good),)
    good.unlink()
    (out,) = subject.resolve(Loaders(make_loader, cache_for), None, extras=True)
    assert isinstance(out, Skipped) and out.kind is SkipKind.GONE


def test_a_test_built_for_another_machine_is_skipped_not_fatal(tmp_path: Path) -> None:
    exe = aarch64_program(tmp_path / "bin" / "t" / "arm_test")
    assert not os.path.exists("/lib/ld-linux-aarch64.so.1"), "an aarch64 loader is installed"
    env = TestEnvironment((), "nothing", {"//t:arm_test": None})
    context = PlanContext(str(tmp_path / "ob"), Loaders(make_loader, cache_for))
    result = plan_repair([TestInput("//t:arm_test", str(exe))], env, context)
    (skip,) = result.skipped
    assert (skip.path, skip.kind) == (str(exe), SkipKind.NO_LOADER)
    assert "/lib/ld-linux-aarch64.so.1 is not installed" in skip.reason
    assert result.flags == ()


def test_attempt_turns_errors_and_bugs_into_one_line() -> None:
    from bazel_ldfix.errors import BazelError, BazelNotFoundError

    assert fallback.attempt(lambda: 5) == 5

    def step_fails() -> int:
        raise BazelError("`bazel query` failed", ["bazel", "query"], 7, "ERROR: a\nERROR: b")

    fell = fallback.attempt(step_fails)
    assert fell == Fallback("`bazel query` failed (exit code 7)")
    assert "\n" not in fell.message()

    def bug() -> int:
        table: dict[str, int] = {}
        return table["x"]

    fell = fallback.attempt(bug)
    assert isinstance(fell, Fallback)
    assert fell.reason.startswith("internal error, please report it: KeyError: 'x' (")

    def not_installed() -> int:
        raise BazelNotFoundError("cannot run bazel: No such file or directory")

    with pytest.raises(BazelNotFoundError):
        fallback.attempt(not_installed)

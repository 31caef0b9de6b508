"""What one command remembers of files gives the same answers as reading them again.

The loader model with a memo (``bazel_ldfix.fs.memo``) must load exactly what it loads without
one: every conformance rule is run again with a memo, cold and warm, and the three
resolutions compared whole (search steps and rejected candidates included). The memo's own
parts are checked against what they stand for: ``os.path.realpath``, ``open``, a file
replaced while the command runs.
"""

from __future__ import annotations

import inspect
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from elfbuild import lib, patch_machine, program

from bazel_ldfix import elf
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.resolution import Environment, Resolution
from bazel_ldfix.loader.search import Loader, Loaders
from bazel_ldfix.loader.verify import verify, verify_in
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.setting import PlanContext
from tests.loader import test_search


class _Both(Loader):
    """The model with and without a memo, asserted to agree; the memo's answer is used."""

    def resolve(self, path: str, extra: Sequence[str] = (),
                info: elf.ElfInfo | None = None) -> Resolution:
        plain = Loader(self.host, self.env).resolve(path, extra, info)
        memo = Memo()
        cold = Loader(self.host, self.env, memo).resolve(path, extra, info)
        warm = Loader(self.host, self.env, memo).resolve(path, extra, info)
        assert cold == plain
        assert warm == plain
        assert [lib.info for lib in warm.libraries] == [lib.info for lib in plain.libraries]
        return warm


_RULES = sorted((name, func) for name, func in vars(test_search).items()
                if name.startswith("test_") and callable(func)
                and list(inspect.signature(func).parameters) == ["tmp_path"])


@pytest.mark.parametrize("rule", [f for _, f in _RULES], ids=[n for n, _ in _RULES])
def test_every_loader_rule_holds_with_a_memo(rule: Callable[[Path], None], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_search, "Loader", _Both)
    rule(tmp_path)


def test_hwcaps_subdirectories_hold_with_a_memo(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_search, "Loader", _Both)
    for sub in ("glibc-hwcaps/x86-64-v2", "tls", "x86_64"):
        test_search.test_glibc_hwcaps_and_legacy_subdirectories_are_preferred(
            tmp_path / sub.replace("/", "_"), sub)


def test_a_long_search_list_is_searched_as_without_a_memo(tmp_path: Path) -> None:
    from bazel_ldfix.loader.closure import Options, loader_for

    dirs = [tmp_path / f"d{i}" for i in range(14)]
    for d in dirs:
        d.mkdir()
    patch_machine(lib(dirs[3] / "libx.so.1"), 183)         # passed over: wrong machine
    (dirs[4] / "glibc-hwcaps" / "x86-64-v2").mkdir(parents=True)
    lib(dirs[4] / "glibc-hwcaps" / "x86-64-v2" / "liby.so.1")
    lib(dirs[9] / "libx.so.1")
    lib(dirs[12] / "libz.so.1")
    os.chmod(dirs[6], 0o311)                                  # cannot be listed
    os.symlink("loop", dirs[7] / "loop")
    libs = [lib(tmp_path / "link" / n) for n in ("libx.so.1", "liby.so.1", "libz.so.1")]
    app = program(tmp_path / "app", needs=[*libs, lib(tmp_path / "link" / "libq.so.1")])
    value = ":".join([*map(str, dirs[:8]), "", f"{dirs[7]}/loop", *map(str, dirs[8:])])
    info = elf.read_elf(str(app))
    plain = loader_for(info, Options(library_path=value, cwd=str(dirs[12])))
    try:
        res = _Both(plain.host, plain.env).resolve(str(app), info=info)
    finally:
        os.chmod(dirs[6], 0o755)
    found = {lib.name: lib.path for lib in res.libraries}
    assert found["libx.so.1"] == f"{dirs[9]}/libx.so.1"
    assert found["libq.so.1"] is None


def test_realpath_resolves_as_os_path_realpath(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    links = {"l1": "a/b", "a/b/c/up": "../..", "l2": "l1/c/up/b", "loop1": "loop2",
             "loop2": "loop1", "abs": str(tmp_path / "a"), "dangling": "nowhere/x"}
    for link, target in links.items():
        os.symlink(target, tmp_path / link)
    cases = ["l1", "l1/c/up", "l1/c/up/b/c", "l2/c/../..", "loop1/x", "abs/b/../b/c",
             "dangling/y", "l1/../a", "nope/../a", "a/./b//c/"]
    memo = Memo()
    for case in [*cases, *cases]:  # the second time from what the first one learnt
        path = f"{tmp_path}/{case}"
        assert memo.realpath(path) == os.path.realpath(path), case
    assert memo.realpath("/") == "/"


def test_a_name_absent_from_a_listing_is_what_open_says(tmp_path: Path) -> None:
    expect = elf.read_elf(str(program(tmp_path / "app"))).header
    lib(tmp_path / "d" / "libx.so.1")
    memo = Memo()
    here = memo.listing(str(tmp_path / "d"))
    assert not here.lacks("libx.so.1")
    assert here.lacks("liby.so.1")
    assert not verify(str(tmp_path / "d" / "liby.so.1"), expect).exists
    gone = memo.listing(str(tmp_path / "nowhere"))
    assert gone.lacks("libx.so.1") and not gone.is_dir
    not_dir = memo.listing(str(tmp_path / "app"))
    assert not_dir.lacks("libx.so.1") and not not_dir.is_dir


def test_a_listing_leaves_another_case_to_open(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "LIBX.so.1").write_bytes(b"")
    listing = Memo().listing(str(tmp_path / "d"))
    # On a case-insensitive filesystem "libx.so.1" would open: only open can tell.
    assert not listing.lacks("libx.so.1")
    assert listing.lacks("liby.so.1")


def test_the_same_file_through_a_symlink_is_read_once(tmp_path: Path) -> None:
    real = lib(tmp_path / "lib" / "libx.so.1")
    os.symlink(real, tmp_path / "link.so")
    memo = Memo()
    assert memo.read_elf(str(real)) is memo.read_elf(str(tmp_path / "link.so"))
    expect = memo.read_elf(str(real)).header
    assert verify_in(memo, str(real), expect) is verify_in(memo, str(tmp_path / "link.so"), expect)


def test_a_file_replaced_during_the_command_is_read_again(tmp_path: Path) -> None:
    path = lib(tmp_path / "libx.so.1", soname="libx.so.1")
    memo = Memo()
    expect = memo.read_elf(str(path)).header
    assert memo.read_elf(str(path)).soname == "libx.so.1"
    assert verify_in(memo, str(path), expect).accepted
    other = lib(tmp_path / "other.so", soname="libother.so.2")
    os.replace(other, path)  # a new inode at the same path
    assert memo.read_elf(str(path)).soname == "libother.so.2"
    patch_machine(path, 183)  # rewritten in place: size kept, mtime moves
    os.utime(path, ns=(1, 1))
    assert not verify_in(memo, str(path), expect).accepted


def test_a_verdict_depends_on_the_kind_of_program(tmp_path: Path) -> None:
    path = lib(tmp_path / "libx.so.1")
    x86 = elf.read_elf(str(path)).header
    memo = Memo()
    assert verify_in(memo, str(path), x86).accepted
    arm = patch_machine(lib(tmp_path / "arm.so"), 183)
    assert not verify_in(memo, str(path), elf.read_elf(str(arm)).header).accepted


def test_the_extras_come_after_the_programs_own_closure(tmp_path: Path) -> None:
    from bazel_ldfix.loader.closure import Options, loader_for

    y = lib(tmp_path / "b" / "liby.so.1")
    x = lib(tmp_path / "a" / "libx.so.1", needs=[y])
    extra = lib(tmp_path / "c" / "libz.so.1", needs=[y, lib(tmp_path / "c" / "libw.so.3")])
    app = program(tmp_path / "app", needs=[x], runpath=f"{tmp_path}/a")
    info = elf.read_elf(str(app))
    alone = loader_for(info, Options()).resolve(str(app), info=info)
    both = loader_for(info, Options()).resolve(str(app), [str(extra)], info=info)
    assert alone.program_libraries == len(alone.libraries)
    count = both.program_libraries
    assert count is not None and count < len(both.libraries)
    assert [(lib.name, lib.path) for lib in both.libraries[:count]] == [
        (lib.name, lib.path) for lib in alone.libraries]
    assert "libw.so.3" in [lib.name for lib in both.libraries[count:]]


def test_each_test_is_resolved_once_per_value_of_the_search_path(tmp_path: Path) -> None:
    from bazel_ldfix.loader.closure import Options, cache_lookup, host_of, interp_for

    ext = tmp_path / "ob" / "external"
    shared = lib(ext / "sdk" / "lib" / "libsdk.so.11")
    os.symlink(shared.name, shared.parent / "libsdk.so")
    bin_dir = tmp_path / "bin"
    inputs = []
    for i in range(6):
        exe = program(bin_dir / f"t{i}", needs=[shared])
        inputs.append(TestInput(f"//p:t{i}", str(exe)))
    env = TestEnvironment((), "nothing", {t.label: None for t in inputs})
    made: list[str | None] = []
    session = Models()

    def make_loader(info: elf.ElfInfo, loader_env: Environment) -> Loader:
        made.append(loader_env.library_path)
        return Loader(host_of(interp_for(info)), loader_env, session.memo)

    def cache_for(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
        return cache_lookup(info, Options())

    loaders = Loaders(make_loader, cache_for)
    first = plan_repair(inputs, env, PlanContext(str(tmp_path / "ob"), loaders, models=session))
    assert first.added == (str(ext / "sdk" / "lib"),)
    assert all(t.missing_before == ("libsdk.so.11",) and not t.missing_after
               for t in first.tests)
    # Today's value and the repaired one: two resolutions per test, however many rounds.
    assert Counter(made) == {None: 6, str(ext / "sdk" / "lib"): 6}
    again = plan_repair(inputs, env, PlanContext(str(tmp_path / "ob"), loaders, models=session))
    assert again == first
    assert len(made) == 12  # a second plan of the same command resolves nothing anew
    fresh = plan_repair(inputs, env, PlanContext(str(tmp_path / "ob"), loaders))
    assert fresh == first

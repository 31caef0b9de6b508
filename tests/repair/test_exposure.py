"""The repair gives exactly what was missing: every name a test loaded before loads the
same file after, as the real loader shows.

A directory that holds the missing library and another copy of something a test already
loads (an SDK's older libbar.so.2, its own libz.so.1) is given as links named by the
missing sonames instead; a link that would change another test's load is withheld.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfbuild import lib, program
from modelhelp import resolver

from bazel_ldfix import elf, pathlist
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.loader import closure
from bazel_ldfix.loader.trace import run_trace
from bazel_ldfix.loader.verify import opened_path
from bazel_ldfix.repair import exposure
from bazel_ldfix.repair.exposure import Exposure, ShadowCause
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext, Setting
from bazel_ldfix.session import Session


def _system_zlib() -> str | None:
    """This machine's libz.so.1 as its loader cache gives it (None: no zlib here)."""
    lookup = closure.cache_lookup(elf.read_elf(os.path.realpath("/bin/sh")), closure.Options())
    return lookup("libz.so.1") if lookup else None


ZLIB = _system_zlib()


class Layout:
    """A Bazel-like output_base: the SDK's ``lib/`` holds the missing ``libfoo.so.3`` (a
    cc_import of ``libfoo.so`` stages only the unversioned file) with an older
    ``libbar.so.2`` and, when ``zlib``, its own ``libz.so.1``; the tests find their own
    ``libbar.so.2`` through RUNPATH (imported by its versioned name) and zlib through the
    loader cache."""

    def __init__(self, top: Path, *, zlib: bool = True, tests: int = 1,
                 links: Path | None = None) -> None:
        self.ob = top / "ob"
        ext = self.ob / "external"
        self.sdk = ext / "vsdk" / "lib"
        self.foo = lib(self.sdk / "libfoo.so.3")
        os.symlink("libfoo.so.3", self.sdk / "libfoo.so")
        self.old_bar = lib(self.sdk / "libbar.so.2", extra=["-DOLD"])
        self.bar = lib(ext / "barsdk" / "lib" / "libbar.so.2")
        needs = [self.foo, self.bar]
        if zlib:
            assert ZLIB is not None
            lib(self.sdk / "libz.so.1")
            needs.append(Path(ZLIB))
        bin_dir = self.ob / "execroot" / "ws" / "bin"
        self.solib = bin_dir / "_solib_k8"
        (self.solib / "foo").mkdir(parents=True)
        (self.solib / "bar").mkdir()
        os.symlink(self.sdk / "libfoo.so", self.solib / "foo" / "libfoo.so")
        os.symlink(self.bar, self.solib / "bar" / "libbar.so.2")
        self.inputs = []
        for i in range(tests):
            exe = program(bin_dir / "t" / f"t{i}", needs=needs,
                          runpath="$ORIGIN/../_solib_k8/foo:$ORIGIN/../_solib_k8/bar")
            self.inputs.append(TestInput(f"//t:t{i}", str(exe)))
            self.runfiles(exe)
        self.links = links or top / "links"
        self.links.mkdir(mode=0o700)

    def runfiles(self, exe: Path) -> None:
        """The test's runfiles tree, as Bazel stages it: its _solib_k8 links."""
        tree = Path(f"{exe}.runfiles") / "ws"
        lines = []
        for rel in ("foo/libfoo.so", "bar/libbar.so.2"):
            staged = tree / "_solib_k8" / rel
            staged.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(self.solib / rel, staged)
            lines.append(f"ws/_solib_k8/{rel} {self.solib / rel}\n")
        (tree / "t").mkdir()
        os.symlink(exe, tree / "t" / exe.name)
        lines.append(f"ws/t/{exe.name} {exe}\n")
        (tree.parent / "MANIFEST").write_text("".join(lines))

    def plan(self, value: str | None = None, *, prepend: bool = False,
             links: bool = True, inputs: list[TestInput] | None = None
             ) -> Repair:
        inputs = inputs or self.inputs
        env = TestEnvironment(pathlist.split(value), "the test's own value",
                                     {t.label: value for t in inputs})
        session = Models()
        loaders = resolver(session)
        who = Session("/", {}, store_root=str(self.links.parent)) if links else None
        context = PlanContext(str(self.ob), loaders, models=session, session=who,
                              setting=Setting(prepend, no_cache=True))
        return plan_repair(inputs, env, context)


def real_loads(executable: str, value: str | None) -> dict[str, str]:
    """Each name the real loader loads for ``executable`` (as the kernel starts it), with
    ``value`` as LD_LIBRARY_PATH, to the real path of its file."""
    info = elf.read_elf(executable)
    trace = run_trace(closure.interp_for(info), opened_path(executable, info),
                      library_path=value, inhibit_cache=False)
    assert trace.error is None, trace.error
    return {o.name: os.path.realpath(o.path) for o in trace.objects if o.path}


def assert_only_missing_changed(r: Repair, before: str | None = None) -> None:
    """The real loader, with the value the repair gives, loads every name it loaded
    before from the same file, and now finds what was missing."""
    for test in r.tests:
        was = real_loads(test.executable, before)
        now = real_loads(test.executable, r.ld_library_path)
        assert {n: now.get(n) for n in was} == was
        assert set(test.missing_before) <= set(now), test.missing_before


@pytest.mark.skipif(ZLIB is None, reason="this machine's loader cache has no libz.so.1")
def test_a_directory_that_would_shadow_a_runpath_and_a_cache_library_is_given_as_links(
        tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    r = layout.plan()
    (missing,) = r.missing
    assert (missing.soname, missing.exposure) == ("libfoo.so.3", Exposure.LINK)
    assert missing.dir == str(layout.sdk) and "also holds" in (missing.why or "")
    assert r.added == (r.links_dir,) and str(layout.sdk) not in (r.ld_library_path or "")
    assert r.links == (exposure.Link("libfoo.so.3", str(layout.foo)),)
    assert os.listdir(r.links_dir or "") == ["libfoo.so.3"]
    assert not r.tests[0].missing_after and r.shadowed == ()
    assert_only_missing_changed(r)
    # The same links give the same directory (the same --test_env: Bazel's cache holds).
    assert layout.plan().links_dir == r.links_dir


def test_a_directory_that_changes_nothing_else_is_added_whole(tmp_path: Path) -> None:
    layout = Layout(tmp_path, zlib=False)
    layout.old_bar.unlink()
    r = layout.plan()
    assert [m.exposure for m in r.missing] == [Exposure.DIRECTORY]
    assert r.added == (str(layout.sdk),) and r.links_dir is None and r.links == ()
    assert os.listdir(layout.links) == []
    assert_only_missing_changed(r)


@pytest.mark.skipif(ZLIB is None, reason="this machine's loader cache has no libz.so.1")
def test_a_directory_with_another_copy_of_a_system_library_is_given_as_links(
        tmp_path: Path) -> None:
    # No test the model sees loads zlib, but an interpreter or a library opened by name
    # would get the SDK's copy from that directory instead of the system's.
    layout = Layout(tmp_path, zlib=False)
    layout.old_bar.unlink()
    lib(layout.sdk / "libz.so.1")
    r = layout.plan()
    (missing,) = r.missing
    assert missing.exposure is Exposure.LINK
    assert f"also holds libz.so.1, which this system has too ({ZLIB})" in (
        missing.why or "")
    assert r.added == (r.links_dir,)


def test_prepend_before_the_callers_own_entry_gives_links(tmp_path: Path) -> None:
    # The caller's LD_LIBRARY_PATH provides libbar.so.2; put first, the SDK's directory
    # would hand the test its older copy.
    layout = Layout(tmp_path, zlib=False)
    caller = str(layout.bar.parent)
    appended = layout.plan(caller)
    assert [m.exposure for m in appended.missing] == [Exposure.DIRECTORY]
    prepended = layout.plan(caller, prepend=True)
    assert [m.exposure for m in prepended.missing] == [Exposure.LINK]
    assert prepended.ld_library_path == f"{prepended.links_dir}:{caller}"
    assert_only_missing_changed(appended, caller)
    assert_only_missing_changed(prepended, caller)


def test_what_the_callers_own_value_shadows_is_reported_and_kept(tmp_path: Path) -> None:
    layout = Layout(tmp_path, zlib=False)
    sdk = str(layout.sdk)
    os.unlink(layout.sdk / "libfoo.so.3")       # the caller's SDK entry lacks the library
    lib(tmp_path / "elsewhere" / "libfoo.so.3")
    r = layout.plan(sdk)
    assert [(s.soname, s.after, s.directory, s.cause) for s in r.shadowed] == [
        ("libbar.so.2", f"{sdk}/libbar.so.2", sdk, ShadowCause.CALLER)]
    assert r.ld_library_path is None or r.ld_library_path.startswith(sdk)


def test_a_sibling_found_through_a_links_origin_is_linked_too(tmp_path: Path) -> None:
    # libfoo.so.3 finds libfoo_core.so.3 through RUNPATH $ORIGIN. Given by a link, its
    # $ORIGIN is the links directory: the sibling must be there too.
    layout = Layout(tmp_path, zlib=False)
    core = lib(layout.sdk / "libfoo_core.so.3")
    lib(layout.sdk / "libfoo.so.3", needs=[core], runpath="$ORIGIN")
    r = layout.plan()
    assert {m.soname: m.exposure for m in r.missing} == {
        "libfoo.so.3": Exposure.LINK, "libfoo_core.so.3": Exposure.LINK}
    assert sorted(os.listdir(r.links_dir or "")) == ["libfoo.so.3", "libfoo_core.so.3"]
    assert not r.tests[0].missing_after
    assert_only_missing_changed(r)


def test_a_soname_no_file_is_named_after_is_given_by_a_link(tmp_path: Path) -> None:
    layout = Layout(tmp_path, zlib=False)
    layout.old_bar.unlink()
    for name in ("libfoo.so", "libfoo.so.3"):
        os.unlink(layout.sdk / name)
    odd = lib(layout.sdk / "libfoo-3.17.0.so", soname="libfoo.so.3")
    os.symlink(odd.name, layout.sdk / "libfoo.so")
    r = layout.plan()
    (missing,) = r.missing
    assert (missing.exposure, missing.path) == (Exposure.LINK, str(odd))
    assert "libfoo-3.17.0.so has that SONAME" in (missing.why or "")
    assert r.links == (exposure.Link("libfoo.so.3", str(odd)),)
    assert_only_missing_changed(r)


def test_a_sentinel_soname_is_never_linked(tmp_path: Path) -> None:
    # TensorRT's builder resource is dlopen()ed by file name; its SONAME says it must not
    # be linked, and no link of that name is ever made.
    layout = Layout(tmp_path, zlib=False)
    sentinel = "do_not_link_against_nvinfer_builder_resource"
    resource = lib(layout.sdk / "libnvinfer_builder_resource.so.10.7.0", soname=sentinel)
    linked = program(Path(layout.inputs[0].executable).parent / "linked", needs=[resource])
    r = layout.plan(inputs=[TestInput("//t:linked", str(linked))])
    assert [(m.soname, m.dir, m.exposure) for m in r.missing] == [(sentinel, None, None)]
    assert r.links == () and os.listdir(layout.links) == []


def test_a_link_that_would_change_another_tests_load_splits_the_run(tmp_path: Path) -> None:
    # //t:t1 finds its own libfoo.so.3 through RUNPATH; //t:t0 misses it. The copy beside
    # t0's libraries is another file: a link to it would hand t1 that copy. One value
    # withholds it; alone, t0 is given it, so the run is split (repair/plan.py).
    layout = Layout(tmp_path, zlib=False)
    own = lib(tmp_path / "own" / "libfoo.so.3")
    t1 = program(Path(layout.inputs[0].executable).parent / "t1", needs=[own, layout.bar],
                 runpath=f"{own.parent}:$ORIGIN/../_solib_k8/bar")
    inputs = [*layout.inputs, TestInput("//t:t1", str(t1))]
    r = layout.plan(inputs=inputs)
    assert [c.label for c in r.conflicts] == [inputs[0].label]
    assert [t.missing_after for t in r.tests] == [(), ()]
    (given, plain) = r.groups
    assert given.labels == (inputs[0].label,) and given.given.changes
    assert plain.labels == ("//t:t1",) and not plain.given.changes
    (missing,) = given.missing
    assert missing.exposure is Exposure.LINK
    assert r.withheld == () and r.ld_library_path is None   # each group gives its own


def test_without_a_private_directory_a_needed_link_is_not_given(tmp_path: Path) -> None:
    layout = Layout(tmp_path, zlib=False)
    r = layout.plan(links=False)
    (missing,) = r.missing
    assert missing.exposure is Exposure.UNLINKED
    assert "no directory only this user can write" in (missing.why or "")
    assert r.ld_library_path is None and r.tests[0].missing_after == ("libfoo.so.3",)
    assert r.withheld == () and r.unlinked == ("libfoo.so.3",)
    assert r.unlinked_tests == (r.tests[0].label,)


def test_a_store_that_cannot_be_made_is_named_with_the_systems_reason(
        tmp_path: Path) -> None:
    # A path under a regular file: no user, root included, can make it.
    layout = Layout(tmp_path, zlib=False)
    (tmp_path / "a-file").write_text("")
    store = tmp_path / "a-file" / "cache"
    env = TestEnvironment((), "nothing", {t.label: None for t in layout.inputs})
    models = Models()
    context = PlanContext(str(layout.ob), resolver(models), models=models,
                          session=Session("/", {}, store_root=str(store)),
                          setting=Setting(no_cache=True))
    r = plan_repair(layout.inputs, env, context)
    assert r.unlinked == ("libfoo.so.3",)
    assert r.unlinked_cause == f"cannot make the per-user directory {store} (Not a directory)"


def test_a_directory_whose_name_holds_a_separator_is_reached_by_a_link(
        tmp_path: Path) -> None:
    layout = Layout(tmp_path / "a:b;c", zlib=False, links=tmp_path / "links")
    layout.old_bar.unlink()
    r = layout.plan()
    assert [m.exposure for m in r.missing] == [Exposure.LINK]
    assert ":" not in (r.links_dir or "") and not r.tests[0].missing_after
    assert_only_missing_changed(r)

"""A kept repair is never given again where a repair made anew would differ.

The loader tells apart what a name in a searched directory is when it is not a regular
file: nothing there (or a dangling symlink) lets the search go on, a directory stops the
whole load ("cannot read file data"), a FIFO would block it. Each such change below leaves
the directory's names and the symlink's target as they were; a repair made anew differs,
so the kept facts must not hold. One case is run on a real Bazel, end to end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, needs_x
from elfbuild import lib, program
from runfilestree import tree_of

from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.fs.facts import Facts, holds
from bazel_ldfix.loader.closure import LoaderFactory, host_header
from bazel_ldfix.repair import replay
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext


def _layout(top: Path) -> tuple[Path, Path, list[TestInput]]:
    """One test that needs libsdk.so.11, which only output_base/external holds, run with
    LD_LIBRARY_PATH naming ``early`` first: ``early/libsdk.so.11`` is a symlink to
    ``top/ghost``, which the changes below make and unmake."""
    ob = top / "ob"
    real = lib(ob / "external" / "sdk" / "lib" / "libsdk.so.11")
    early = top / "early"
    early.mkdir()
    (early / "libsdk.so.11").symlink_to(top / "ghost")
    exe = program(ob / "execroot" / "ws" / "bazel-out" / "bin" / "p" / "t", needs=[real])
    tree_of(exe, [f"ws/p/t {exe}"])
    return ob, early, [TestInput("//p:t", str(exe))]


def _planned(ob: Path, early: Path, inputs: list[TestInput]
             ) -> tuple[Repair, Facts | None]:
    session = Models()
    factory = LoaderFactory(memo=session.memo)
    factory.warm()
    session.memo.watch()
    env = TestEnvironment((str(early),), "the flags",
                                 {t.label: str(early) for t in inputs})
    planned = plan_repair(inputs, env, PlanContext(str(ob), factory, models=session,
                                                   host=host_header()))
    return planned, session.memo.facts()


def _make_dir(top: Path) -> None:
    (top / "ghost").mkdir()


def _make_fifo(top: Path) -> None:
    os.mkfifo(top / "ghost")


def _dir_then_gone(top: Path) -> Callable[[Path], None] | None:
    _make_dir(top)
    return lambda top: (top / "ghost").rmdir()


def _dir_then_fifo(top: Path) -> Callable[[Path], None] | None:
    _make_dir(top)

    def change(top: Path) -> None:
        (top / "ghost").rmdir()
        os.mkfifo(top / "ghost")
    return change


def _dangling(change: Callable[[Path], None]) -> Callable[[Path], Callable[[Path], None]]:
    return lambda top: change


@pytest.mark.parametrize("prepare", [_dangling(_make_dir), _dangling(_make_fifo),
                                     _dir_then_gone, _dir_then_fifo],
                         ids=["dangling-to-dir", "dangling-to-fifo", "dir-to-dangling",
                              "dir-to-fifo"])
def test_what_a_searched_name_is_when_no_regular_file_is_a_fact(
        tmp_path: Path, prepare: Callable[[Path], Callable[[Path], None] | None]) -> None:
    ob, early, inputs = _layout(tmp_path)
    change = prepare(tmp_path)
    assert change is not None
    before, facts = _planned(ob, early, inputs)
    assert facts is not None and holds(facts)
    change(tmp_path)
    after, _ = _planned(ob, early, inputs)
    assert after != before          # made anew, the repair differs
    assert not holds(facts)         # so the kept one is not given again


# -- end to end ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("stale")
    files = needs_x(top)
    early = top / "early"
    early.mkdir()
    (early / "libxdemo.so.11").symlink_to(top / "ghost")
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache"), "LD_LIBRARY_PATH": str(early)}
    workspace = make_workspace(top / "ws", files, env=env)
    workspace.top = top  # type: ignore[attr-defined]
    yield workspace
    workspace.shutdown()


@pytest.mark.bazel
@pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")
def test_a_dangling_link_made_a_directory_is_seen_on_bazel(ws: Workspace) -> None:
    args = ("env", "--test_env=LD_LIBRARY_PATH", "//t:needs_x")
    first = ws.ldfix(*args)
    assert first.returncode == 0, first.stderr
    time.sleep(replay.SETTLE_NS / 1e9 + 0.1)
    assert ws.ldfix(*args).stdout == first.stdout       # kept
    assert "given again" in ws.ldfix(*args).stderr
    ghost: Path = ws.top / "ghost"  # type: ignore[attr-defined]
    ghost.mkdir()       # the loader now stops at early/libxdemo.so.11
    try:
        again = ws.ldfix(*args)
        fresh = ws.ldfix("env", "--no-cache", *args[1:])
        assert fresh.stdout != first.stdout
        assert (again.returncode, again.stdout) == (fresh.returncode, fresh.stdout)
        assert "given again" not in again.stderr
    finally:
        ghost.rmdir()

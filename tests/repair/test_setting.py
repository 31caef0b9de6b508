"""What a plan is made with: the per-user store, the links root and who hears of an
unreadable file come from the session, unless the command's setting says otherwise."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from bazel_ldfix.loader.cuda import NO_HOST_DRIVER
from bazel_ldfix.loader.search import Loaders
from bazel_ldfix.repair.setting import PlanContext, RunFacts, Setting
from bazel_ldfix.session import Session

LOADERS = Loaders(lambda info, env: None, lambda info: None)


def _heard(into: list[str]) -> Callable[[str, OSError], None]:
    return lambda path, exc: into.append(path)


def test_without_a_session_nothing_is_kept_and_no_one_is_told() -> None:
    context = PlanContext("/ob", LOADERS)
    assert (context.store, context.links_root, context.told, context.progress) == (
        None, None, None, None)
    assert context.cuda is NO_HOST_DRIVER
    assert context.setting == Setting() and context.run == RunFacts()


def test_the_sessions_store_unless_the_command_reads_no_cache(tmp_path: Path) -> None:
    heard: list[str] = []
    session = Session(str(tmp_path), dict(os.environ), store_root=str(tmp_path / "store"),
                      on_error=_heard(heard))
    context = PlanContext("/ob", LOADERS, session=session)
    assert context.store == session.store is not None
    assert context.store.root.startswith(str(tmp_path / "store"))
    assert context.links_root == session.links_root
    uncached = dataclasses.replace(context, setting=Setting(no_cache=True))
    assert uncached.store is None
    assert uncached.links_root == session.links_root     # links are no cache
    assert context.told is session.on_error


def test_the_plans_own_listener_is_told_first(tmp_path: Path) -> None:
    own: list[str] = []
    session = Session(str(tmp_path), dict(os.environ), on_error=_heard([]))
    context = PlanContext("/ob", LOADERS, session=session, on_error=_heard(own))
    assert context.told is context.on_error
    assert context.told is not None
    context.told("/x", OSError("gone"))
    assert own == ["/x"]

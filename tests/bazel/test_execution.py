"""Where the tests run, from the canonical options of the build step's events.

The option names and values are as Bazel 4.2.3 writes them in the BEP's canonical command
line (recorded: `--strategy=TestRunner=local` is optionName "strategy", optionValue
"TestRunner=local"; `--spawn_strategy=remote,local` keeps its list).
"""

from __future__ import annotations

import pytest

from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.execution import Execution, of, remote_refusal
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.given import Given
from bazel_ldfix.loader.closure import LoaderFactory
from bazel_ldfix.render.repair import held_back_line
from bazel_ldfix.repair.plan import result
from bazel_ldfix.repair.results import Part, Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext, RunFacts, Setting

REMOTE = Option("remote_executor", "grpc://re.example:8980")


@pytest.mark.parametrize(("options", "expected"), [
    ([], Execution.LOCAL),
    ([Option("disk_cache", "/tmp/dc")], Execution.LOCAL),
    ([Option("remote_cache", "grpc://c:1")], Execution.LOCAL),
    ([REMOTE], Execution.REMOTE),
    ([REMOTE, Option("remote_executor", "")], Execution.LOCAL),     # the last one wins
    ([REMOTE, Option("strategy", "TestRunner=local")], Execution.REMOTE_TESTS_LOCAL),
    ([REMOTE, Option("strategy", "TestRunner=remote,local")], Execution.REMOTE),
    ([REMOTE, Option("strategy", "TestRunner=sandboxed")], Execution.REMOTE_TESTS_LOCAL),
    ([REMOTE, Option("strategy", "Genrule=local")], Execution.REMOTE),
    ([REMOTE, Option("spawn_strategy", "local")], Execution.REMOTE_TESTS_LOCAL),
    ([REMOTE, Option("spawn_strategy", "remote,local")], Execution.REMOTE),
    ([REMOTE, Option("spawn_strategy", "local"), Option("strategy", "TestRunner=remote")],
     Execution.REMOTE),                 # the mnemonic's own strategy beats the default
    ([REMOTE, Option("strategy", "standalone")], Execution.REMOTE_TESTS_LOCAL),
    ([REMOTE, Option("test_strategy", "exclusive")], Execution.REMOTE_TESTS_LOCAL),
])
def test_where_the_tests_run(options: list[Option], expected: Execution) -> None:
    assert of(options) is expected


def repair(options: tuple[Option, ...], *, split: bool = False,
           force_local_path: bool = False) -> Repair:
    """The result the plan makes of one group's value (two, ``split``) under ``options``."""
    given = Given((), ("/ob/external/x/lib",))
    parts = [([TestInput("//t:a", "/t/a")], Part(given, (), ()))]
    if split:
        parts.append(([TestInput("//t:b", "/t/b")],
                      Part(Given((), ("/ob/external/v2/lib",)), (), ())))
    env = TestEnvironment((), "nothing", {})
    context = PlanContext("/ob", LoaderFactory(), setting=Setting(
        force_local_path=force_local_path), run=RunFacts(options))
    return result([t for members, _ in parts for t in members], env, context, parts, ())


def test_no_test_env_under_remote_execution() -> None:
    held = repair((REMOTE,))
    assert held.flags == () and held.held_back
    assert held_back_line(held) == f"bazel-ldfix: {remote_refusal()}"
    assert "bazel-ldfix fix" in remote_refusal()


def test_no_split_run_under_remote_execution() -> None:
    # Each group of a split run names directories of this machine too.
    held = repair((REMOTE,), split=True)
    assert held.flags == () and held.groups == ()
    assert repair((), split=True).groups != ()


@pytest.mark.parametrize("options", [
    (REMOTE, Option("strategy", "TestRunner=local")), (Option("disk_cache", "/d"),), ()])
def test_the_flag_stays_where_the_tests_run_here(options: tuple[Option, ...]) -> None:
    kept = repair(options)
    assert kept.flags == ("--test_env=LD_LIBRARY_PATH=/ob/external/x/lib",)
    assert held_back_line(kept) is None and not kept.held_back


def test_force_local_path_keeps_the_old_behaviour() -> None:
    assert repair((REMOTE,), force_local_path=True).flags

"""Where the tests run, from the canonical options of the build step's events.

The option names and values are as Bazel 4.2.3 writes them in the BEP's canonical command
line (recorded: `--strategy=TestRunner=local` is optionName "strategy", optionValue
"TestRunner=local"; `--spawn_strategy=remote,local` keeps its list).
"""

from __future__ import annotations

import dataclasses

import pytest

from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.execution import Execution, of, remote_refusal
from bazel_ldfix.bazel.given import Given
from bazel_ldfix.flow.caller import Caller
from bazel_ldfix.flow.test import remote_guard
from bazel_ldfix.repair.results import Group, Repair

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


def repair(options: tuple[Option, ...]) -> Repair:
    return Repair("/ob", (), "nothing", (), (), ("/ob/external/x/lib",),
                  Given("/ob/external/x/lib"), options)


def caller(said: list[str]) -> Caller:
    return Caller({}, "/", said.append, said.append)


def test_no_test_env_under_remote_execution() -> None:
    said: list[str] = []
    guarded = remote_guard(caller(said), repair((REMOTE,)), force_local_path=False)
    assert guarded.flags == ()
    assert said == [f"bazel-ldfix: {remote_refusal()}"]
    assert "bazel-ldfix fix" in said[0]


def test_no_split_run_under_remote_execution() -> None:
    # Each group of a split run names directories of this machine too.
    split = dataclasses.replace(repair((REMOTE,)), groups=(
        Group(("//t:a",), Given("/ob/external/v1/lib"), (), (), ()),
        Group(("//t:b",), Given("/ob/external/v2/lib"), (), (), ())))
    guarded = remote_guard(caller([]), split, force_local_path=False)
    assert guarded.flags == () and guarded.groups == ()


@pytest.mark.parametrize("options", [
    (REMOTE, Option("strategy", "TestRunner=local")), (Option("disk_cache", "/d"),), ()])
def test_the_flag_stays_where_the_tests_run_here(options: tuple[Option, ...]) -> None:
    said: list[str] = []
    assert remote_guard(caller(said), repair(options), force_local_path=False).flags == (
        "--test_env=LD_LIBRARY_PATH=/ob/external/x/lib",)
    assert said == []


def test_force_local_path_keeps_the_old_behaviour() -> None:
    assert remote_guard(caller([]), repair((REMOTE,)), force_local_path=True).flags

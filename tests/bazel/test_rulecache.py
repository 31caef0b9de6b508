"""The rules' answer remembered between runs (bazel_ldfix/bazel/rulecache.py), on real files.

A record is believed only while every file it was read from is as it was, only for the
labels it was asked about, and only from the per-user directory: one planted where another
user could write, or damaged, is ignored (the query runs again).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bazel_ldfix import store
from bazel_ldfix.bazel import rulecache
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.options import NO_TEST_TAG
from bazel_ldfix.bazel.queryxml import RuleInfo, RulesAnswer, answer_of
from bazel_ldfix.bazel.targets import BuildEvents
from bazel_ldfix.bazel.version import BazelVersion
from bazel_ldfix.store import Record, Store

OTHER = 65534
LABELS = ("//t:a_test", "//t:b_test")
ANSWER = RulesAnswer({"//t:a_test": RuleInfo({"LD_LIBRARY_PATH": "/rule/dir"}, ("gpu",))},
                     ("//t:BUILD", "//t:macro.bzl", "@sdk//defs:env.bzl", "@sdk//defs:BUILD"))


@dataclass(frozen=True)
class World:
    ws: Path        # the workspace
    ob: Path        # its output_base
    cache: Store    # the per-user store
    key: rulecache.Key


def later() -> int:
    """A query start late enough that every file written so far has settled."""
    return time.time_ns() + 2 * rulecache.SETTLE_NS


@pytest.fixture
def world(tmp_path: Path) -> World:
    ws, ob, cache = tmp_path / "ws", tmp_path / "ob", tmp_path / "xdg" / "bazel-ldfix"
    for path in (ws / "WORKSPACE", ws / "t" / "BUILD", ws / "t" / "macro.bzl",
                 ob / "external" / "sdk" / "defs" / "env.bzl",
                 ob / "external" / "sdk" / "defs" / "BUILD"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {path.name}\n")
    opened = store.at(str(cache))
    assert opened is not None
    return World(ws, ob, opened,
                 rulecache.Key(str(ws), "bazel", (), "4.2.3", (Option("define", "x=1"),)))


def remembered(world: World) -> None:
    assert rulecache.remember(world.cache, world.key, LABELS, ANSWER, str(world.ob), later())


def test_the_answer_is_recalled_for_the_labels_asked_or_fewer(world: World) -> None:
    assert rulecache.recall(world.cache, world.key, LABELS) is None
    remembered(world)
    assert rulecache.recall(world.cache, world.key, LABELS) == ANSWER.rules
    assert rulecache.recall(world.cache, world.key, ["//t:b_test"]) == {}
    assert rulecache.recall(world.cache, world.key, [*LABELS, "//t:c_test"]) is None


@pytest.mark.parametrize("change", ["edit BUILD", "replace .bzl", "remove external .bzl",
                                    "add WORKSPACE.bazel", "add prelude"])
def test_any_change_to_a_file_it_was_read_from_asks_again(world: World, change: str) -> None:
    remembered(world)
    if change == "edit BUILD":
        with open(world.ws / "t" / "BUILD", "a") as f:
            f.write('cc_test(name = "c_test", env = {"LD_LIBRARY_PATH": "/x"})\n')
    elif change == "replace .bzl":
        new = world.ws / "t" / "new.bzl"
        new.write_text("# macro.bzl\n")   # same size, another inode
        new.replace(world.ws / "t" / "macro.bzl")
    elif change == "remove external .bzl":
        (world.ob / "external" / "sdk" / "defs" / "env.bzl").unlink()
    elif change == "add WORKSPACE.bazel":
        (world.ws / "WORKSPACE.bazel").write_text("")
    else:
        (world.ws / "tools" / "build_rules").mkdir(parents=True)
        (world.ws / "tools" / "build_rules" / "prelude_bazel").write_text("")
    assert rulecache.recall(world.cache, world.key, LABELS) is None


def test_another_key_has_another_record(world: World) -> None:
    remembered(world)
    key = world.key
    for other in (rulecache.Key(key.workspace, key.executable, key.startup, "7.4.1",
                                key.options),
                  rulecache.Key(key.workspace, key.executable, key.startup, key.version,
                                (Option("define", "x=2"),))):
        assert rulecache.recall(world.cache, other, LABELS) is None


def test_a_record_is_not_written_while_a_file_may_still_change(world: World) -> None:
    # The query started now: BUILD was written less than SETTLE_NS before.
    assert not rulecache.remember(world.cache, world.key, LABELS, ANSWER, str(world.ob),
                                  time.time_ns())
    assert rulecache.recall(world.cache, world.key, LABELS) is None


def test_a_named_file_that_is_not_where_its_label_says_leaves_no_record(world: World) -> None:
    for files in (("//t:BUILD", "@other//:defs.bzl"), ("//t:BUILD", "//t:../../etc.bzl"),
                  ("//t:BUILD", "not a label")):
        answer = RulesAnswer(ANSWER.rules, files)
        assert not rulecache.remember(world.cache, world.key, LABELS, answer, str(world.ob),
                                      later())
    assert rulecache.recall(world.cache, world.key, LABELS) is None


def test_records_of_one_key_are_merged_while_both_hold(world: World) -> None:
    remembered(world)
    other = RulesAnswer({"//u:c_test": RuleInfo({}, (), ("LD_LIBRARY_PATH",))},
                        ("//t:BUILD",))
    assert rulecache.remember(world.cache, world.key, ["//u:c_test", "//t:b_test"], other,
                              str(world.ob), later())
    assert rulecache.recall(world.cache, world.key, [*LABELS, "//u:c_test"]) == {
        **ANSWER.rules, **other.rules}
    # The first answer's files are still watched.
    (world.ob / "external" / "sdk" / "defs" / "env.bzl").write_text("changed\n")
    assert rulecache.recall(world.cache, world.key, ["//u:c_test"]) is None


def test_a_record_planted_where_another_user_could_write_is_ignored(world: World) -> None:
    remembered(world)
    record = Path(world.cache.path(Record.RULES, rulecache.stored_key(world.key)))
    rules = record.parent
    rules.chmod(0o770)
    assert rulecache.recall(world.cache, world.key, LABELS) is None
    rules.chmod(0o700)
    os.chown(rules, OTHER, OTHER)
    assert rulecache.recall(world.cache, world.key, LABELS) is None
    os.chown(rules, os.geteuid(), os.getegid())
    Path(world.cache.root).chmod(0o777)
    assert rulecache.recall(world.cache, world.key, LABELS) is None
    Path(world.cache.root).chmod(0o700)
    os.chown(record, OTHER, OTHER)
    assert rulecache.recall(world.cache, world.key, LABELS) is None
    os.chown(record, os.geteuid(), os.getegid())
    assert rulecache.recall(world.cache, world.key, LABELS) == ANSWER.rules


@pytest.mark.parametrize("damage", ["cut short", "another shape", "another key", "fifo"])
def test_a_damaged_record_is_ignored(world: World, damage: str) -> None:
    remembered(world)
    key = rulecache.stored_key(world.key)
    record = Path(world.cache.path(Record.RULES, key))
    data = record.read_bytes()
    if damage == "cut short":
        record.write_bytes(data[:len(data) // 2])
    elif damage == "another shape":
        assert world.cache.keep(Record.RULES, key, b'{"key": [], "labels": 1}')
    elif damage == "another key":
        body = world.cache.recall(Record.RULES, key) or b""
        assert b'"version":"4.2.3"' in body
        assert world.cache.keep(Record.RULES, key, body.replace(b'"version":"4.2.3"',
                                                                b'"version":"4.2.4"'))
    else:
        record.unlink()
        os.mkfifo(record, 0o600)
    assert rulecache.recall(world.cache, world.key, LABELS) is None


@pytest.mark.parametrize(("label", "where"), [
    ("//t:BUILD", "WS/t/BUILD"),
    ("//:defs.bzl", "WS/defs.bzl"),
    ("@@//t:sub/m.bzl", "WS/t/sub/m.bzl"),
    ("@sdk//defs:env.bzl", "OB/external/sdk/defs/env.bzl"),
    ("@@rules_cc~//cc:defs.bzl", "OB/external/rules_cc~/cc/defs.bzl"),
    ("@sdk//defs", None), ("t:BUILD", None), ("@a/b//:x", None), ("//t:../x", None),
    ("//t/./u:x", None), ("@..//:x", None),
])
def test_a_label_names_the_file_bazel_reads(label: str, where: str | None) -> None:
    got = rulecache.path_of(label, "/ws", "/ob")
    assert got == (where.replace("WS", "/ws").replace("OB", "/ob") if where else None)


def test_the_key_leaves_out_what_changes_every_run_and_keeps_the_rc_lines() -> None:
    def events(*extra: Option) -> BuildEvents:
        return BuildEvents((), (Option("define", "x=1"), Option("startup_time", "2157"),
                                Option("client_env", "OLDPWD=/somewhere"),
                                Option("terminal_columns", "80"),
                                Option("default_override", "0:common=--terminal_columns=80"),
                                Option("build_event_json_file", "/tmp/bazel-ldfix-x/e.json"),
                                Option("test_tag_filters", NO_TEST_TAG), *extra),
                           BazelVersion("4.2.3"), "/ws", 0)

    runner = Bazel("bazel", "/ws", {}, ("--output_base=/ob",))
    key = rulecache.key_of(runner, events(), "/ws")
    assert key.options == (Option("define", "x=1"),)
    assert key.startup == ("--output_base=/ob",) and key.version == "4.2.3"
    query_line = Option("default_override", "2:query=--override_repository=a=/b")
    assert rulecache.key_of(runner, events(query_line), "/ws").options == (
        Option("define", "x=1"), query_line)


def test_the_answer_of_a_query_names_its_build_files() -> None:
    # As Bazel 4.2.3 prints `attr(...) + buildfiles(...)`: a .bzl file carries the location
    # of the BUILD file that loads it.
    xml = """<?xml version="1.1" encoding="UTF-8" standalone="no"?>
<query version="2">
    <source-file location="/ws/t/BUILD" name="//t:n.bzl"/>
    <rule class="cc_test" location="/ws/t/BUILD:3:7" name="//t:m">
        <dict name="env"><pair><string value="LD_LIBRARY_PATH"/><string value="/a/b"/></pair></dict>
        <list name="tags"><string value="gpu"/></list>
    </rule>
    <source-file location="/ws/t/BUILD" name="//t:BUILD" package_contains_errors="false">
        <load name="//t:n.bzl"/>
    </source-file>
</query>
"""
    answer = answer_of(xml, ["//t:m", "//t:other"])
    assert answer.rules == {"//t:m": RuleInfo({"LD_LIBRARY_PATH": "/a/b"}, ("gpu",))}
    assert answer.build_files == ("//t:n.bzl", "//t:BUILD")

"""Bazel's version from its started event, on recorded input.

The Bazel 4.2.3 event is the one in ``recorded/bazel-4.2.3-test.json`` (Debian's build: no
label). The newer events are written in the form bazelbuild/bazel
``src/main/java/com/google/devtools/build/lib/buildtool/buildevent/BuildStartingEvent.java``
gives them (``asStreamProto``: ``startTime`` beside ``startTimeMillis``; ``host`` and
``user`` since 8.5.0), as ``--build_event_json_file`` writes a message: lowerCamel names,
an int64 as a string, a Timestamp as RFC 3339 text, empty fields left out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bazel_ldfix.bazel import bep
from bazel_ldfix.bazel.targets import parse_bep
from bazel_ldfix.bazel.testenv import Order, order_of
from bazel_ldfix.bazel.version import BazelVersion, of_fields, of_started

RECORDED = Path(__file__).parents[1] / "support/recorded/bazel-4.2.3-test.json"


def started(**fields: Any) -> list[str]:
    """One started event with ``fields``, as the first line of an event file."""
    return [json.dumps({"id": {"started": {}}, "started": fields})]


# What every Bazel sets, whatever its age.
COMMON = {"uuid": "5a0c0e6f-3c39-4bd8-9a55-3f1e52c1f2a1", "startTimeMillis": "1717400000000",
          "optionsDescription": "", "command": "test", "workingDirectory": "/ws",
          "workspaceDirectory": "/ws", "serverPid": "4242"}
# Since the protocol has a Timestamp (by 2022; every 7.x and 8.x).
TIMESTAMP = {**COMMON, "startTime": "2024-06-03T07:33:20Z"}
# Since 8.5.0.
HOST_USER = {**TIMESTAMP, "host": "vm", "user": "root"}


def test_debians_4_2_3_without_a_label_is_older_than_7_2() -> None:
    events = bep.read(RECORDED.read_text().splitlines())
    assert events.started is not None and events.started.version is None
    version = of_started(events.started)
    assert version == BazelVersion(None, older_than=(7, 0))
    assert version.before((7, 2)) is True and version.major is None
    assert order_of(version) is Order.FLAGS_WIN


def test_a_start_time_in_milliseconds_alone_is_the_older_form() -> None:
    version = parse_bep(started(**COMMON)).version
    assert order_of(version) is Order.FLAGS_WIN


def test_a_timestamp_beside_it_leaves_the_order_unknown() -> None:
    # From the Timestamp's first release (by 2022) to 8.4: on both sides of 7.2.
    version = parse_bep(started(**TIMESTAMP)).version
    assert version == BazelVersion()
    assert order_of(version) is Order.UNKNOWN


@pytest.mark.parametrize("field", ["host", "user"])
def test_host_or_user_says_8_5_or_later(field: str) -> None:
    version = parse_bep(started(**{**TIMESTAMP, field: "x"})).version
    assert version == BazelVersion(None, at_least=(8, 5))
    assert version.before((7, 2)) is False
    assert order_of(version) is Order.RULE_WINS


def test_the_label_decides_where_bazel_gives_one() -> None:
    # A release says its version: the fields are not asked.
    assert order_of(parse_bep(started(**COMMON, buildToolVersion="7.2.0")).version) \
        is Order.RULE_WINS
    assert order_of(parse_bep(started(**HOST_USER, buildToolVersion="7.1.2")).version) \
        is Order.FLAGS_WIN
    assert parse_bep(started(**HOST_USER, buildToolVersion="9.0.0")).version.major == 9


def test_a_label_without_a_number_is_bounded_by_the_fields() -> None:
    assert of_fields("development version", COMMON).older_than == (7, 0)
    assert of_fields("no_version", HOST_USER).at_least == (8, 5)


def test_no_started_event_or_an_empty_one_tells_nothing() -> None:
    # Without startTimeMillis, a missing startTime is no sign of age.
    assert parse_bep([]).version == BazelVersion()
    assert order_of(parse_bep(started()).version) is Order.UNKNOWN
    assert order_of(of_fields(None, {"uuid"})) is Order.UNKNOWN
    assert order_of(parse_bep(started(startTimeMillis="")).version) is Order.UNKNOWN


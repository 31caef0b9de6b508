"""Which tests a negative pattern takes out: what is decided without asking Bazel.
tests/commands/test_test_split_selection_bazel.py diffs the answer against what Bazel runs."""

from __future__ import annotations

from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.query import taken_out


def test_bazel_is_asked_nothing_when_no_pattern_takes_a_test_out() -> None:
    nowhere = Bazel("/nonexistent/bazel", "/", {})
    assert taken_out(nowhere, ["//t:all", "//u:all"]) == frozenset()
    # Before any positive pattern, a negative one has nothing to take out.
    assert taken_out(nowhere, ["-//t:x", "//t:all"]) == frozenset()
    # A word a query cannot quote: not known.
    assert taken_out(nowhere, ['//t:"a"', "-//t:x"]) is None

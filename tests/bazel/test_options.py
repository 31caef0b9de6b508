"""The user's command less some tests: negative patterns after a ``--``, a pattern file set
aside. tests/commands/test_test_split_selection_bazel.py runs these commands with a real Bazel."""

from __future__ import annotations

from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.options import leaving_out, pattern_file

FLAG = "--test_env=LD_LIBRARY_PATH=/a"


def test_negative_patterns_go_after_a_double_dash_and_options_before_it() -> None:
    assert leaving_out(["//t:all", "--keep_going"], [FLAG], ["//t:x"]) == [
        "//t:all", "--keep_going", FLAG, "--", "-//t:x"]
    assert leaving_out(["--keep_going", "--", "//t:all", "-//t:y"], [FLAG], ["//t:x"]) == [
        "--keep_going", FLAG, "--", "//t:all", "-//t:y", "-//t:x"]


def test_a_pattern_file_is_set_aside_and_its_patterns_given_as_words() -> None:
    patterns = ("//t:all", "-//t:y")
    for args in (["--target_pattern_file=p.txt", "-k"], ["--target_pattern_file", "p.txt", "-k"],
                 ["--target_pattern_file=p.txt", "-k", "--"]):
        assert leaving_out(args, [FLAG], ["//t:x"], patterns) == [
            "-k", FLAG, "--target_pattern_file=", "--", "//t:all", "-//t:y", "-//t:x"]
    # One an rc file sets: the canonical options name it.
    assert pattern_file((Option("target_pattern_file", "p.txt"),)) == "p.txt"
    assert pattern_file((Option("target_pattern_file", "p.txt"),
                         Option("target_pattern_file", ""))) is None
    assert pattern_file(()) is None

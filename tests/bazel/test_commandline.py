"""One Bazel command line, split at its ``--``. The commands built from it run under a
real Bazel in tests/commands/test_test_split_selection_bazel.py,
tests/buildfix/test_write_bazel.py and tests/repair/test_testcommand_bazel.py."""

from __future__ import annotations

from bazel_ldfix.bazel.commandline import CommandLine, option_of

FLAG = "--test_env=LD_LIBRARY_PATH=/a"


def test_options_go_before_the_double_dash_and_targets_after_it() -> None:
    line = CommandLine.of(["-k", "//t:all", "--", "-//t:y"])
    assert line.options == ("-k", "//t:all") and line.residue == ("-//t:y",)
    assert line.with_options([FLAG]).with_targets(["-//t:x"]).words == [
        "-k", "//t:all", FLAG, "--", "-//t:y", "-//t:x"]
    # Without a `--`, one is made for a negative pattern, which before it is an option.
    assert CommandLine.of(["//t:all"]).with_targets(["-//t:x"]).words == [
        "//t:all", "--", "-//t:x"]
    assert CommandLine.of(["//t:all"]).with_options([FLAG]).words == ["//t:all", FLAG]


def test_the_words_come_back_as_given() -> None:
    for words in ([], ["--"], ["//t:all", "--", "--"], ["-k", "--", "//t:x"]):
        assert CommandLine.of(words).words == words
    line = CommandLine.of(["//t:x"], command="build", startup=("--batch",))
    assert line.argv == ["--batch", "build", "//t:x"]


def test_an_option_value_is_read_in_both_spellings_before_the_double_dash_only() -> None:
    line = CommandLine.of(["--test_output=errors", "--test_output", "all", "--test_output",
                           "--", "--test_output=summary"])
    assert line.values("test_output") == ("errors", "all")


def test_the_last_spelling_of_a_boolean_option_wins() -> None:
    assert CommandLine.of([]).flag("build_tests_only") is False
    assert CommandLine.of(["--build_tests_only"]).flag("build_tests_only") is True
    assert CommandLine.of(["--build_tests_only", "--nobuild_tests_only"]).flag(
        "build_tests_only") is False
    assert CommandLine.of(["--build_tests_only=yes"]).flag("build_tests_only") is True
    assert CommandLine.of(["--build_tests_only=0"]).flag("build_tests_only", True) is False
    # What was given before the tool's own option, added last.
    line = CommandLine.of(["--build_tests_only", "--nobuild_tests_only", "-k"])
    assert line.until_last("--nobuild_tests_only").flag("build_tests_only") is True


def test_an_option_is_taken_out_with_its_value() -> None:
    line = CommandLine.of(["--test_output=all", "-k", "--test_output", "errors", "//t:x",
                           "--", "--test_output=x"])
    assert line.without("test_output").words == ["-k", "//t:x", "--", "--test_output=x"]
    flags = CommandLine.of(["--verbose_test_summary", "--noverbose_test_summary",
                            "--verbose_test_summary=1", "//t:x"])
    assert flags.without("verbose_test_summary", takes_value=False).words == ["//t:x"]


def test_patterns_are_told_from_option_values_by_bazels_own_list() -> None:
    line = CommandLine.of(["--test_output", "errors", "//t:all", "--target_pattern_file",
                           "p.txt", "--", "-//t:y"])
    options = line.without_patterns(["//t:all", "-//t:y"])
    assert options is not None
    assert options.words == ["--test_output", "errors"]
    # A pattern Bazel names that is not a word of its own: not told apart.
    assert CommandLine.of(["--target_pattern_file=p.txt"]).without_patterns(["//t:x"]) is None


def test_an_option_word_is_a_name_and_a_value() -> None:
    assert option_of("--test_env=A=1") == ("test_env", "A=1")
    assert option_of("--keep_going") == ("keep_going", "")

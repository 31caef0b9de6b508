"""The user's Bazel command line: its options, the options the tool adds, the tests it
selects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix.bazel.commandline import CommandLine, option_of
from bazel_ldfix.bazel.queryxml import RuleInfo
from bazel_ldfix.bazel.targets import TestTarget
from bazel_ldfix.errors import BazelError

if TYPE_CHECKING:
    from bazel_ldfix.bazel.bep import Option
    from bazel_ldfix.bazel.client import Bazel

# The tag filter of the build step, which no test matches.
NO_TEST_TAG = "bazel-ldfix-builds-but-runs-no-test"



def without(options: Sequence[Option], given: Sequence[str]) -> tuple[Option, ...]:
    """``options`` less the last occurrence of each of ``given`` (ours come last)."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.bazel.bep import Option

    out = list(options)
    for word in given:
        name, value = option_of(word)
        for at in range(len(out) - 1, -1, -1):
            if out[at] == Option(name, value):
                del out[at]
                break
    return tuple(out)


def leaving_out(args: Sequence[str], options: Sequence[str], labels: Sequence[str],
                file_patterns: Sequence[str] | None = None) -> list[str]:
    """The user's command with ``options`` added and the tests ``labels`` taken out by
    negative patterns: Bazel then selects what the command selects, less those.

    A negative pattern goes after a ``--`` (before it, ``-//t:x`` is read as an option).
    ``file_patterns`` are the patterns of a ``--target_pattern_file`` in effect (an rc
    file's included), given when there is one: Bazel refuses patterns on the command line
    along with such a file, so the file is set aside (``--target_pattern_file=``) and
    its patterns are given as words.
    """
    line = CommandLine.of(args)
    patterns: list[str] = []
    if file_patterns is not None:
        line = line.without("target_pattern_file")
        options = [*options, "--target_pattern_file="]
        patterns = list(file_patterns)
    return line.with_options(options).with_targets(
        [*patterns, *(f"-{label}" for label in labels)]).words


def pattern_file(options: Sequence[Option]) -> str | None:
    """The ``--target_pattern_file`` the canonical options set (None: none)."""
    value = next((o.value for o in reversed(options) if o.name == "target_pattern_file"),
                 "")
    return value or None


def selected(tests: Sequence[TestTarget], rules: Mapping[str, RuleInfo],
             command_line: Sequence[str]) -> tuple[TestTarget, ...]:
    """The tests that ``bazel test`` will run, under the user's --test_tag_filters and
    --test_size_filters (the build step added a tag filter of its own, last)."""
    line = CommandLine.of(command_line)
    tag_filters = [v for v in line.values("test_tag_filters") if v != NO_TEST_TAG]
    size_filters = line.values("test_size_filters")
    tag_filter = _split_filter(tag_filters[-1] if tag_filters else "")
    size_filter = _split_filter((size_filters[-1] if size_filters else "").lower())
    out = []
    for test in tests:
        info = rules.get(test.label)
        tags = set(test.tags) | (set(info.tags) if info else set())
        if _passes(tag_filter, tags) and _passes(size_filter, {test.size} - {""}):
            out.append(test)
    return tuple(out)


def _split_filter(value: str) -> tuple[set[str], set[str]]:
    """``a,-b,+c`` -> ({a, c}, {b})."""
    wanted, unwanted = set(), set()
    for item in filter(None, (v.strip() for v in value.split(","))):
        if item.startswith("-"):
            unwanted.add(item[1:])
        else:
            wanted.add(item.removeprefix("+"))
    return wanted, unwanted


def _passes(rule: tuple[set[str], set[str]], values: set[str]) -> bool:
    """Bazel's filter: none of the excluded values, and one of the wanted ones if any."""
    wanted, unwanted = rule
    return not (unwanted & values) and (not wanted or bool(wanted & values))


def flag_value(options: Sequence[Option], name: str, default: bool) -> bool:
    value = default
    for opt in options:
        if opt.name == name:
            value = opt.value.lower() not in ("0", "false", "no")
        elif opt.name == "no" + name:
            value = False
    return value


@dataclass(frozen=True)
class OptionNames:
    """The names (``--keep_going``, ``--nokeep_going``) of the options a Bazel takes."""

    test: frozenset[str]       # of its ``test`` command
    startup: frozenset[str]    # before the command


def option_names(bazel: Bazel) -> OptionNames | None:
    """The options this Bazel takes, as ``bazel help completion`` lists them (the list its
    own shell completion reads); None when it cannot be asked (it failed, or ran out of
    time, or the list has no ``test`` command)."""
    try:
        text = bazel.capture("help", ["completion"])
    except BazelError:
        return None

    def block(variable: str) -> frozenset[str]:
        start = text.find(f'{variable}="')
        if start < 0:
            return frozenset()
        lines = text[start:].split("\n", 1)[-1].split('"', 1)[0].splitlines()
        return frozenset(line.split("=", 1)[0] for line in lines if line.startswith("--"))

    test = block("BAZEL_COMMAND_TEST_FLAGS")
    return OptionNames(test, block("BAZEL_STARTUP_OPTIONS")) if test else None

"""One more ``bazel test`` for the tests that failed in the loader, with what the run revealed.

A library opened with ``dlopen`` by name (``ctypes.CDLL("libX.so.3")``, a plugin loader) is
named by no ELF file, so the repair made before the run cannot know it; the diagnosis of the
run's logs finds it. When the diagnosis found a usable copy of every library a failed test
missed, that test alone is run once more, with those directories added to the same
LD_LIBRARY_PATH the first run had (the same base, the same merge). Never more than once;
a test that failed for any other reason is not rerun.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from bazel_ldfix import pathlist
from bazel_ldfix.bazel.commandline import CommandLine
from bazel_ldfix.diagnosis import logs
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.diagnosis.report import Diagnosis
from bazel_ldfix.given import Given
from bazel_ldfix.pathlist import VARIABLE
from bazel_ldfix.repair import fallback
from bazel_ldfix.repair.results import Repair

# Failures an LD_LIBRARY_PATH entry appended at the end repairs: the loader found no usable
# file by that name. (A version error or a broken copy needs an entry before the others.)
_REPAIRABLE = (ErrorKind.CANNOT_OPEN, ErrorKind.WRONG_CLASS)


@dataclass(frozen=True)
class RerunPlan:
    """What the second run does, or (``labels`` empty) why there is none."""

    labels: tuple[str, ...]             # the tests to run again, in the diagnosis' order
    added: tuple[tuple[str, str], ...]  # (soname, directory) the diagnosis found, new ones
    given: Given | None                 # the value the rerun gives
    not_rerun: tuple[tuple[str, str], ...]   # (test, why) for each failed test left alone
    other_failures: tuple[str, ...]     # failed in the first run for another reason

    @property
    def ld_library_path(self) -> str | None:
        return None if self.given is None else self.given.ld_library_path


_UNLINKED = "it needs a links directory, and none can be made"


def plan_rerun(diagnosis: Diagnosis, repair: Repair) -> RerunPlan:
    """Which loader failures of the first run one rerun can repair, and with what value:
    the first run's, with what the diagnosis found added the same way."""
    first = repair.given.entries
    # Per test: (soname, the directory found, the entries the diagnosis' value adds to the
    # first run's: that directory, or a links directory where it would shadow something).
    by_test: dict[str, list[tuple[str | None, str | None, tuple[str, ...]]]] = {}
    not_rerun: list[tuple[str, str]] = []
    # A test the repair left without a links directory gets none in a rerun either.
    unlinked = set(repair.unlinked_tests)
    for f in diagnosis.findings:
        if f.test is None:
            not_rerun.append((f.log, "the log names no test"))
            continue
        if f.test in unlinked:
            if (f.test, _UNLINKED) not in not_rerun:
                not_rerun.append((f.test, _UNLINKED))
            continue
        usable = (f.error_kind in _REPAIRABLE and f.soname is not None and bool(f.found)
                  and f.fix.value is not None)
        entries = tuple(e for e in pathlist.split(f.fix.value) if e not in first) \
            if usable else ()
        by_test.setdefault(f.test, []).append(
            (f.soname, os.path.dirname(f.found[0]) if usable else None, entries))
    labels: list[str] = []
    new: dict[str, str] = {}
    extra: dict[str, None] = {}
    for test, found in by_test.items():
        lacking = [soname or "?" for soname, directory, _ in found if directory is None]
        if lacking:
            not_rerun.append((test, f"no usable copy of {', '.join(lacking)} was found, or "
                                    "the failure is not one a directory on "
                                    f"{VARIABLE} repairs"))
            continue
        fresh = [entry for _, _, entries in found for entry in entries]
        if not fresh:
            not_rerun.append((test, f"every directory the diagnosis found was on {VARIABLE} "
                                    "already"))
            continue
        labels.append(test)
        extra.update(dict.fromkeys(fresh))
        for soname, directory, _ in found:
            if directory is not None:
                new.setdefault(soname or "", directory)
    value = repair.given.adding(list(extra)) if labels else None
    return RerunPlan(tuple(labels), tuple(new.items()), value, tuple(not_rerun),
                 tuple(diagnosis.other_failures))


def arguments(args: Sequence[str], patterns: Sequence[str], labels: Sequence[str],
              given: Given | None) -> list[str] | None:
    """The user's options, with exactly ``labels`` as targets and ``given``'s flag last;
    None when the user's target patterns cannot be told from option values.

    ``patterns`` are the target patterns as Bazel read them (the build's pattern event).
    Before a ``--`` a word that starts with ``-`` is an option; any other word is a pattern
    or the value of the option before it (``--test_output errors``); a pattern Bazel names
    is taken out where it first stands as a word of its own.
    """
    if not patterns:
        return None     # no pattern event (Bazel stopped early): nothing to go by
    options = CommandLine.of(args).without_patterns(patterns)
    if options is None:
        return None
    return options.with_options(given.flags if given is not None else ()).with_targets(
        labels).words


def combined_code(first: int, second: int, rerun: RerunPlan) -> int:
    """The exit code of the two runs together.

    The rerun's own code when it failed (3 when a rerun test still fails). When it passed:
    0 if every test that failed in the first run was rerun, else the first run's code (the
    tests left alone still failed there).
    """
    if second != 0:
        return second
    return first if rerun.not_rerun or rerun.other_failures else 0


def outcome(rerun: RerunPlan, second: int, output_base: str
            ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the rerun tests that now pass, those that still fail), as the rerun's logs say;
    when they cannot be read, all failed if the rerun did, none otherwise."""
    found = fallback.attempt(lambda: logs.from_command_log(output_base))
    failed = ({log.label for log in found.logs} if isinstance(found, logs.LogSet)
              else set(rerun.labels) if second != 0 else set())
    return (tuple(t for t in rerun.labels if t not in failed),
            tuple(t for t in rerun.labels if t in failed))

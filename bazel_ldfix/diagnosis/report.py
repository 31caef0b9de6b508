"""``bazel-ldfix diagnose``: what a failed test could not load, where it is, and the fix.

The logs are read for glibc's messages (:mod:`.messages`); each test's failures are then
explained with what Bazel left behind (:mod:`.explain`), and rendered for people or
programs (:mod:`bazel_ldfix.render.diagnosis`). It never runs Bazel.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import PROG
from bazel_ldfix.bazel.exitcodes import TESTS_FAILED
from bazel_ldfix.diagnosis import fixes, logs
from bazel_ldfix.diagnosis.explain import Finding, explain_test
from bazel_ldfix.diagnosis.messages import LoaderFailure, read_log
from bazel_ldfix.diagnosis.model import HOST_LOADERS
from bazel_ldfix.diagnosis.runvalues import RanWith
from bazel_ldfix.diagnosis.testfacts import TestContext
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.search import LoaderSource
from bazel_ldfix.store import WAY_OUT

if TYPE_CHECKING:
    from bazel_ldfix.session import Session
    from bazel_ldfix.store import Unusable


@dataclass(frozen=True)
class Diagnosis:
    source: str
    output_base: str | None
    findings: tuple[Finding, ...]
    logs_read: int
    other_failures: tuple[str, ...]     # failed tests (or logs) with no loader error
    passed: int
    notes: tuple[str, ...] = ()
    # Failed tests (or logs) whose log is gone or cannot be read (a FIFO, a directory)
    unread: tuple[str, ...] = ()
    # Where the tests' LD_LIBRARY_PATH is known from, in words; None: not known (a plain
    # `bazel test` records its options nowhere), and the model assumed none.
    environment: str | None = None

    @property
    def exit_code(self) -> int:
        """0: nothing to diagnose; 1: loader failures found; 2: a failed test's log cannot
        be read (a failed test is never "nothing to diagnose")."""
        return 1 if self.findings else 2 if self.unread else 0


def diagnose(found_logs: logs.LogSet, *, ran_with: RanWith | None = None,
             loaders: LoaderSource | None = None,
             session: Session | None = None) -> Diagnosis:
    """Read each log, and explain every loader failure in it (see the module docstring).

    ``session`` is who asks (None: nobody in particular): the commands suggested start
    with its ``prog``; a links directory may be made in its store for the value the
    diagnosis offers (:mod:`bazel_ldfix.linkdir`; without one, directories only); its
    LD_LIBRARY_PATH is the shell's Bazel was started from, the value a test gets in Bazel 4
    when no --test_env sets one (a note says a flag replaces it).

    ``ran_with`` is the LD_LIBRARY_PATH each test had, when known (``bazel-ldfix test``'s
    values, else the BEP's ``--test_env``); the loader model resolves each test with its
    own, and the suggested value keeps it. ``loaders`` default to this machine's loader
    and cache, as the repair uses them.
    """
    loaders = loaders or HOST_LOADERS
    ran_with = ran_with or found_logs.ran_with
    prog = session.prog if session is not None else PROG
    shell_library_path = session.env.get("LD_LIBRARY_PATH") if session is not None else None
    grouped: dict[str, list[tuple[logs.TestLog, tuple[LoaderFailure, ...]]]] = {}
    other: list[str] = []
    unread: dict[str, None] = {}
    notes = list(found_logs.notes)
    for log in found_logs.logs:
        try:
            failures = read_log(log.path)
        except BadInputError as exc:
            unread.setdefault(log.label or log.path, None)
            if os.path.lexists(log.path):   # a log gone has its note already
                notes.append(f"skipped {exc}")
            continue
        if failures:
            grouped.setdefault(log.label or log.path, []).append((log, failures))
        elif (log.label or log.path) not in other:
            other.append(log.label or log.path)
    other = [o for o in other if o not in grouped]
    findings: list[Finding] = []
    for entries in grouped.values():
        label = entries[0][0].label
        library_path = ran_with.value(label) if ran_with else None
        planned = ran_with.planned.get(label) if ran_with and label else None
        test = TestContext.build(entries, found_logs.output_base, library_path, loaders,
                                 session, planned)
        findings += explain_test(test, entries, prog)
    if ran_with is None and shell_library_path and any(f.fix.flag for f in findings):
        notes.append(f"your shell has LD_LIBRARY_PATH={shell_library_path}, which Bazel 4 "
                     "passes to tests (without --incompatible_strict_action_env); the "
                     "--test_env=LD_LIBRARY_PATH below replaces it: add to it, or let "
                     f"`{prog} test` merge it")
    unusable = _links_problem(session)
    if unusable is not None and any(f.found and f.fix.value is None for f in findings):
        notes.append(f"{unusable.words()}: the libraries that need a links directory "
                     f"cannot be given now; {WAY_OUT}")
    return Diagnosis(found_logs.source, found_logs.output_base, tuple(findings),
                     len(found_logs.logs), tuple(other), found_logs.passed, tuple(notes),
                     tuple(u for u in unread if u not in grouped and u not in other),
                     ran_with.source if ran_with else None)


def _links_problem(session: Session | None) -> Unusable | None:
    """Why the session can make no links directory (None: it can, or it cannot say)."""
    if session is None:
        return None
    try:
        return session.links_problem
    except BadInputError:
        return None     # a path LD_LIBRARY_PATH cannot carry: the repair's error says it


def of_run(output_base: str, exit_code: int, *, ran_with: RanWith | None = None,
           session: Session | None = None) -> Diagnosis | None:
    """The failed tests of the run that just ended: those the loader stopped (findings)
    and those that failed otherwise (``other_failures``); None when no test failed.

    ``exit_code`` is Bazel's; only 3 (TESTS_FAILED) has test logs worth reading.
    ``ran_with`` is the LD_LIBRARY_PATH the run gave each test (the repair's values).
    """
    if exit_code != TESTS_FAILED:
        return None
    found = logs.from_command_log(output_base)
    if found is None:
        return None
    return diagnose(found, ran_with=ran_with, session=session)


def after_test(output_base: str, exit_code: int, *, ran_with: RanWith | None = None,
               session: Session | None = None) -> Diagnosis | None:
    """What ``bazel-ldfix test`` prints after Bazel's summary: the loader failures of the
    run that just ended (:func:`of_run`), or None (no test failed, or none failed in the
    loader)."""
    result = of_run(output_base, exit_code, ran_with=ran_with, session=session)
    return result if result is not None and result.findings else None



def unmatched_patterns(patterns: Sequence[str], every: logs.LogSet, package: str) -> str:
    """Why target ``patterns`` select nothing: the ones that match no failed test, named,
    and the failed tests there are."""
    labels = list(dict.fromkeys(log.label for log in every.logs if log.label))
    positive = [p for p in patterns if not p.startswith("-")]
    lonely = [p for p in positive
              if not any(logs.matches(label, [p], package) for label in labels)]
    named = " ".join(lonely or patterns)
    failed = (f"the failed tests: {', '.join(labels)}" if labels
              else "no test failed there")
    return f"no failed test matches {named} in {every.source}; {failed}"


def remote_note(prog: str = PROG) -> str:
    """Why a diagnosis of remote tests gives the BUILD change alone."""
    return ("the tests ran on remote workers (--remote_executor): a directory of this "
            "machine means nothing there, so only the BUILD change is given; "
            f"`{prog} fix --write` makes it (for tests that run here, `{prog} test "
            "--force-local-path` adds the directories)")


def remote_only(diagnosis: Diagnosis, prog: str = PROG) -> Diagnosis:
    """The diagnosis of a run on remote executors: each fix is its BUILD change alone (no
    --test_env, no .bazelrc line naming this machine's output_base), with a note why."""
    findings = tuple(dataclasses.replace(f, fix=fixes.Fix(None, None, None, f.fix.build))
                     for f in diagnosis.findings)
    return dataclasses.replace(diagnosis, findings=findings,
                               notes=(*diagnosis.notes, remote_note(prog)))

"""``bazel-ldfix test``: the build step and the repair, the user's ``bazel test`` with it,
the diagnosis of what still failed in the loader, and the one rerun."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from bazel_ldfix.bazel.commandline import CommandLine
from bazel_ldfix.bazel.exitcodes import INTERRUPTED, NO_TESTS_FOUND, TESTS_FAILED, worst
from bazel_ldfix.bazel.options import leaving_out, pattern_file
from bazel_ldfix.bazel.workspace import output_base as ask_output_base
from bazel_ldfix.cli.arguments import (
    PASSTHROUGH,
    BazelArgsCommand,
    bazel_options,
    force_local_option,
    github_option,
    options_into,
)
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.given import flags
from bazel_ldfix.quoting import printable
from bazel_ldfix.render import github
from bazel_ldfix.render.github import enabled as github_enabled
from bazel_ldfix.repair import fallback, testcommand
from bazel_ldfix.session import BazelChoice, Session

SHOWN_LABELS = 3        # a line names this many tests, then how many more

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.bazel.declaredinputs import Leftover
    from bazel_ldfix.diagnosis.explain import Finding
    from bazel_ldfix.diagnosis.report import Diagnosis
    from bazel_ldfix.diagnosis.runvalues import RanWith
    from bazel_ldfix.repair.results import Group, Repair


@dataclass(frozen=True)
class TestOptions:
    """How ``bazel-ldfix test`` was asked to run."""

    bazel: BazelChoice
    prepend: bool = False
    dry_run: bool = False
    no_repair: bool = False
    rerun_failures: bool = False
    force_local_path: bool = False
    github: bool | None = None
    """--github/--no-github (None: when GITHUB_ACTIONS=true)."""


@click.command("test", cls=BazelArgsCommand, context_settings=PASSTHROUGH)
@bazel_options
@click.option("--dry-run", is_flag=True,
              help="Run the build step (it builds, runs no test), then print the `bazel "
                   "test` command with the repair instead of running it.")
@click.option("--no-repair", is_flag=True,
              help="Run bazel test as given; only diagnose loader failures afterwards.")
@click.option("--rerun-loader-failures", "rerun_failures", is_flag=True,
              help="Run the tests that failed in the loader once more, with the directories "
                   "the diagnosis found (a library opened with dlopen by name).")
@force_local_option
@github_option
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@pass_session
@options_into(TestOptions)
def test(session: Session, options: TestOptions, bazel_args: tuple[str, ...]) -> int:
    """Run `bazel test BAZEL_ARGS` with the libraries its tests need on LD_LIBRARY_PATH.

    BAZEL_ARGS are what you would give `bazel test`. The options of bazel-ldfix (below)
    come first: the first word that is not one of them starts Bazel's arguments, and an
    option of bazel-ldfix written after it is refused. A `--` is Bazel's, as with
    `bazel test`: every word after it is a target pattern, so `-- //... -//app:slow_test`
    excludes a target.

    When tests still fail in the dynamic loader, says why after Bazel's summary (as
    `bazel-ldfix diagnose` does). Exits with Bazel's own exit code. When no repair can be
    computed, runs `bazel test BAZEL_ARGS` unchanged.

    \b
    Examples:
      bazel-ldfix test //...
      bazel-ldfix test --prepend //app:all --config=ci
      bazel-ldfix test -- //... -//app:ext_test
      bazel-ldfix test --quiet --no-repair //app:vendor_test
    """
    github = github_enabled(options.github, session.env)
    return run(session.for_repair(), bazel_args, dataclasses.replace(options, github=github))


def run(session: Session, bazel_args: Sequence[str], options: TestOptions) -> int:
    """``bazel test BAZEL_ARGS`` with the repair (unchanged when none can be computed);
    Bazel's exit code, or the code of the run and its rerun together."""
    bazel = session.bazel(options.bazel)
    repair = None if options.no_repair else repair_or_fallback(session, bazel_args, options)
    if isinstance(repair, int):
        return repair  # the build step was interrupted: stop, with Bazel's code
    if repair is None or isinstance(repair, fallback.Fallback):
        # --no-repair, or no repair could be computed: the user's command as given.
        if repair is not None:
            session.inform(printable(repair.message()))
        if options.dry_run:
            session.show(shlex.join(bazel.argv("test", bazel_args)))
            return 0
        # Asked before the run: every Bazel command rewrites command.log, which the
        # diagnosis reads.
        output_base = options.bazel.output_base
        base = fallback.attempt(lambda: output_base or ask_output_base(bazel))
        if isinstance(base, fallback.Fallback) and not (
                isinstance(repair, fallback.Fallback) and repair.reason == base.reason):
            # (The same reason as the repair's, not inside a workspace, is said once.)
            session.inform(printable(f"bazel-ldfix: no diagnosis after the run: {base.reason}"))
        code = bazel.stream("test", bazel_args)
        diagnosis = diagnose_after(session, base, code, None, repaired=False) \
            if isinstance(base, str) else None
        if diagnosis is not None and diagnosis.findings and options.rerun_failures:
            session.inform("bazel-ldfix: no rerun: there is no first LD_LIBRARY_PATH to extend "
                          "(no repair was computed)")
        if options.github:
            annotate(session, diagnosis.findings if diagnosis else ())
        return code
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.render.repair import (
        held_back_line,
        leftover_warnings,
        repair_summary,
        repaired_line,
    )
    from bazel_ldfix.repair.leftovers import leftovers

    held_back = held_back_line(repair, session.prog)
    if held_back:
        session.say(held_back)
    left = leftovers(repair)
    if not session.quiet:
        session.say(repair_summary(repair, session.prog, left))
    elif left:
        # (Kept under --quiet: such a test passes here by accident.)
        session.say(leftover_warnings(left, session.prog))
    if repair.groups:
        return run_split(session, bazel, bazel_args, repair, options, left)
    args = CommandLine.of(bazel_args).with_options(repair.flags).words
    if options.dry_run:
        from bazel_ldfix.diagnosis import runvalues

        # Its build step ran no test: a later `diagnose` says so.
        runvalues.keep_own(session.store, repair.output_base, "test --dry-run")
        session.show(shlex.join(bazel.argv("test", args)))
        return 0
    code = bazel.stream("test", args)
    ran_with = ran_with_repair(repair)
    if ran_with is not None:
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.diagnosis import runvalues

        # For a later `diagnose` of this run (its command.log): what each test was given.
        runvalues.keep(session.store, repair.output_base, ran_with.values)
    remote = is_remote(repair) and not options.force_local_path
    failed = diagnose_after(session, repair.output_base, code, ran_with, remote=remote)
    diagnosis = failed if failed is not None and failed.findings else None
    stopped = list(diagnosis.findings) if diagnosis else []
    otherwise = list(failed.other_failures) if failed else []
    stopped_first = tuple(stopped)
    rerun_ok: tuple[str, ...] = ()
    revealed: tuple[tuple[str, str], ...] = ()
    if diagnosis is not None and not options.rerun_failures and not remote:
        point_at_rerun(session, diagnosis, repair, bazel_args, options.prepend)
    if options.rerun_failures and diagnosis is not None:
        if remote:
            session.inform("bazel-ldfix: no rerun: under remote execution, directories of this "
                          f"machine mean nothing to the executors (see `{session.prog} fix`)")
        else:
            outcome = rerun_failed(session, bazel, bazel_args, repair, diagnosis, code)
            code, rerun_ok, revealed = outcome.code, outcome.now_pass, outcome.added
            if outcome.rerun:
                # What the rerun says of the tests it ran; the first run of the others.
                stopped = [f for f in stopped if f.test not in outcome.rerun] + list(
                    outcome.diagnosis.findings if outcome.diagnosis else ())
                otherwise = [t for t in otherwise if t not in outcome.rerun] + list(
                    outcome.diagnosis.other_failures if outcome.diagnosis else ())
    if options.github:
        annotate(session, stopped, repair, rerun_ok, revealed, otherwise=otherwise,
                 left=left)
    # What the rerun let load: the sonames the first run's diagnosis found for those tests.
    opened = [f.soname for f in stopped_first if f.test in rerun_ok and f.soname]
    line = None if session.quiet else repaired_line(repair, bazel_args, code, rerun_ok, opened,
                                                   session.prog)
    if line:
        session.say(line)
    return code


def run_split(session: Session, bazel: Bazel, bazel_args: Sequence[str], repair: Repair,
              options: TestOptions, left: Sequence[tuple[str, tuple[Leftover, ...]]] = ()) -> int:
    """One ``bazel test`` per group of tests that one value serves (``Repair.groups``):
    each is the user's command, with its group's flag and the other groups' tests taken
    out. So Bazel selects as the user's command does (patterns, exclusions, test_suites,
    tag and size filters), within the group, and never runs a test the command does not.
    Every run's output and summary are Bazel's; the code is theirs merged, as Bazel's
    own would be (``exitcodes.worst``). Under ``--github``, ``left`` (the tests that load
    leftovers, :func:`leftovers`) are annotated."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.render.repair import repaired_line

    file_patterns = None
    if pattern_file(repair.options) is not None:
        if not repair.patterns:
            session.inform("bazel-ldfix: the run cannot be split (the patterns of "
                          "--target_pattern_file are not known); running `bazel test` "
                          "unchanged")
            return bazel.stream("test", bazel_args)
        file_patterns = repair.patterns
    # (A test no group holds, one whose executable could not be read, runs in each.)
    runs = [leaving_out(bazel_args, group.flags,
                        [label for other in repair.groups if other is not group
                         for label in other.labels], file_patterns)
            for group in repair.groups]
    if options.dry_run:
        for args in runs:
            session.show(shlex.join(bazel.argv("test", args)))
        return 0
    codes = []
    stopped: list[Finding] = []     # what each run's diagnosis found, for the annotations
    otherwise: list[str] = []
    for number, (group, args) in enumerate(zip(repair.groups, runs, strict=True), 1):
        session.inform(printable(f"bazel-ldfix: run {number} of {len(runs)}: "
                                f"{', '.join(group.labels)}"))
        code = bazel.stream("test", args)
        codes.append(code)
        if code == NO_TESTS_FOUND:
            session.inform(f"bazel-ldfix: run {number} of {len(runs)} ran no test: the "
                          "command selects none of these")
        failed = diagnose_after(session, repair.output_base, code, ran_with_group(repair, group))
        if failed is not None:
            stopped += failed.findings
            otherwise += failed.other_failures
        if code not in (0, TESTS_FAILED, NO_TESTS_FOUND):
            break       # a build error or an interruption: the next runs would not help
    if options.rerun_failures:
        session.inform("bazel-ldfix: no rerun: the run was split")
    if options.github:
        annotate(session, stopped, repair, otherwise=otherwise, left=left)
    code = worst(codes)
    session.inform(f"bazel-ldfix: {len(codes)} `bazel test` runs, exit codes "
                     f"{', '.join(map(str, codes))}: exit code {code}")
    line = None if session.quiet or len(codes) < len(runs) else repaired_line(
        repair, bazel_args, code, prog=session.prog)
    if line:
        session.say(line)
    return code


def is_remote(repair: Repair) -> bool:
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.bazel import execution

    return execution.of(repair.options) is execution.Execution.REMOTE


def repair_or_fallback(session: Session, bazel_args: Sequence[str],
                       options: TestOptions) -> Repair | fallback.Fallback | int:
    """The repair for ``bazel test BAZEL_ARGS``, or why there is none (``test`` then runs
    the command unchanged), or Bazel's code when the build step was interrupted. A build
    step that failed as ``bazel test BAZEL_ARGS`` would raises ``repair.build_failed``:
    running the command would only show the same error again.
    """
    planned = fallback.attempt(lambda: testcommand.for_command(
        session, options.bazel, bazel_args, prepend=options.prepend,
        force_local_path=options.force_local_path))
    if not isinstance(planned, testcommand.StepFailed):
        return planned
    if planned.code == INTERRUPTED:
        return planned.code
    if planned.same_as_test:
        raise testcommand.build_failed(planned)
    why = (": it built more than `bazel test --build_tests_only` builds"
           if planned.builds_more else "")
    return fallback.Fallback(f"the build step of `bazel test` failed (exit code "
                             f"{planned.code}){why}")


def ran_with_group(repair: Repair, group: Group) -> RanWith:
    """Each test's LD_LIBRARY_PATH in the run of one group of a split run."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.diagnosis.runvalues import RanWith

    default = group.given.ld_library_path or None
    return RanWith("the options of this run (rc files included, from the build step's "
                   "events) and this group's --test_env",
                   {t.label: t.library_path for t in group.tests}, default,
                   {t.label: t.missing_after for t in group.tests if t.error is None})


def ran_with_repair(repair: Repair) -> RanWith | None:
    """Each test's LD_LIBRARY_PATH in the run of the repaired command (None: not known,
    when the repair's flag was held back under remote execution)."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.diagnosis.runvalues import RanWith

    if repair.held_back:
        return None
    default = repair.given.ld_library_path or None
    return RanWith("the options of this run (rc files included, from the build step's "
                   "events) and the repair's --test_env",
                   {t.label: t.library_path for t in repair.tests}, default,
                   {t.label: t.missing_after for t in repair.tests if t.error is None})


def diagnose_after(session: Session, output_base: str, code: int, ran_with: RanWith | None,
                   *, repaired: bool = True, remote: bool = False) -> Diagnosis | None:
    """After Bazel's summary: why tests still failed in the dynamic loader, if they did
    (said). Returns the diagnosis of every failed test, the ones that failed for another
    reason included (None: no test failed, or it cannot be told).
    ``repaired``: the run had the repair, so `bazel-ldfix test` is not suggested again.

    Never changes the outcome of the run: a diagnosis that fails says so in one line.
    ``remote``: the tests ran on remote executors, where only the BUILD change helps.
    """
    if code != TESTS_FAILED:
        return None  # only then are there logs to read (diagnose is slow to import)
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.diagnosis import report
    from bazel_ldfix.render import brief

    result = fallback.attempt(lambda: report.of_run(
        output_base, code, ran_with=ran_with, session=session))
    if isinstance(result, fallback.Fallback):
        session.say(printable(f"bazel-ldfix: cannot diagnose the failed tests: {result.reason}"))
        return None
    if result is not None and result.findings:
        if remote:
            result = report.remote_only(result, session.prog)
        session.say(brief.to_text(result, prefix="bazel-ldfix: ", color=session.color_err,
                                 after_run=repaired, prog=session.prog))
    return result


@dataclass(frozen=True)
class RerunOutcome:
    code: int                               # the two runs' code
    rerun: tuple[str, ...] = ()             # the labels run again
    now_pass: tuple[str, ...] = ()          # of those, the ones that passed
    added: tuple[tuple[str, str], ...] = ()  # (soname, directory) the first run revealed
    diagnosis: Diagnosis | None = None      # the rerun's, when tests still failed in it


def point_at_rerun(session: Session, diagnosis: Diagnosis, repair: Repair,
                   bazel_args: Sequence[str], prepend: bool) -> None:
    """One line when the rerun (``--rerun-loader-failures``) would repair tests that failed
    in the loader: a library opened at run time is seen only by the run."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.diagnosis import rerun
    from bazel_ldfix.diagnosis.cause import CauseKind

    planned = fallback.attempt(lambda: rerun.plan_rerun(diagnosis, repair))
    if isinstance(planned, fallback.Fallback) or not planned.labels:
        return
    served = [f for f in diagnosis.findings if f.test in planned.labels]
    sonames = ", ".join(dict.fromkeys(f.soname for f in served if f.soname))
    shown = ", ".join(planned.labels[:SHOWN_LABELS]) + (
        f" and {len(planned.labels) - SHOWN_LABELS} more"
        if len(planned.labels) > SHOWN_LABELS else "")
    failed = "failed" if len(planned.labels) == 1 else "each failed"
    what = (f"{failed} to open {sonames} at run time, which no file names"
            if all(f.cause is not None and f.cause.kind is CauseKind.DLOPEN for f in served)
            else f"{failed} to load {sonames}")
    command = session.prog + " " + shlex.join(["test", "--rerun-loader-failures",
                                              *(["--prepend"] if prepend else []),
                                              *bazel_args])
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.render.common import text_of, wrap
    from bazel_ldfix.render.repair import MORE, SAID

    session.say(text_of(wrap(f"{shown} {what}; `{command}` runs "
                            f"{'it' if len(planned.labels) == 1 else 'them'} once more with "
                            "what this run revealed", SAID, MORE)))


def rerun_failed(session: Session, bazel: Bazel, bazel_args: Sequence[str], repair: Repair,
                 diagnosis: Diagnosis, first: int) -> RerunOutcome:
    """The one rerun of the tests that failed in the loader; the two runs' combined code."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.diagnosis import rerun

    planned = fallback.attempt(lambda: rerun.plan_rerun(diagnosis, repair))
    if isinstance(planned, fallback.Fallback):
        session.inform(printable(f"bazel-ldfix: no rerun: {planned.reason}"))
        return RerunOutcome(first)
    for test, why in planned.not_rerun:
        session.inform(printable(f"bazel-ldfix: not rerunning {test}: {why}"))
    if not planned.labels:
        return RerunOutcome(first)
    args = rerun.arguments(bazel_args, repair.patterns, planned.labels, planned.given)
    if args is None:
        session.inform("bazel-ldfix: no rerun: the target patterns cannot be told apart from "
                      "the options' values")
        return RerunOutcome(first)
    for soname, directory in planned.added:
        session.inform(printable(f"bazel-ldfix: the run revealed {soname}, in {directory}"))
    session.inform(printable(f"bazel-ldfix: rerunning {' '.join(planned.labels)} with "
                            f"{' '.join(flags(planned.given))}"))
    second = bazel.stream("test", args)
    now_pass, still = rerun.outcome(planned, second, repair.output_base)
    if now_pass:
        session.inform(printable(f"bazel-ldfix: after the rerun, {', '.join(now_pass)} "
                                f"pass{'es' if len(now_pass) == 1 else ''} (failed in the "
                                "loader before)"))
    again = None
    if still:
        session.say(printable(f"bazel-ldfix: after the rerun, {', '.join(still)} still "
                             f"fail{'s' if len(still) == 1 else ''}"))
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.diagnosis.runvalues import RanWith

        again = diagnose_after(session, repair.output_base, second, RanWith(
            "the rerun's --test_env", {}, planned.ld_library_path))
    code = rerun.combined_code(first, second, planned)
    left = [*(t for t, _ in planned.not_rerun), *planned.other_failures]
    session.say(printable(f"bazel-ldfix: exit code {code} (first run {first}, rerun {second}"
                         + (f"; not rerun, failed in the first run: {', '.join(left)}"
                            if left else "") + ")"))
    return RerunOutcome(code, tuple(planned.labels), tuple(now_pass), tuple(planned.added), again)


def annotate(session: Session, stopped: Sequence[Finding], repair: Repair | None = None,
             rerun_ok: Sequence[str] = (), revealed: Sequence[tuple[str, str]] = (), *,
             otherwise: Sequence[str] = (),
             left: Sequence[tuple[str, Sequence[Leftover]]] = (),
             to_stdout: bool = True) -> None:
    """The run's GitHub Actions annotations (:func:`github.run_annotations`): on stdout, or
    said (stderr) where stdout holds a document."""
    out = session.show if to_stdout else session.say
    for line in github.run_annotations(session.cwd, session.env.get("GITHUB_WORKSPACE"), stopped,
                                   repair, rerun_ok, revealed, otherwise=otherwise,
                                   left=left, prog=session.prog):
        out(line)

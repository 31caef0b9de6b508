"""The commands that run Bazel or read what it left: env, test, fix, diagnose, locate."""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from bazel_ldfix.cli.options import (
    PASSTHROUGH,
    BazelArgsCommand,
    BazelCommand,
    bazel_options,
    bazel_timeout_option,
    force_local_option,
    github_option,
    loader_option,
    printable,
    warn_unreadable,
)
from bazel_ldfix.cli.session import Session, pass_session
from bazel_ldfix.diagnosis import github as _github
from bazel_ldfix.errors import BadInputError, BazelError, CannotEditError

if TYPE_CHECKING:
    from bazel_ldfix.bazel.runner import Bazel
    from bazel_ldfix.diagnosis.diagnose import Diagnosis
    from bazel_ldfix.diagnosis.explain import Finding
    from bazel_ldfix.diagnosis.ranwith import RanWith
    from bazel_ldfix.repair.command import StepFailed
    from bazel_ldfix.repair.failopen import Fallback
    from bazel_ldfix.repair.plan import Repair


def remote_guard(repair: Repair, force_local_path: bool) -> Repair:
    """Under remote execution, no --test_env naming this machine's paths (one line why)."""
    from bazel_ldfix.bazel import execution

    if force_local_path or not repair.flags or not _remote(repair):
        return repair
    click.echo(f"bazel-ldfix: {execution.REMOTE_REFUSAL}", err=True)
    return dataclasses.replace(repair, ld_library_path=None)


def _say_leftovers(repair: Repair) -> None:
    """One line per test that loads here only what an earlier build left in bazel-out."""
    from bazel_ldfix import pathlist
    from bazel_ldfix.bazel import declared
    from bazel_ldfix.repair import failopen

    base = pathlist.join(repair.base) if repair.base else None
    listed: dict[str, tuple[str, list[str]]] = {}   # each directory listed once
    for t in repair.tests:
        if t.missing_after:
            continue    # it fails anyway: the diagnosis says why
        found = failopen.attempt(functools.partial(declared.leftovers, t.executable, base,
                                                   listed))
        if isinstance(found, tuple) and found:
            click.echo(f"bazel-ldfix: warning: {printable(declared.words(t.label, found))}",
                       err=True)


def _remote(repair: Repair) -> bool:
    from bazel_ldfix.bazel import execution

    return execution.of(repair.options) is execution.Execution.REMOTE


def _build_failed(code: int) -> BazelError:
    from bazel_ldfix.bazel.runner import INTERRUPTED

    if code == INTERRUPTED:
        return BazelError("the build step of `bazel test` was interrupted (exit code 8)")
    return BazelError(f"the build step of `bazel test` failed (exit code {code}); "
                      "see Bazel's output above")


@click.command("env", cls=BazelArgsCommand, context_settings=PASSTHROUGH)
@bazel_options
@click.option("--format", "fmt", type=click.Choice(["flags", "shell", "bazelrc", "json"]),
              default="flags", show_default=True, help="How to print the result.")
@force_local_option
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@pass_session
def env(session: Session, bazel_path: str | None, startup: tuple[str, ...],
        output_base: str | None, prepend: bool, no_cache: bool, bazel_timeout: float,
        fmt: str, force_local_path: bool, bazel_args: tuple[str, ...]) -> int:
    """Print what `bazel test BAZEL_ARGS` needs added to run its tests.

    Runs the build step of `bazel test BAZEL_ARGS` (it builds, runs no test), then prints
    the flag, an `export` line, a .bazelrc line or JSON. The options of bazel-ldfix come
    before Bazel's arguments; a `--` is Bazel's, as with `bazel test`.

    Exit 0 when every missing library was located, 1 when some exist nowhere (or, under
    remote execution, when the tests need a BUILD change: see `bazel-ldfix fix`).

    \b
    Examples:
      bazel-ldfix env //app:vendor_test
      bazel-ldfix env --format bazelrc //... >> user.bazelrc
      bazel-ldfix env --format json -- //... -//app:ext_test
    """
    from bazel_ldfix.repair.command import StepFailed

    repair = _plan(session, session.bazel(bazel_path, startup, bazel_timeout), output_base,
                   prepend, no_cache, bazel_args)
    from bazel_ldfix import report  # after: Bazel starts first
    if isinstance(repair, StepFailed):
        raise _build_failed(repair.code)
    repair = remote_guard(repair, force_local_path)
    render = {"flags": report.repair_flags, "shell": report.repair_shell,
              "bazelrc": report.repair_bazelrc, "json": report.repair_json}[fmt]
    text = render(repair)
    if fmt != "json" and not session.quiet:
        click.echo(report.repair_summary(repair), err=True)
        if fmt == "shell" and text:
            click.echo(f"bazel-ldfix: {report.SHELL_CAVEAT}", err=True)
        if fmt in ("shell", "bazelrc") and text and repair.links_dir:
            click.echo(f"bazel-ldfix: {report.LINKS_CAVEAT}", err=True)
    if text:
        click.echo(text)
    return 1 if repair.unresolved or repair.withheld or (repair.missing and not repair.flags) \
        else 0


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
def test(session: Session, bazel_path: str | None, startup: tuple[str, ...],
         output_base: str | None, prepend: bool, no_cache: bool, bazel_timeout: float,
         dry_run: bool, no_repair: bool, rerun_failures: bool,
         force_local_path: bool, github: bool | None, bazel_args: tuple[str, ...]) -> int:
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
    from bazel_ldfix.bazel.runner import output_base as ask_output_base
    from bazel_ldfix.bazel.runner import with_options
    from bazel_ldfix.repair import failopen

    if output_base is not None and not os.path.isdir(output_base):
        raise BadInputError(f"output_base {output_base} does not exist")
    bazel = session.bazel(bazel_path, startup, bazel_timeout)
    repair = None if no_repair else _repair_or_fallback(
        session, bazel, output_base, prepend, no_cache, bazel_args)
    if isinstance(repair, int):
        return repair  # the build step was interrupted: stop, with Bazel's code
    if repair is None or isinstance(repair, failopen.Fallback):
        # --no-repair, or no repair could be computed: the user's command as given.
        if repair is not None:
            click.echo(printable(repair.message()), err=True)
        if dry_run:
            click.echo(shlex.join(bazel.argv("test", bazel_args)))
            return 0
        # Asked before the run: every Bazel command rewrites command.log, which the
        # diagnosis reads.
        base = failopen.attempt(lambda: output_base or ask_output_base(bazel))
        if isinstance(base, failopen.Fallback):
            click.echo(printable(f"bazel-ldfix: no diagnosis after the run: {base.reason}"),
                       err=True)
        code = bazel.stream("test", bazel_args)
        diagnosis = _diagnose_after(session, base, code, None, repaired=False) \
            if isinstance(base, str) else None
        if diagnosis is not None and rerun_failures:
            click.echo("bazel-ldfix: no rerun: there is no first LD_LIBRARY_PATH to extend "
                       "(no repair was computed)", err=True)
        if _github.enabled(github, session.env):
            _annotate(session, diagnosis.findings if diagnosis else ())
        return code
    from bazel_ldfix import report

    repair = remote_guard(repair, force_local_path)
    if not session.quiet:
        click.echo(report.repair_summary(repair), err=True)
        _say_leftovers(repair)
    args = with_options(bazel_args, repair.flags)
    if dry_run:
        click.echo(shlex.join(bazel.argv("test", args)))
        return 0
    code = bazel.stream("test", args)
    ran_with = _ran_with(repair)
    if ran_with is not None:
        from bazel_ldfix import userdir
        from bazel_ldfix.diagnosis import ranwith

        # For a later `diagnose` of this run (its command.log): what each test was given.
        ranwith.keep(userdir.cache_root(session.env), repair.output_base, ran_with.values)
    diagnosis = _diagnose_after(session, repair.output_base, code, ran_with,
                                remote=_remote(repair) and not force_local_path)
    stopped = list(diagnosis.findings) if diagnosis else []
    rerun_ok: tuple[str, ...] = ()
    revealed: tuple[tuple[str, str], ...] = ()
    if rerun_failures and diagnosis is not None:
        if _remote(repair) and not force_local_path:
            click.echo("bazel-ldfix: no rerun: under remote execution, directories of this "
                       "machine mean nothing to the executors (see `bazel-ldfix fix`)",
                       err=True)
        else:
            outcome = _rerun(session, bazel, bazel_args, repair, diagnosis, code, prepend)
            code, rerun_ok, revealed = outcome.code, outcome.now_pass, outcome.added
            if outcome.rerun:
                # What the rerun says of the tests it ran; the first run of the others.
                stopped = [f for f in stopped if f.test not in outcome.rerun] + list(
                    outcome.diagnosis.findings if outcome.diagnosis else ())
    if _github.enabled(github, session.env):
        _annotate(session, stopped, repair, rerun_ok, revealed)
    line = None if session.quiet else report.repaired_line(repair, bazel_args, code)
    if line:
        click.echo(line, err=True)
    return code


@click.command("fix", cls=BazelArgsCommand, context_settings=PASSTHROUGH)
@click.option("--bazel", "bazel_path", metavar="PATH", default=None,
              help="The bazel to run (default: $BAZEL, else bazel).")
@click.option("--startup-option", "startup", multiple=True, metavar="OPT",
              help="A Bazel startup option, e.g. --output_user_root=DIR (repeatable).")
@click.option("--output-base", type=click.Path(file_okay=False), default=None,
              help="Use this output_base instead of asking Bazel.")
@click.option("--no-cache", is_flag=True,
              help="Walk output_base/external and query the rules' env; read no cache (the "
                   "repair made replaces a kept one that differs).")
@bazel_timeout_option
@click.option("--write", is_flag=True,
              help="Apply the changes, then have Bazel analyse them (`bazel build --nobuild "
                   "BAZEL_ARGS`); restore every file if Bazel rejects them.")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 when a change is needed.")
@click.option("--verify", is_flag=True,
              help="After --write, run `bazel test BAZEL_ARGS` as given (no --test_env) and "
                   "exit with its code.")
@click.option("--interface", is_flag=True,
              help="Keep linking against the unversioned file (interface_library) and import "
                   "the versioned one as shared_library.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the planned and written edits as JSON (each with file, old, new "
                   "and why) instead of diffs.")
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@pass_session
def fix(session: Session, bazel_path: str | None, startup: tuple[str, ...],
        output_base: str | None, no_cache: bool, bazel_timeout: float, write: bool,
        check: bool, verify: bool, interface: bool, as_json: bool,
        bazel_args: tuple[str, ...]) -> int:
    """Make the hermetic BUILD change that lets the tests of `bazel test BAZEL_ARGS` load.

    Prints a unified diff of each file it would edit, and describes what it cannot edit.
    With --write, Bazel then analyses the change; if it rejects it, every file gets its
    old bytes back. Exit 0: nothing needed, or every change written; 1: a change is needed
    (--check) or only described; 68: a change cannot be made safely, or Bazel rejected
    it (nothing left changed). The options of bazel-ldfix come before Bazel's arguments;
    a `--` is Bazel's, as with `bazel test`.

    \b
    Examples:
      bazel-ldfix fix //app:vendor_test
      bazel-ldfix fix --write --verify -- //... -//app:ext_test
      bazel-ldfix fix --json //app:vendor_test
    """
    from bazel_ldfix import buildfix, report
    from bazel_ldfix.bazel.runner import workspace_of
    from bazel_ldfix.repair.command import StepFailed

    if check and (write or verify):
        raise click.UsageError("--check changes nothing; it cannot go with --write/--verify")
    if verify and not write:
        raise click.UsageError("--verify runs the tests after --write")
    bazel = session.bazel(bazel_path, startup, bazel_timeout)
    repair = _plan(session, bazel, output_base, False, no_cache, bazel_args)
    if isinstance(repair, StepFailed):
        raise _build_failed(repair.code)
    workspace = workspace_of(session.cwd) or session.cwd
    result = buildfix.plan_for(repair, workspace, interface=interface)
    document = buildfix.to_jsonable(result, workspace) if as_json else None

    def stop(error: CannotEditError) -> int:
        """One error line on stderr; with --json, the error in the one document."""
        if document is None:
            raise error
        click.echo(f"error: {printable(str(error))}", err=True)
        document["error"] = {"message": str(error), "exit_code": error.exit_code}
        click.echo(report.dumps(document))
        return error.exit_code

    text = buildfix.to_text(result, workspace)
    if text and document is None:
        click.echo(text)
    if result.problems:
        return stop(CannotEditError(f"{len(result.problems)} change(s) cannot be made "
                                    "(see above); nothing written"))
    if not result.needed:
        click.echo("bazel-ldfix: no BUILD change needed", err=True)
    if check or not write or not result.needed:
        if document is not None:
            click.echo(report.dumps(document))
        return (1 if check else 0) if result.needed else 0
    try:
        applied = buildfix.apply(result, bazel, bazel_args,
                                 repair.output_base)
    except CannotEditError as exc:
        return stop(exc)
    paths = [w.before.path for w in applied.written]
    if document is not None:
        document = buildfix.to_jsonable(result, workspace, paths if not applied.restored
                                        else ())
        document["analysis"] = None if applied.verdict is None else {
            "accepted": applied.verdict.accepted, "error": applied.verdict.error}
    for w in applied.written:
        click.echo(printable(f"bazel-ldfix: wrote {w.before.path}"
                             + (" (in place: it has other hard links or another owner)"
                                if w.how is buildfix.files.How.IN_PLACE else "")), err=True)
    if applied.restored:
        assert applied.verdict is not None
        kept = "; ".join(applied.not_restored)
        return stop(CannotEditError(
            f"Bazel rejects the change: {applied.verdict.error}; "
            + (kept or "every file written was restored as it was")))
    if document is not None:
        click.echo(report.dumps(document))
    if verify:
        return bazel.stream("test", bazel_args)
    return 1 if result.described_only else 0


def _plan(session: Session, bazel: Bazel, output_base: str | None, prepend: bool,
          no_cache: bool, bazel_args: Sequence[str]) -> Repair | StepFailed:
    from bazel_ldfix.repair.command import repair_tests

    def cache_dir(base: str) -> str | None:
        del base  # one per-user directory, whatever the output_base
        return session.cache_dir()

    return repair_tests(bazel, bazel_args, session.env,
                        output_base=output_base, prepend=prepend,
                        cache_dir=None if no_cache else cache_dir,
                        links_root=session.links_root(),
                        progress=session.progress(), on_error=warn_unreadable)


def _repair_or_fallback(session: Session, bazel: Bazel, output_base: str | None,
                        prepend: bool, no_cache: bool,
                        bazel_args: Sequence[str]) -> Repair | Fallback | int:
    """The repair for ``bazel test BAZEL_ARGS``, or why there is none (``test`` then runs
    the command unchanged), or Bazel's code when the build step was interrupted or failed
    as ``bazel test BAZEL_ARGS`` would (running it would only show the same error again).
    """
    from bazel_ldfix.bazel.runner import INTERRUPTED
    from bazel_ldfix.repair import failopen
    from bazel_ldfix.repair.command import StepFailed

    planned = failopen.attempt(lambda: _plan(session, bazel, output_base, prepend, no_cache,
                                             bazel_args))
    if not isinstance(planned, StepFailed):
        return planned
    if planned.code == INTERRUPTED:
        return planned.code
    if planned.same_as_test:
        click.echo(f"bazel-ldfix: the build step of `bazel test` failed (exit code "
                   f"{planned.code}); `bazel test` fails the same way, so it is not run "
                   "again: Bazel's error is above", err=True)
        return planned.code
    why = (": it built more than `bazel test --build_tests_only` builds"
           if planned.builds_more else "")
    return failopen.Fallback(f"the build step of `bazel test` failed (exit code "
                             f"{planned.code}){why}")


def _ran_with(repair: Repair) -> RanWith | None:
    """Each test's LD_LIBRARY_PATH in the run of the repaired command (None: not known,
    when the repair's flag was held back under remote execution)."""
    from bazel_ldfix.diagnosis.ranwith import RanWith

    if repair.added and not repair.flags:
        return None
    default = repair.ld_library_path or ":".join(repair.base) or None
    return RanWith("the options of this run (rc files included, from the build step's "
                   "events) and the repair's --test_env",
                   {t.label: t.library_path for t in repair.tests}, default)


def _diagnose_after(session: Session, output_base: str, code: int, ran_with: RanWith | None,
                    *, repaired: bool = True, remote: bool = False) -> Diagnosis | None:
    """After Bazel's summary: why tests still failed in the dynamic loader, if they did.
    ``repaired``: the run had the repair, so `bazel-ldfix test` is not suggested again.

    Never changes the outcome of the run: a diagnosis that fails says so in one line.
    ``remote``: the tests ran on remote executors, where only the BUILD change helps.
    """
    if code != 3:
        return None  # only Bazel's TESTS_FAILED leaves logs to read (diagnose is slow to import)
    from bazel_ldfix.diagnosis import brief
    from bazel_ldfix.diagnosis import diagnose as diagnosing
    from bazel_ldfix.repair import failopen

    result = failopen.attempt(lambda: diagnosing.after_test(
        output_base, code, ran_with=ran_with, on_error=warn_unreadable,
        shell_library_path=session.env.get("LD_LIBRARY_PATH"),
        links_root=session.links_root()))
    if isinstance(result, failopen.Fallback):
        click.echo(printable(f"bazel-ldfix: cannot diagnose the failed tests: {result.reason}"),
                   err=True)
        return None
    if result is not None:
        if remote:
            from bazel_ldfix.diagnosis.hermetic import remote_only

            result = remote_only(result)
        click.echo(brief.to_text(result, prefix="bazel-ldfix: ", color=session.color_err,
                                 after_run=repaired), err=True)
    return result


@dataclass(frozen=True)
class _Rerun:
    code: int                               # the two runs' code
    rerun: tuple[str, ...] = ()             # the labels run again
    now_pass: tuple[str, ...] = ()          # of those, the ones that passed
    added: tuple[tuple[str, str], ...] = ()  # (soname, directory) the first run revealed
    diagnosis: Diagnosis | None = None      # the rerun's, when tests still failed in it


def _rerun(session: Session, bazel: Bazel, bazel_args: Sequence[str], repair: Repair,
           diagnosis: Diagnosis, first: int, prepend: bool) -> _Rerun:
    """The one rerun of the tests that failed in the loader; the two runs' combined code."""
    from bazel_ldfix.repair import failopen, rerun

    planned = failopen.attempt(lambda: rerun.plan(diagnosis, repair, prepend=prepend))
    if isinstance(planned, failopen.Fallback):
        click.echo(printable(f"bazel-ldfix: no rerun: {planned.reason}"), err=True)
        return _Rerun(first)
    for test, why in planned.not_rerun:
        click.echo(printable(f"bazel-ldfix: not rerunning {test}: {why}"), err=True)
    if not planned.labels:
        return _Rerun(first)
    args = rerun.arguments(bazel_args, repair.patterns, planned.labels, planned.flag)
    if args is None:
        click.echo("bazel-ldfix: no rerun: the target patterns cannot be told apart from "
                   "the options' values", err=True)
        return _Rerun(first)
    for soname, directory in planned.added:
        click.echo(printable(f"bazel-ldfix: the run revealed {soname}, in {directory}"),
                   err=True)
    click.echo(printable(f"bazel-ldfix: rerunning {' '.join(planned.labels)} with "
                         f"{planned.flag}"), err=True)
    second = bazel.stream("test", args)
    now_pass, still = rerun.outcome(planned, second, repair.output_base)
    if now_pass:
        click.echo(printable(f"bazel-ldfix: after the rerun, {', '.join(now_pass)} "
                             f"pass{'es' if len(now_pass) == 1 else ''} (failed in the "
                             "loader before)"), err=True)
    again = None
    if still:
        click.echo(printable(f"bazel-ldfix: after the rerun, {', '.join(still)} still "
                             f"fail{'s' if len(still) == 1 else ''}"), err=True)
        from bazel_ldfix.diagnosis.ranwith import RanWith

        again = _diagnose_after(session, repair.output_base, second, RanWith(
            "the rerun's --test_env", {}, planned.ld_library_path))
    code = rerun.combined_code(first, second, planned)
    left = [*(t for t, _ in planned.not_rerun), *planned.other_failures]
    click.echo(printable(f"bazel-ldfix: exit code {code} (first run {first}, rerun {second}"
                         + (f"; not rerun, failed in the first run: {', '.join(left)}"
                            if left else "") + ")"), err=True)
    return _Rerun(code, tuple(planned.labels), tuple(now_pass), tuple(planned.added), again)


def _annotate(session: Session, stopped: Sequence[Finding], repair: Repair | None = None,
              rerun_ok: Sequence[str] = (), revealed: Sequence[tuple[str, str]] = (), *,
              err: bool = False) -> None:
    """The run's GitHub Actions annotations (see diagnosis/github.py)."""
    from bazel_ldfix.bazel.runner import workspace_of

    places = _github.Places(workspace_of(session.cwd), session.env.get("GITHUB_WORKSPACE"))
    lines = _github.errors(stopped, places)
    if repair is not None:
        failing = [f.test for f in stopped if f.test]
        lines += _github.notices(repair, [*failing, *rerun_ok], places)
    lines += _github.revealed(rerun_ok, revealed, places)
    for line in lines:
        click.echo(line, err=err)


@click.command("diagnose", cls=BazelCommand)
@click.argument("patterns", nargs=-1)
@click.option("--bep", metavar="FILE", default=None,
              help="Read the test results of this --build_event_json_file.")
@click.option("--log", "log_files", metavar="FILE", multiple=True,
              help="Diagnose this test log (repeatable).")
@click.option("--output-base", type=click.Path(file_okay=False), default=None,
              help="Look for libraries here (default: the one the logs come from).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True,
              help="Each failure in full, the .bazelrc line and the BUILD changes.")
@github_option
@loader_option
@pass_session
def diagnose(session: Session, patterns: tuple[str, ...], bep: str | None,
             log_files: tuple[str, ...], output_base: str | None, as_json: bool,
             verbose: bool, github: bool | None, loader: str | None) -> int:
    """Explain why failed tests could not load their libraries, and how to fix it.

    By default, the failed tests of the last `bazel test` in this workspace; target
    PATTERNS narrow them. Prints the command to run first, then one line per missing
    library under the cc_import that causes it; -v prints every detail.

    Exit 0 when no failed test was stopped by the loader, 1 when some were, 2 for bad
    input (a pattern that matches no failed test among them, a failed test whose log
    cannot be read).

    \b
    Examples:
      bazel-ldfix diagnose
      bazel-ldfix diagnose //app:vendor_test
      bazel-ldfix diagnose --json --bep events.json
    """
    from bazel_ldfix.diagnosis import brief, logs, render
    from bazel_ldfix.diagnosis import diagnose as diagnosing

    found = logs.find(session.cwd, bep=bep, log_files=log_files,
                      output_base=output_base, patterns=patterns)
    if patterns and not found.logs:
        every = logs.find(session.cwd, bep=bep, log_files=log_files,
                          output_base=output_base, patterns=())
        raise BadInputError(diagnosing.unmatched_patterns(
            patterns, every, logs.package_of(session.cwd)))
    ran_with = None
    if found.command_log is not None and found.output_base is not None:
        from bazel_ldfix import userdir
        from bazel_ldfix.diagnosis import ranwith

        # The run was a `bazel-ldfix test`'s: it recorded what each test was given.
        ran_with = ranwith.recall(userdir.cache_root(session.env), found.output_base)
    loaders = session.loaders(loader)
    result = diagnosing.diagnose(found, ran_with=ran_with, on_error=warn_unreadable,
                                 shell_library_path=session.env.get("LD_LIBRARY_PATH"),
                                 make_loader=loaders.make_loader, cache_for=loaders.cache_for,
                                 links_root=session.links_root())
    if as_json:
        click.echo(render.to_json(result))
    elif verbose:
        click.echo(render.to_text(result, color=session.color))
    else:
        click.echo(brief.to_text(result, color=session.color))
    if _github.enabled(github, session.env):
        # Not into the JSON on stdout: the runner reads stderr as well.
        _annotate(session, result.findings, err=as_json)
    return result.exit_code


@click.command("locate", cls=BazelCommand)
@click.argument("sonames", nargs=-1, required=True)
@click.option("--output-base", type=click.Path(file_okay=False), default=None,
              help="Search this output_base instead of asking Bazel.")
@click.option("--bazel", "bazel_path", metavar="PATH", default=None,
              help="The bazel to ask for the output_base (default: $BAZEL, else bazel).")
@click.option("--startup-option", "startup", multiple=True, metavar="OPT",
              help="A Bazel startup option, e.g. --output_user_root=DIR (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {soname: [{dir, machine, class, ...}...]}.")
@click.option("--no-cache", is_flag=True,
              help="Walk output_base/external; neither read nor write the index cache.")
@bazel_timeout_option
@pass_session
def locate(session: Session, sonames: tuple[str, ...], output_base: str | None,
           bazel_path: str | None, startup: tuple[str, ...], as_json: bool,
           no_cache: bool, bazel_timeout: float) -> int:
    """Every directory under output_base/external holding each SONAME, best first.

    Best: a copy this machine's loader would take (ELF class, machine, the loader's other
    checks), then the shortest path. Exit 1 when some SONAME exists nowhere.

    \b
    Examples:
      bazel-ldfix locate libvendor.so.3
      bazel-ldfix locate --json --output-base "$(bazel info output_base)" libcudart.so.12
    """
    from bazel_ldfix.bazel.runner import output_base as ask_output_base
    from bazel_ldfix.outputbase import index
    from bazel_ldfix.report import locate_json, locate_text

    if output_base is None:
        output_base = ask_output_base(session.bazel(bazel_path, startup, bazel_timeout))
    root = index.external_root(output_base)
    # The copies this machine's loader would take: the host's class and machine.
    from bazel_ldfix.bazel import solib

    # Ranked as the repair ranks them: where what the workspace's tests import leads first.
    found = index.copies(sonames, [root], session.host_header(),
                         preferred=index.test_dirs(solib.staged(output_base), ()),
                         cache_dir=None if no_cache else session.cache_dir(),
                         on_error=warn_unreadable, progress=session.progress())
    click.echo(locate_json(found) if as_json else locate_text(found, root))
    return 0 if all(found.values()) else 1

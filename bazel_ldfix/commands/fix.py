"""``bazel-ldfix fix``: the repair's missing libraries made a BUILD change, analysed by
Bazel, then shown, and with ``--write`` kept (every file restored when Bazel rejects it)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import click

from bazel_ldfix import children, pathlist
from bazel_ldfix.bazel import declaredinputs
from bazel_ldfix.bazel.workspace import workspace_of
from bazel_ldfix.buildfix import analysis, driver, files, unfetched
from bazel_ldfix.buildfix.change import Plan
from bazel_ldfix.buildfix.definitions import defines_repository
from bazel_ldfix.buildfix.edit import write
from bazel_ldfix.buildfix.planner import Shape, TestMissing, plan_fix
from bazel_ldfix.cli.arguments import PASSTHROUGH, BazelArgsCommand, bazel_choice, options_into
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.diagnosis import model as diagnosis_model
from bazel_ldfix.errors import CannotEditError
from bazel_ldfix.loader.cuda import NO_HOST_DRIVER, HostDriver
from bazel_ldfix.quoting import printable
from bazel_ldfix.session import BazelChoice, Session

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.bazel.repocall import RepositoryCall
    from bazel_ldfix.repair.results import Repair


@dataclasses.dataclass(frozen=True)
class FixOptions:
    """How ``bazel-ldfix fix`` was asked to run."""

    bazel: BazelChoice
    write: bool = False
    check: bool = False
    verify: bool = False
    interface: bool = False
    as_json: bool = False


@click.command("fix", cls=BazelArgsCommand, context_settings=PASSTHROUGH)
@bazel_choice()
@click.option("--write", is_flag=True,
              help="Keep the changes Bazel accepts (`bazel build --nobuild BAZEL_ARGS`); "
                   "restore every file if Bazel rejects them.")
@click.option("--check", is_flag=True,
              help="Change nothing (as without --write); exit 1 when a change is needed.")
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
@options_into(FixOptions)
def fix(session: Session, options: FixOptions, bazel_args: tuple[str, ...]) -> int:
    """Make the hermetic BUILD change that lets the tests of `bazel test BAZEL_ARGS` load.

    Prints a unified diff of each file it would edit, and describes what it cannot edit.
    Bazel analyses the change first: it is written, analysed, and (but with --write) put
    back byte for byte. A change Bazel rejects is no diff: `cannot fix` says why. Exit 0:
    nothing needed, the diffs printed, or every change written; 1: a change is needed
    (--check), or (--write) some change could only be described; 68: a change cannot be
    made safely, or Bazel rejected it (nothing left changed). The options of bazel-ldfix
    come before Bazel's arguments; a `--` is Bazel's, as with `bazel test`.

    \b
    Examples:
      bazel-ldfix fix //app:vendor_test
      bazel-ldfix fix --write --verify -- //... -//app:ext_test
      bazel-ldfix fix --json //app:vendor_test
    """
    if options.check and (options.write or options.verify):
        raise click.UsageError("--check changes nothing; it cannot go with --write/--verify")
    if options.verify and not options.write:
        raise click.UsageError("--verify runs the tests after --write")
    return run(session.for_repair(), bazel_args, options)


def run(session: Session, bazel_args: Sequence[str], options: FixOptions) -> int:
    """The BUILD change for ``bazel test BAZEL_ARGS``: shown (a unified diff per file, JSON
    with ``as_json``), checked, or written; the command's exit code.

    Bazel analyses every change before its diff is shown, in every mode: the files are
    written, ``bazel build --nobuild`` is asked, and unless ``--write`` keeps them they get
    their bytes back (:func:`apply`). A change Bazel rejects is no diff but a reason.
    """
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.diagnosis import runvalues
    from bazel_ldfix.repair import testcommand

    bazel = session.bazel(options.bazel)
    repair = testcommand.for_command(session, options.bazel, bazel_args)
    if isinstance(repair, testcommand.StepFailed):
        raise testcommand.build_failed(repair)
    try:
        return change(session, bazel, bazel_args, options, repair)
    finally:
        # Its build step, analysis and fetches ran no test: a later `diagnose` says so.
        runvalues.keep_own(session.store, repair.output_base, "fix")


def change(session: Session, bazel: Bazel, bazel_args: Sequence[str], options: FixOptions,
           repair: Repair) -> int:
    """:func:`run` once the repair is known: the plan, its analysis, and what is shown."""
    from bazel_ldfix.render.buildfix import to_jsonable, to_text
    from bazel_ldfix.render.common import dumps

    workspace = workspace_of(session.cwd) or session.cwd
    fetch = unfetched.Fetcher(workspace, repair.output_base, bazel, session.say)
    result = plan_for(repair, workspace, interface=options.interface, cuda=session.cuda,
                      fetch=fetch, ask=repository_calls(bazel))
    keep = options.write and not options.check
    document = None
    if options.as_json:
        document = {**to_jsonable(result, workspace), "analysis": None}

    def stop(error: CannotEditError) -> int:
        """One error line on stderr; with --json, the error in the one document."""
        if document is None:
            raise error
        session.say(f"error: {printable(str(error))}")
        document["error"] = {"message": str(error), "exit_code": error.exit_code}
        session.show(dumps(document))
        return error.exit_code

    def show(refused: str | None = None) -> None:
        """The plan for people (unless --json): its diffs only once Bazel accepted them."""
        text = to_text(result, workspace, refused)
        if text and document is None:
            session.show(text)

    if result.problems:
        show()
        return stop(CannotEditError(f"{len(result.problems)} change(s) cannot be made "
                                    "(see above); nothing written"))
    applied = None
    if any(f.editable for f in result.files):
        try:
            applied = apply(result, bazel, bazel_args, repair.output_base, session.say,
                            keep=keep)
        except CannotEditError as exc:
            show(str(exc))
            return stop(exc)
    if applied is not None and applied.verdict is not None:
        if document is not None:
            document = {**to_jsonable(result, workspace, () if applied.restored else
                                      [w.before.path for w in applied.written],
                                      rejected=not applied.verdict.accepted),
                        "analysis": {"accepted": applied.verdict.accepted,
                                     "error": applied.verdict.error}}
        kept = "; ".join(applied.not_restored)
        if not applied.verdict.accepted:
            show(f"Bazel rejects the change: {applied.verdict.error}")
            return stop(CannotEditError(
                f"Bazel rejects the change: {applied.verdict.error}; "
                + (kept or "every file written was restored as it was")))
        if kept:
            session.say(printable(f"bazel-ldfix: warning: {kept}"))
    show()
    short = len(result.unprovided)
    later = len(result.unfetched)
    if not result.needed:
        if short:
            session.say(f"bazel-ldfix: no BUILD change can give {short} needed "
                       f"librar{'y' if short == 1 else 'ies'} (see above)")
        if later:
            session.say(f"bazel-ldfix: {later} needed librar{'y' if later == 1 else 'ies'} "
                       "may be in a repository not fetched yet; its change is planned once "
                       "it is fetched (see above)")
        if not short and not later:
            session.say("bazel-ldfix: no BUILD change needed")
    if not keep or not result.needed:
        if document is not None:
            session.show(dumps(document))
        if short or later:
            return 1        # the tests still miss what no change gives yet
        return (1 if options.check else 0) if result.needed else 0
    for w in applied.written if applied is not None else ():
        session.say(printable(f"bazel-ldfix: wrote {w.before.path}"
                             + (" (in place: it has other hard links or another owner)"
                                if w.how is files.How.IN_PLACE else "")))
    if document is not None:
        session.show(dumps(document))
    if short:
        session.say(f"bazel-ldfix: the change leaves {short} needed "
                   f"librar{'y' if short == 1 else 'ies'} that no cc_import provides "
                   "(see above)")
    if later:
        session.say(f"bazel-ldfix: the change leaves {later} needed "
                   f"librar{'y' if later == 1 else 'ies'} that a repository not fetched "
                   "yet may provide (see above)")
    if options.verify:
        return verify(session, bazel, bazel_args)
    return 1 if result.described_only or short or later else 0


def verify(session: Session, bazel: Bazel, bazel_args: Sequence[str]) -> int:
    """Plain ``bazel test BAZEL_ARGS`` after the change, with no ``--test_env``: Bazel's
    exit code, and one line that says what it means."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.bazel.exitcodes import TESTS_FAILED

    code = bazel.stream("test", bazel_args)
    if code == 0:
        session.say("bazel-ldfix: verified: plain `bazel test` passes with the change")
    elif code == TESTS_FAILED:
        session.say("bazel-ldfix: not verified: plain `bazel test` still has failing tests "
                   f"(exit 3); `{session.prog} diagnose` says why")
    else:
        session.say(f"bazel-ldfix: not verified: plain `bazel test` exited {code}")
    return code


def repository_calls(bazel: Bazel) -> Callable[[str], RepositoryCall | None]:
    """Where Bazel says a repository is made, asked once per repository."""
    from bazel_ldfix.bazel.repocall import repository_call

    answers: dict[str, RepositoryCall | None] = {}

    def ask(name: str) -> RepositoryCall | None:
        if name not in answers:
            answers[name] = repository_call(bazel, name)
        return answers[name]
    return ask


def plan_for(repair: Repair, workspace: str, *, interface: bool = False,
             cuda: HostDriver = NO_HOST_DRIVER,
             fetch: Callable[[str], unfetched.Found] | None = None,
             ask: Callable[[str], RepositoryCall | None] | None = None) -> Plan:
    """The plan for what the repair found missing, test by test: for every program a test
    runs, its own executable and those of its runfiles.

    A test's own list names what it misses first, with what it finds only through files
    Bazel does not declare for it (leftovers of an earlier build in bazel-out,
    :mod:`bazel_ldfix.bazel.declaredinputs`); what those libraries need in turn comes from the
    loader model run for that test alone (as ``diagnose`` runs it). A test that misses
    nothing is planned when its imports stage a CUDA stub under the driver's name
    (``cuda``: the host's driver, docs/cuda.md). ``fetch`` is asked of a name no import of
    the build provides (:class:`unfetched.Fetcher`).
    """
    found = {m.soname: m.dir for m in repair.missing if m.dir}
    needed_by = {m.soname: m.needed_by for m in repair.missing}
    tests = []
    listed: dict[str, tuple[str, list[str]]] = {}
    for t in repair.tests:
        base = pathlist.join(repair.base_of(t.label)) or None    # the value it had
        names = list(t.missing_before)
        # A program of the runfiles by the path Bazel built it at; the test's runfiles
        # manifest says what Bazel declares for it.
        programs = tuple(os.path.realpath(p) for p in t.programs)
        for program in (t.executable, *programs):
            names += [f.soname for f in declaredinputs.leftovers(program, base, listed,
                                                           declarer=t.executable)
                      if f.soname not in names]
        if not names and not driver.stages_unusable(t.executable, cuda):
            continue
        if any(m.soname not in names for m in repair.missing):
            # Some name is needed by a library, not by the tests: whose is it?
            model = diagnosis_model.model_missing(t.label, t.executable, repair.output_base, base)
            names += [n for n in model if n not in names]
        tests.append(TestMissing(t.label, t.executable, tuple(names), needed_by, programs))

    def candidates(soname: str) -> list[str]:
        directory = found.get(soname)
        return [os.path.join(directory, soname)] if directory else []

    shape = Shape.INTERFACE if interface else Shape.VERSIONED
    skylib = any(o.name == "override_repository" and o.value.startswith("bazel_skylib=")
                 for o in repair.options) or defines_repository(
        "bazel_skylib", workspace, repair.output_base)
    return plan_fix(tests, workspace, repair.output_base, shape, candidates, base,
                skylib=skylib, cuda=cuda, fetch=fetch, ask=ask)


@dataclasses.dataclass(frozen=True)
class Applied:
    """What writing the change did: the files written, Bazel's verdict, and whether they
    were put back (byte for byte: when Bazel rejects the change, or it was only tried)."""

    written: tuple[files.Written, ...]
    verdict: analysis.Verdict | None    # None: not asked (nothing was written)
    restored: bool = False
    not_restored: tuple[str, ...] = ()  # files changed again since they were written


def apply(result: Plan, bazel: Bazel, bazel_args: Sequence[str], output_base: str | None,
          say: Callable[[str], None], timeout: float = analysis.TIMEOUT, *,
          keep: bool = True) -> Applied:
    """Write the plan's editable files, have Bazel analyse the tests and the rules
    changed, and restore every file when Bazel rejects what was written, or, without
    ``keep``, once Bazel has answered (the change was only tried).

    A signal, or a Bazel that cannot be started, before Bazel has answered leaves nothing
    unchecked behind either: every file is restored, ``say`` is told so in one line, and
    the exception goes on. A signal never cuts a write or a restore in two
    (:func:`children.held`): it is handled once the files are whole.
    """
    written: tuple[files.Written, ...] = ()
    try:
        with children.held():
            written = tuple(write(result.files, output_base))
        if not written:
            return Applied((), None)
        labels = list(dict.fromkeys(c.label for f in result.files if f.editable
                                    for c in f.changes))
        verdict = analysis.analyse(bazel, bazel_args, labels, timeout)
    except BaseException:
        if written:
            with children.held():
                kept = files.restore(written)
                with contextlib.suppress(OSError):     # a terminal gone with SIGHUP
                    say(printable("bazel-ldfix: Bazel did not analyse the change; " + (
                        "; ".join(kept) or "every file written was restored as it was")))
        raise
    if verdict.accepted and keep:
        return Applied(written, verdict)
    with children.held():
        kept = files.restore(written)
    return Applied(written, verdict, True, tuple(kept))

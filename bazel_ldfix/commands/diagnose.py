"""``bazel-ldfix diagnose``: why failed tests could not load their libraries, and the fix."""

from __future__ import annotations

from dataclasses import dataclass

import click

from bazel_ldfix.cli.arguments import (
    BazelCommand,
    github_option,
    loader_option,
    options_into,
    output_base_option,
)
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.diagnosis import logs, report, runvalues
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.render import brief, diagnosis
from bazel_ldfix.render.github import enabled as github_enabled
from bazel_ldfix.render.github import run_annotations
from bazel_ldfix.session import Session


@dataclass(frozen=True)
class DiagnoseOptions:
    """How ``bazel-ldfix diagnose`` was asked to run."""

    patterns: tuple[str, ...] = ()
    """Target patterns: only the failed tests they match."""
    bep: str | None = None
    """--bep: the test results of this --build_event_json_file."""
    log_files: tuple[str, ...] = ()
    """--log: these test logs."""
    output_base: str | None = None
    """--output-base: look for libraries here."""
    as_json: bool = False
    verbose: bool = False
    github: bool | None = None
    """--github/--no-github (None: when GITHUB_ACTIONS=true)."""
    loader: str | None = None


@click.command("diagnose", cls=BazelCommand)
@click.argument("patterns", nargs=-1)
@click.option("--bep", metavar="FILE", default=None,
              help="Read the test results of this --build_event_json_file.")
@click.option("--log", "log_files", metavar="FILE", multiple=True,
              help="Diagnose this test log (repeatable).")
@output_base_option("Look for libraries here (default: the one the logs come from).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("-v", "--verbose", is_flag=True,
              help="Each failure in full, the .bazelrc line and the BUILD changes.")
@github_option
@loader_option
@pass_session
@options_into(DiagnoseOptions)
def diagnose(session: Session, options: DiagnoseOptions) -> int:
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
    def own(base: str) -> str | None:
        """The command of bazel-ldfix's own that ran the last Bazel command, if one did."""
        return runvalues.recall_own(session.store, base)

    found = logs.find(session.cwd, bep=options.bep, log_files=options.log_files,
                      output_base=options.output_base, patterns=options.patterns, own=own)
    if options.patterns and not found.logs:
        every = logs.find(session.cwd, bep=options.bep, log_files=options.log_files,
                          output_base=options.output_base, patterns=())
        raise BadInputError(report.unmatched_patterns(
            options.patterns, every, logs.package_of(session.cwd)))
    ran_with = None
    if found.command_log is not None and found.output_base is not None:
        # The run was a `bazel-ldfix test`'s: it recorded what each test was given.
        ran_with = runvalues.recall(session.store, found.output_base)
    loaders = session.loaders(options.loader)
    result = report.diagnose(found, ran_with=ran_with, loaders=loaders,
                             session=session.for_repair())
    if options.as_json:
        session.show(diagnosis.to_json(result))
    elif options.verbose:
        session.show(diagnosis.to_text(result, color=session.color, prog=session.prog))
    else:
        session.show(brief.to_text(result, color=session.color, prog=session.prog))
    if github_enabled(options.github, session.env):
        # Not into the JSON on stdout: the runner reads stderr as well.
        out = session.say if options.as_json else session.show
        for line in run_annotations(session.cwd, session.env.get("GITHUB_WORKSPACE"),
                                result.findings, prog=session.prog):
            out(line)
    return result.exit_code

"""``bazel-ldfix env``: what ``bazel test`` needs added to run its tests, printed as a flag,
an ``export`` line, a .bazelrc line or JSON."""

from __future__ import annotations

import click

from bazel_ldfix.cli.arguments import (
    PASSTHROUGH,
    BazelArgsCommand,
    bazel_options,
    force_local_option,
)
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.quoting import printable
from bazel_ldfix.session import BazelChoice, Session


@click.command("env", cls=BazelArgsCommand, context_settings=PASSTHROUGH)
@bazel_options
@click.option("--format", "fmt", type=click.Choice(["flags", "shell", "bazelrc", "json"]),
              default="flags", show_default=True, help="How to print the result.")
@force_local_option
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@pass_session
def env(session: Session, bazel: BazelChoice, prepend: bool, fmt: str,
        force_local_path: bool, bazel_args: tuple[str, ...]) -> int:
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
      (user.bazelrc: this machine only, not committed; .bazelrc reads it with
      `try-import %workspace%/user.bazelrc`)
      bazel-ldfix env --format json -- //... -//app:ext_test
    """
    # Here: at the top, CPU ms before Bazel starts: env +233 (benchmarks/START.md).
    from bazel_ldfix.render.repair import (
        SHELL_CAVEAT,
        caveat_lines,
        conflict_error,
        group_flags,
        held_back_line,
        leftover_warnings,
        links_caveat,
        repair_bazelrc,
        repair_flags,
        repair_json,
        repair_shell,
        repair_summary,
    )
    from bazel_ldfix.repair import testcommand
    from bazel_ldfix.repair.leftovers import leftovers

    repair = testcommand.for_command(session.for_repair(), bazel, bazel_args,
                                     prepend=prepend, force_local_path=force_local_path)
    if isinstance(repair, testcommand.StepFailed):
        raise testcommand.build_failed(repair)
    from bazel_ldfix.diagnosis import runvalues

    # Its build step ran no test: a later `diagnose` says so.
    runvalues.keep_own(session.store, repair.output_base, "env")
    held_back = held_back_line(repair, session.prog)
    if held_back:
        session.say(held_back)
    split = bool(repair.groups) and fmt in ("shell", "bazelrc")
    render = {"flags": group_flags if repair.groups else repair_flags, "shell": repair_shell,
              "bazelrc": repair_bazelrc, "json": repair_json}[fmt]
    text = "" if split else render(repair)
    left = leftovers(repair) if fmt != "json" else []
    if fmt != "json" and not session.quiet:
        session.say(repair_summary(repair, session.prog, left))
        if fmt == "shell" and text:
            session.say(caveat_lines(SHELL_CAVEAT))
        if fmt in ("shell", "bazelrc") and text and repair.links_dir:
            session.say(caveat_lines(links_caveat(session.prog)))
    elif left:
        # (Kept under --quiet, as `test --quiet` keeps them: a pass by accident.)
        session.say(leftover_warnings(left, session.prog))
    if split:
        # One value cannot serve the run; say why, in the terms of the summary above.
        session.say(f"error: {printable(conflict_error(repair, session.prog))}")
        return 1
    if text:
        session.show(text)
    given = bool(repair.flags or any(g.flags for g in repair.groups))
    return 1 if repair.unresolved or repair.withheld or repair.unlinked \
        or (repair.missing and not given) else 0

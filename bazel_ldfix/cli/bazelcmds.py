"""The commands that run Bazel or read what it left: env, test, fix, diagnose, locate."""

from __future__ import annotations

import os
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
)
from bazel_ldfix.cli.session import Session, pass_session, warn_unreadable
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.quoting import printable
from bazel_ldfix.render import github as _github

if TYPE_CHECKING:
    pass


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
    from bazel_ldfix.flow import repair as repairing
    from bazel_ldfix.flow import test as testing
    from bazel_ldfix.render.repair import (
        SHELL_CAVEAT,
        caveat_lines,
        conflict_error,
        group_flags,
        leftover_warnings,
        links_caveat,
        repair_bazelrc,
        repair_flags,
        repair_json,
        repair_shell,
        repair_summary,
    )

    caller = session.caller()
    repair = repairing.for_command(caller, session.bazel(bazel_path, startup, bazel_timeout),
                                   bazel_args, output_base=output_base, prepend=prepend,
                                   no_cache=no_cache, force_local_path=force_local_path)
    if isinstance(repair, repairing.StepFailed):
        raise repairing.build_failed(repair)
    testing.say_held_back(caller, repair)
    split = bool(repair.groups) and fmt in ("shell", "bazelrc")
    render = {"flags": group_flags if repair.groups else repair_flags, "shell": repair_shell,
              "bazelrc": repair_bazelrc, "json": repair_json}[fmt]
    text = "" if split else render(repair)
    left = testing.leftovers(repair) if fmt != "json" else []
    if fmt != "json" and not session.quiet:
        click.echo(repair_summary(repair, session.prog, left), err=True)
        if fmt == "shell" and text:
            click.echo(caveat_lines(SHELL_CAVEAT), err=True)
        if fmt in ("shell", "bazelrc") and text and repair.links_dir:
            click.echo(caveat_lines(links_caveat(session.prog)), err=True)
    elif left:
        # (Kept under --quiet, as `test --quiet` keeps them: a pass by accident.)
        click.echo(leftover_warnings(left, session.prog), err=True)
    if split:
        # One value cannot serve the run; say why, in the terms of the summary above.
        click.echo(f"error: {printable(conflict_error(repair, session.prog))}", err=True)
        return 1
    if text:
        click.echo(text)
    given = bool(repair.flags or any(g.flags for g in repair.groups))
    return 1 if repair.unresolved or repair.withheld or (repair.missing and not given) else 0


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
    from bazel_ldfix.flow import test as testing

    if output_base is not None and not os.path.isdir(output_base):
        raise BadInputError(f"output_base {output_base} does not exist")
    options = testing.Options(output_base, prepend, no_cache, dry_run, no_repair,
                              rerun_failures, force_local_path,
                              _github.enabled(github, session.env))
    return testing.run(session.caller(), session.bazel(bazel_path, startup, bazel_timeout),
                       bazel_args, options)


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
def fix(session: Session, bazel_path: str | None, startup: tuple[str, ...],
        output_base: str | None, no_cache: bool, bazel_timeout: float, write: bool,
        check: bool, verify: bool, interface: bool, as_json: bool,
        bazel_args: tuple[str, ...]) -> int:
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
    from bazel_ldfix.flow import fix as fixing

    if check and (write or verify):
        raise click.UsageError("--check changes nothing; it cannot go with --write/--verify")
    if verify and not write:
        raise click.UsageError("--verify runs the tests after --write")
    options = fixing.Options(output_base, no_cache, write, check, verify, interface, as_json)
    return fixing.run(session.caller(), session.bazel(bazel_path, startup, bazel_timeout),
                      bazel_args, options)


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
    from bazel_ldfix.diagnosis import diagnose as diagnosing
    from bazel_ldfix.diagnosis import logs
    from bazel_ldfix.render import brief
    from bazel_ldfix.render import diagnosis as render

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
                                 loaders=loaders,
                                 links_root=session.links_root(), prog=session.prog)
    if as_json:
        click.echo(render.to_json(result))
    elif verbose:
        click.echo(render.to_text(result, color=session.color, prog=session.prog))
    else:
        click.echo(brief.to_text(result, color=session.color, prog=session.prog))
    if _github.enabled(github, session.env):
        from bazel_ldfix.flow.test import annotate

        # Not into the JSON on stdout: the runner reads stderr as well.
        annotate(session.caller(), result.findings, to_stdout=not as_json)
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
    from bazel_ldfix.bazel.workspace import output_base as ask_output_base
    from bazel_ldfix.outputbase import index
    from bazel_ldfix.render.locate import locate_json, locate_text

    if output_base is None:
        output_base = ask_output_base(session.bazel(bazel_path, startup, bazel_timeout))
    root = index.external_root(output_base)
    # The copies this machine's loader would take: the host's class and machine.
    from bazel_ldfix.bazel import solib

    # Ranked as the repair ranks them: where what the workspace's tests import leads first.
    found = index.copies(sonames, [root], session.host_header(),
                         preferred=index.test_dirs(solib.staged(output_base), ()),
                         cache_dir=None if no_cache else session.cache_dir(),
                         on_error=warn_unreadable, progress=session.progress(),
                         cuda=session.cuda_host())
    click.echo(locate_json(found) if as_json else locate_text(found, root))
    return 0 if all(found.values()) else 1

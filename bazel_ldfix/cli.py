"""Command-line interface: parse, call one library function, render.

Library modules are imported inside the commands, so that ``--help`` stays fast.
"""

from __future__ import annotations

import itertools
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from bazel_ldfix import __version__
from bazel_ldfix.errors import BadInputError, BazelError, LdfixError
from bazel_ldfix.invocation import Invocation, from_environ

if TYPE_CHECKING:
    from bazel_ldfix.bazel.runner import Bazel
    from bazel_ldfix.diagnosis.diagnose import Diagnosis
    from bazel_ldfix.loader.resolve import Options
    from bazel_ldfix.repair.failopen import Fallback
    from bazel_ldfix.repair.plan import Repair

_PASSTHROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False,
                "help_option_names": ["-h", "--help"]}


class BazelArgsCommand(click.Command):
    """A command whose own options come first and whose other arguments go to Bazel as given.

    Bazel reads a ``--`` as the end of its options: what follows are target patterns, such as
    ``-//t:x``. Click would take the first ``--`` for itself, so the split is made here: the
    tool's options are read up to the first argument that is not one of them, and everything
    from there (a ``--`` included) is Bazel's. An option of the tool found among Bazel's
    arguments (before their ``--``) is refused with the command line that works, rather than
    handed to Bazel, which would fail on it or, for ``--dry-run``, run.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_value, flags = self._own_options(ctx)
        own, at = [], 0
        while at < len(args):
            word = args[at]
            name = word.split("=", 1)[0]
            if word in flags or (name in takes_value and "=" in word):
                own.append(word)
            elif word in takes_value and at + 1 < len(args):
                own += [word, args[at + 1]]
                at += 1
            else:
                break
            at += 1
        rest = args[at:]
        self._refuse_misplaced(ctx, own, rest, takes_value, flags)
        return super().parse_args(ctx, [*own, "--", *rest])

    def _own_options(self, ctx: click.Context) -> tuple[set[str], set[str]]:
        takes_value: set[str] = set()
        flags: set[str] = set()
        for param in self.get_params(ctx):
            if isinstance(param, click.Option):
                names = [*param.opts, *param.secondary_opts]
                (flags if param.is_flag or param.count else takes_value).update(names)
        return takes_value, flags

    def _refuse_misplaced(self, ctx: click.Context, own: list[str], rest: list[str],
                          takes_value: set[str], flags: set[str]) -> None:
        moved: list[str] = []
        names: list[str] = []
        kept: list[str] = []
        at = 0
        while at < len(rest):
            word = rest[at]
            if word == "--":
                kept += rest[at:]
                break
            name = word.split("=", 1)[0]
            if name not in ("-h", "--help") and (word in flags or name in takes_value):
                moved.append(word)
                names.append(name)
                if word in takes_value and at + 1 < len(rest):
                    moved.append(rest[at + 1])
                    at += 1
            else:
                kept.append(word)
            at += 1
        if moved:
            options = " ".join(names)
            fixed = shlex.join(["bazel-ldfix", ctx.info_name or self.name or "",
                                *own, *moved, *kept])
            are, it = ("are options", "them") if len(names) > 1 else ("is an option", "it")
            raise BadInputError(f"{options} {are} of bazel-ldfix, not of Bazel; "
                                f"put {it} before the Bazel arguments: {fixed}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="bazel-ldfix")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Repair and explain Bazel tests that fail at load time."""
    if ctx.obj is None:  # called as a library (CliRunner), not through main()
        ctx.obj = from_environ(os.environ, os.getcwd())


# Every command that needs to know where the user is takes it from here.
_pass_invocation = click.make_pass_decorator(Invocation)


def _bazel_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--bazel", "bazel_path", metavar="PATH", default=None,
                        help="The bazel to run (default: $BAZEL, else bazel).")(func)
    func = click.option("--startup-option", "startup", multiple=True, metavar="OPT",
                        help="A Bazel startup option, e.g. --output_user_root=DIR "
                             "(repeatable).")(func)
    func = click.option("--output-base", type=click.Path(file_okay=False), default=None,
                        help="Use this output_base instead of asking Bazel.")(func)
    func = click.option("--prepend", is_flag=True,
                        help="Put the added directories before the existing entries.")(func)
    func = click.option("--no-cache", is_flag=True,
                        help="Walk output_base/external; neither read nor write the index "
                             "cache.")(func)
    func = click.option("-q", "--quiet", is_flag=True,
                        help="Print nothing of bazel-ldfix's own but errors and the "
                             "diagnosis of tests that failed in the loader (for CI logs)."
                        )(func)
    return func


def _checked_loader(_ctx: click.Context, _param: click.Parameter,
                    value: str | None) -> str | None:
    """A --loader that is not a file is the user's mistake, whatever the command reaches."""
    if value is not None and not os.path.isfile(value):
        raise BadInputError(f"--loader {value}: not a regular file")
    return value


_loader_option = click.option(
    "--loader", metavar="PATH", default=None, callback=_checked_loader,
    help="Ask this dynamic loader how it searches (default: this host's own, if only root "
         "can change it). A file's own PT_INTERP is never run.")


def _force_local_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--force-local-path", is_flag=True,
                        help="Add the output_base paths even under --remote_executor (the "
                             "tests run on this machine).")(func)


def _remote_guard(repair: Repair, force_local_path: bool) -> Repair:
    """Under remote execution, no --test_env naming this machine's paths (one line why)."""
    import dataclasses

    from bazel_ldfix.bazel import execution

    if force_local_path or not repair.flags \
            or execution.of(repair.options) is not execution.Execution.REMOTE:
        return repair
    click.echo(f"bazel-ldfix: {execution.REMOTE_REFUSAL}", err=True)
    return dataclasses.replace(repair, ld_library_path=None)


@cli.command(cls=BazelArgsCommand, context_settings=_PASSTHROUGH,
             short_help="Print what `bazel test` needs to load its tests.")
@_bazel_options
@click.option("--format", "fmt", type=click.Choice(["flags", "shell", "bazelrc", "json"]),
              default="flags", show_default=True, help="How to print the result.")
@_force_local_option
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@_pass_invocation
def env(inv: Invocation, bazel_path: str | None, startup: tuple[str, ...],
        output_base: str | None, prepend: bool, no_cache: bool, quiet: bool,
        fmt: str,
        force_local_path: bool, bazel_args: tuple[str, ...]) -> None:
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
    from bazel_ldfix import report

    repair, code = _plan(inv, bazel_path, startup, output_base, prepend, no_cache,
                         bazel_args, quiet=quiet)
    if repair is None:
        raise BazelError(f"the build step of `bazel test` failed (exit code {code}); "
                         "see Bazel's output above")
    repair = _remote_guard(repair, force_local_path)
    render = {"flags": report.repair_flags, "shell": report.repair_shell,
              "bazelrc": report.repair_bazelrc, "json": report.repair_json}[fmt]
    text = render(repair)
    if fmt != "json" and not quiet:
        click.echo(report.repair_summary(repair), err=True)
        if fmt == "shell" and text:
            click.echo(f"bazel-ldfix: {report.SHELL_CAVEAT}", err=True)
    if text:
        click.echo(text)
    sys.exit(1 if repair.unresolved or (repair.missing and not repair.flags) else 0)


@cli.command(cls=BazelArgsCommand, context_settings=_PASSTHROUGH,
             short_help="Run `bazel test` with the libraries its tests need.")
@_bazel_options
@click.option("--dry-run", is_flag=True,
              help="Run the build step (it builds, runs no test), then print the `bazel "
                   "test` command with the repair instead of running it.")
@click.option("--no-repair", is_flag=True,
              help="Run bazel test as given; only diagnose loader failures afterwards.")
@click.option("--rerun-loader-failures", "rerun_failures", is_flag=True,
              help="Run the tests that failed in the loader once more, with the directories "
                   "the diagnosis found (a library opened with dlopen by name).")
@_force_local_option
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@_pass_invocation
def test(inv: Invocation, bazel_path: str | None, startup: tuple[str, ...],
         output_base: str | None, prepend: bool, no_cache: bool, quiet: bool, dry_run: bool,
         no_repair: bool, rerun_failures: bool,
         force_local_path: bool, bazel_args: tuple[str, ...]) -> None:
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
    from bazel_ldfix import report
    from bazel_ldfix.bazel.runner import output_base as ask_output_base
    from bazel_ldfix.bazel.runner import with_options
    from bazel_ldfix.repair import failopen

    if output_base is not None and not os.path.isdir(output_base):
        raise BadInputError(f"output_base {output_base} does not exist")
    bazel = _make_bazel(inv, bazel_path, startup)
    repair = None if no_repair else _repair_or_fallback(
        inv, bazel_path, startup, output_base, prepend, no_cache, bazel_args, quiet=quiet)
    if repair is None or isinstance(repair, failopen.Fallback):
        # --no-repair, or no repair could be computed: the user's command as given.
        if repair is not None:
            click.echo(repair.message(), err=True)
        if dry_run:
            click.echo(shlex.join(bazel.argv("test", bazel_args)))
            sys.exit(0)
        # Asked before the run: every Bazel command rewrites command.log, which the
        # diagnosis reads.
        base = failopen.attempt(lambda: output_base or ask_output_base(bazel))
        code = bazel.stream("test", bazel_args)
        if isinstance(base, str) and _diagnose_after(inv, base, code, None) and rerun_failures:
            click.echo("bazel-ldfix: no rerun: there is no first LD_LIBRARY_PATH to extend "
                       "(no repair was computed)", err=True)
        sys.exit(code)
    repair = _remote_guard(repair, force_local_path)
    if not quiet:
        click.echo(report.repair_summary(repair), err=True)
    args = with_options(bazel_args, repair.flags)
    if dry_run:
        click.echo(shlex.join(bazel.argv("test", args)))
        sys.exit(0)
    code = bazel.stream("test", args)
    diagnosis = _diagnose_after(inv, repair.output_base, code, repair.ld_library_path)
    if rerun_failures and diagnosis is not None:
        if _remote(repair) and not force_local_path:
            click.echo("bazel-ldfix: no rerun: under remote execution, directories of this "
                       "machine mean nothing to the executors (see `bazel-ldfix fix`)",
                       err=True)
        else:
            code = _rerun(inv, bazel, bazel_args, repair, diagnosis, code, prepend)
    line = None if quiet else report.repaired_line(repair, bazel_args, code)
    if line:
        click.echo(line, err=True)
    sys.exit(code)


def _remote(repair: Repair) -> bool:
    from bazel_ldfix.bazel import execution

    return execution.of(repair.options) is execution.Execution.REMOTE


@cli.command(cls=BazelArgsCommand, context_settings=_PASSTHROUGH,
             short_help="Make the BUILD change that lets the tests load.")
@click.option("--bazel", "bazel_path", metavar="PATH", default=None,
              help="The bazel to run (default: $BAZEL, else bazel).")
@click.option("--startup-option", "startup", multiple=True, metavar="OPT",
              help="A Bazel startup option, e.g. --output_user_root=DIR (repeatable).")
@click.option("--output-base", type=click.Path(file_okay=False), default=None,
              help="Use this output_base instead of asking Bazel.")
@click.option("--no-cache", is_flag=True,
              help="Walk output_base/external; neither read nor write the index cache.")
@click.option("--write", is_flag=True, help="Apply the changes (each file replaced whole, "
                                            "by a rename).")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 when a change is needed.")
@click.option("--verify", is_flag=True,
              help="After --write, run `bazel test BAZEL_ARGS` as given (no --test_env) and "
                   "exit with its code.")
@click.option("--interface", is_flag=True,
              help="Keep linking against the unversioned file (interface_library) and import "
                   "the versioned one as shared_library.")
@click.argument("bazel_args", nargs=-1, type=click.UNPROCESSED)
@_pass_invocation
def fix(inv: Invocation, bazel_path: str | None, startup: tuple[str, ...], output_base: str | None,
        no_cache: bool, write: bool, check: bool, verify: bool, interface: bool,
        bazel_args: tuple[str, ...]) -> None:
    """Make the hermetic BUILD change that lets the tests of `bazel test BAZEL_ARGS` load.

    Prints a unified diff of each file it would edit, and describes what it cannot edit.
    Exit 0: nothing needed, or every change written; 1: a change is needed (--check) or
    only described; 68: a change cannot be made safely (nothing written). The options of
    bazel-ldfix come before Bazel's arguments; a `--` is Bazel's, as with `bazel test`.

    \b
    Examples:
      bazel-ldfix fix //app:vendor_test
      bazel-ldfix fix --write --verify -- //... -//app:ext_test
    """
    from bazel_ldfix import buildfix
    from bazel_ldfix.bazel.runner import workspace_of
    from bazel_ldfix.errors import BazelError, CannotEditError

    if check and (write or verify):
        raise click.UsageError("--check changes nothing; it cannot go with --write/--verify")
    if verify and not write:
        raise click.UsageError("--verify runs the tests after --write")
    repair, code = _plan(inv, bazel_path, startup, output_base, False, no_cache, bazel_args)
    if repair is None:
        raise BazelError(f"the build step of `bazel test` failed (exit code {code}); "
                         "see Bazel's output above")
    workspace = workspace_of(inv.cwd) or inv.cwd
    result = buildfix.plan_for(repair, workspace, interface=interface)
    text = buildfix.to_text(result, workspace)
    if text:
        click.echo(text)
    if result.problems:
        raise CannotEditError(f"{len(result.problems)} change(s) cannot be made (see "
                              "above); nothing written")
    if not result.needed:
        click.echo("bazel-ldfix: no BUILD change needed", err=True)
        sys.exit(0)
    if check or not write:
        sys.exit(1 if check else 0)
    for path in buildfix.write(result.files, repair.output_base):
        click.echo(f"bazel-ldfix: wrote {path}", err=True)
    if verify:
        sys.exit(_make_bazel(inv, bazel_path, startup).stream("test", bazel_args))
    sys.exit(1 if result.described_only else 0)


def _repair_or_fallback(inv: Invocation, bazel_path: str | None, startup: Sequence[str],
                        output_base: str | None, prepend: bool, no_cache: bool,
                        bazel_args: Sequence[str], *, quiet: bool = False
                        ) -> Repair | Fallback:
    """The repair for ``bazel test BAZEL_ARGS``, or why there is none (``test`` then runs
    the command unchanged). Exits with Bazel's code when the build step was interrupted."""
    from bazel_ldfix.repair import failopen
    from bazel_ldfix.repair.rerun import INTERRUPTED

    planned = failopen.attempt(lambda: _plan(inv, bazel_path, startup, output_base, prepend,
                                             no_cache, bazel_args, quiet=quiet))
    if isinstance(planned, failopen.Fallback):
        return planned
    repair, code = planned
    if repair is not None:
        return repair
    if code == INTERRUPTED:
        sys.exit(code)
    return failopen.Fallback(f"the build step of `bazel test` failed (exit code {code})")


def _diagnose_after(inv: Invocation, output_base: str, code: int, library_path: str | None
                    ) -> Diagnosis | None:
    """After Bazel's summary: why tests still failed in the dynamic loader, if they did.

    Never changes the outcome of the run: a diagnosis that fails says so in one line.
    """
    if code != 3:
        return None  # only Bazel's TESTS_FAILED leaves logs to read (diagnose is slow to import)
    from bazel_ldfix.diagnosis import diagnose as diagnosing
    from bazel_ldfix.diagnosis import render
    from bazel_ldfix.repair import failopen

    result = failopen.attempt(lambda: diagnosing.after_test(
        output_base, code, library_path=library_path, on_error=_warn_unreadable,
        shell_library_path=inv.env.get("LD_LIBRARY_PATH")))
    if isinstance(result, failopen.Fallback):
        click.echo(f"bazel-ldfix: cannot diagnose the failed tests: {result.reason}", err=True)
        return None
    if result is not None:
        click.echo(render.to_text(result, prefix="bazel-ldfix: ",
                                  color=_color(inv, sys.stderr)), err=True)
    return result


def _rerun(inv: Invocation, bazel: Bazel, bazel_args: Sequence[str], repair: Repair,
           diagnosis: Diagnosis, first: int, prepend: bool) -> int:
    """The one rerun of the tests that failed in the loader; the two runs' combined code."""
    from bazel_ldfix.diagnosis import logs
    from bazel_ldfix.repair import failopen, rerun

    planned = failopen.attempt(lambda: rerun.plan(diagnosis, repair, prepend=prepend))
    if isinstance(planned, failopen.Fallback):
        click.echo(f"bazel-ldfix: no rerun: {planned.reason}", err=True)
        return first
    for test, why in planned.not_rerun:
        click.echo(f"bazel-ldfix: not rerunning {test}: {why}", err=True)
    if not planned.labels:
        return first
    args = rerun.arguments(bazel_args, repair.patterns, planned.labels, planned.flag)
    if args is None:
        click.echo("bazel-ldfix: no rerun: the target patterns cannot be told apart from "
                   "the options' values", err=True)
        return first
    for soname, directory in planned.added:
        click.echo(f"bazel-ldfix: the run revealed {soname}, in {directory}", err=True)
    click.echo(f"bazel-ldfix: rerunning {' '.join(planned.labels)} with {planned.flag}",
               err=True)
    second = bazel.stream("test", args)
    found = failopen.attempt(lambda: logs.from_command_log(repair.output_base))
    failed = ({log.label for log in found.logs} if isinstance(found, logs.LogSet)
              else set(planned.labels) if second != 0 else set())
    now_pass = [t for t in planned.labels if t not in failed]
    still = [t for t in planned.labels if t in failed]
    if now_pass:
        click.echo(f"bazel-ldfix: after the rerun, {', '.join(now_pass)} "
                   f"pass{'es' if len(now_pass) == 1 else ''} (failed in the loader before)",
                   err=True)
    if still:
        click.echo(f"bazel-ldfix: after the rerun, {', '.join(still)} still "
                   f"fail{'s' if len(still) == 1 else ''}", err=True)
        _diagnose_after(inv, repair.output_base, second, planned.ld_library_path)
    code = rerun.combined_code(first, second, planned)
    left = [*(t for t, _ in planned.not_rerun), *planned.other_failures]
    click.echo(f"bazel-ldfix: exit code {code} (first run {first}, rerun {second}"
               + (f"; not rerun, failed in the first run: {', '.join(left)}" if left else "")
               + ")", err=True)
    return code


@cli.command(short_help="Why failed tests could not load a library; the fix.")
@click.argument("patterns", nargs=-1)
@click.option("--bep", metavar="FILE", default=None,
              help="Read the test results of this --build_event_json_file.")
@click.option("--log", "log_files", metavar="FILE", multiple=True,
              help="Diagnose this test log (repeatable).")
@click.option("--output-base", type=click.Path(file_okay=False), default=None,
              help="Look for libraries here (default: the one the logs come from).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_loader_option
@_pass_invocation
def diagnose(inv: Invocation, patterns: tuple[str, ...], bep: str | None,
             log_files: tuple[str, ...], output_base: str | None, as_json: bool,
             loader: str | None) -> None:
    """Explain why failed tests could not load their libraries, and how to fix it.

    By default, the failed tests of the last `bazel test` in this workspace; target
    PATTERNS narrow them. Exit 0 when no failed test was stopped by the loader, 1 when
    some were, 2 for bad input (a pattern that matches no failed test among them).

    \b
    Examples:
      bazel-ldfix diagnose
      bazel-ldfix diagnose //app:vendor_test
      bazel-ldfix diagnose --json --bep events.json
    """
    from bazel_ldfix.diagnosis import diagnose as diagnosing
    from bazel_ldfix.diagnosis import logs, model, render

    found = logs.find(inv.cwd, bep=bep, log_files=log_files,
                      output_base=output_base, patterns=patterns)
    if patterns and not found.logs:
        every = logs.find(inv.cwd, bep=bep, log_files=log_files,
                          output_base=output_base, patterns=())
        raise BadInputError(diagnosing.unmatched_patterns(
            patterns, every, logs.package_of(inv.cwd)))
    result = diagnosing.diagnose(found, on_error=_warn_unreadable,
                                 shell_library_path=inv.env.get("LD_LIBRARY_PATH"),
                                 **model.with_loader(_user_path(inv, loader)))
    click.echo(render.to_json(result) if as_json
               else render.to_text(result, color=_color(inv)))
    sys.exit(result.exit_code)


@cli.command(short_help="Where under output_base/external each SONAME is.")
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
@_pass_invocation
def locate(inv: Invocation, sonames: tuple[str, ...], output_base: str | None,
           bazel_path: str | None, startup: tuple[str, ...], as_json: bool, no_cache: bool) -> None:
    """Every directory under output_base/external holding each SONAME, best first.

    Best: a copy this machine's loader would take (ELF class, machine, the loader's other
    checks), then the shortest path. Exit 1 when some SONAME exists nowhere.

    \b
    Examples:
      bazel-ldfix locate libvendor.so.3
      bazel-ldfix locate --json --output-base "$(bazel info output_base)" libcudart.so.12
    """
    from bazel_ldfix import elf
    from bazel_ldfix.outputbase import index, indexcache
    from bazel_ldfix.report import locate_json, locate_text

    if output_base is None:
        from bazel_ldfix.bazel.runner import output_base as ask_output_base

        output_base = ask_output_base(_make_bazel(inv, bazel_path, startup))
    base = output_base
    root = os.path.join(base, "external")
    if not os.path.isdir(base):
        raise BadInputError(f"output_base {base} does not exist")
    if not os.path.isdir(root):
        # What a Bazel server writes into its output_base on start (Bazel 4 to 8).
        started = any(os.path.lexists(os.path.join(base, n)) for n in ("server", "install"))
        if not started:
            raise BadInputError(f"{root} does not exist: is {base} a Bazel output_base?")
        raise BadInputError(f"no external repository has been fetched into {base} yet (it has "
                            "no external/ directory): build or fetch first, e.g. "
                            "`bazel fetch //...`, then run locate again")
    cache_dir = None if no_cache else indexcache.default_dir(inv.env)
    # The copies this interpreter's loader would take: the host's class and machine.
    found = index.copies(sonames, [root], elf.read_header(sys.executable),
                         cache_dir=cache_dir, on_error=_warn_unreadable,
                         progress=index.Progress(sys.stderr))
    click.echo(locate_json(found) if as_json else locate_text(found, root))
    sys.exit(0 if all(found.values()) else 1)


def _make_bazel(inv: Invocation, bazel_path: str | None, startup: Sequence[str]) -> Bazel:
    from bazel_ldfix.bazel.runner import Bazel

    executable = bazel_path or inv.env.get("BAZEL") or "bazel"
    return Bazel(executable, inv.cwd, dict(inv.env), tuple(startup),
                 waiting=_say_waiting if sys.stderr.isatty() else None)


def _say_waiting(cmd: Sequence[str]) -> None:
    """On a terminal, a Bazel command that takes a while (its server starting) is named."""
    click.echo(f"bazel-ldfix: waiting for `{shlex.join(cmd)}` (the Bazel server may be "
               "starting)...", err=True)


def _plan(inv: Invocation, bazel_path: str | None, startup: Sequence[str],
          output_base: str | None, prepend: bool, no_cache: bool, bazel_args: Sequence[str],
          *, quiet: bool = False
          ) -> tuple[Repair | None, int]:
    from bazel_ldfix.outputbase import index, indexcache
    from bazel_ldfix.repair.plan import repair_tests

    def cache_dir(base: str) -> str | None:
        del base  # one per-user directory, whatever the output_base
        return indexcache.default_dir(inv.env)

    return repair_tests(_make_bazel(inv, bazel_path, startup), bazel_args, inv.env,
                        output_base=output_base, prepend=prepend,
                        cache_dir=None if no_cache else cache_dir,
                        progress=None if quiet else index.Progress(sys.stderr),
                        on_error=_warn_unreadable)


def _warn_unreadable(path: str, exc: OSError) -> None:
    click.echo(f"bazel-ldfix: warning: cannot read {_printable(path)}: {exc.strerror}",
               err=True)


@cli.command(short_help="How the loader would find what FILES need.")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a tree.")
@click.option("--library-path", metavar="P", default=None,
              help="Use P instead of $LD_LIBRARY_PATH (as ld.so --library-path).")
@click.option("--inhibit-cache", is_flag=True, help="Ignore /etc/ld.so.cache.")
@click.option("--root", type=click.Path(exists=True, file_okay=False), default="/",
              help="Resolve as if DIR were / (a sysroot or container image).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show the system libraries too (folded by default, as libtree does).")
@_loader_option
@_pass_invocation
def resolve(inv: Invocation, files: tuple[str, ...], as_json: bool,
            library_path: str | None, inhibit_cache: bool, root: str, verbose: bool,
            loader: str | None) -> None:
    """Show how the loader finds each shared object FILES need, and why it misses any.

    Exit 0 when everything resolves, 1 when something is missing, 2 for bad input.

    \b
    Examples:
      bazel-ldfix resolve bazel-bin/app/vendor_test
      bazel-ldfix resolve --library-path /opt/sdk/lib --json bazel-bin/app/vendor_test
    """
    from bazel_ldfix import report
    from bazel_ldfix.loader.resolve import resolve_file, unversioned_files

    options = _options(inv, library_path, inhibit_cache, root, loader)
    results = []
    bad = False
    for path in files:
        try:
            results.append(resolve_file(path, options))
        except BadInputError as exc:
            click.echo(f"error: {_printable(_explain_bad(exc))}", err=True)
            bad = True
    if results:
        if as_json:
            click.echo(report.resolutions_json(results))
        else:
            color = _color(inv)
            click.echo("\n".join(report.resolution_tree(
                r, color=color, verbose=verbose,
                unversioned={lib.name: unversioned_files(lib) for lib in r.libraries
                             if lib.path is None}) for r in results))
    stops = any(r.missing or r.error or any(v.fatal for v in r.versions) for r in results)
    sys.exit(2 if bad else 1 if stops else 0)


@cli.command(short_help="Ask the real loader about FILES; compare.")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--library-path", metavar="P", default=None,
              help="Use P instead of $LD_LIBRARY_PATH (as ld.so --library-path).")
@click.option("--inhibit-cache/--use-cache", default=True, show_default=True,
              help="Leave /etc/ld.so.cache out, so that it cannot hide a missing library.")
@click.option("--matrix", "matrix_dirs", metavar="DIR", multiple=True,
              help="Which of these directories are needed (repeatable).")
@_loader_option
@_pass_invocation
def check(inv: Invocation, files: tuple[str, ...], as_json: bool, library_path: str | None,
          inhibit_cache: bool, matrix_dirs: tuple[str, ...], loader: str | None) -> None:
    """Run the real loader on FILES (never the files themselves) and compare with the model.

    Exit 0 when everything loads, 1 when something is missing, 2 for bad input, 3 when the
    model disagrees with the loader.

    \b
    Examples:
      bazel-ldfix check bazel-bin/app/vendor_test
      bazel-ldfix check --matrix /opt/a/lib --matrix /opt/b/lib bazel-bin/app/vendor_test
    """
    from bazel_ldfix import report
    from bazel_ldfix.loader import check as checking

    options = _options(inv, library_path, inhibit_cache, "/", loader)
    bad = False
    if matrix_dirs:
        matrices = []
        for path in files:
            try:
                matrices.append(checking.matrix(path, matrix_dirs, options))
            except BadInputError as exc:
                click.echo(f"error: {_printable(_explain_bad(exc))}", err=True)
                bad = True
        if matrices:
            click.echo(report.matrix_json(matrices) if as_json
                       else "\n".join(report.matrix_text(m) for m in matrices))
        sys.exit(2 if bad else 0 if all(m.smallest is not None for m in matrices) else 1)
    results = []
    for path in files:
        try:
            results.append(checking.check_file(path, options))
        except BadInputError as exc:
            click.echo(f"error: {_printable(_explain_bad(exc))}", err=True)
            bad = True
    if results:
        color = _color(inv)
        click.echo(report.checks_json(results) if as_json
                   else "\n".join(report.check_text(r, color=color) for r in results))
    if bad:
        sys.exit(2)
    if any(r.disagreements for r in results):
        sys.exit(3)
    sys.exit(0 if all(r.loads for r in results) else 1)


_KINDS = ("shared-object", "pie", "executable", "relocatable", "core", "other-elf",
          "static-archive", "thin-archive", "linker-script", "not-elf", "empty", "missing",
          "directory", "special")


@cli.command(short_help="What each FILE really is, read from its bytes.")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--require", "required", type=click.Choice(_KINDS), default=None,
              metavar="KIND", help=f"Exit 1 unless every FILE is of this kind: "
                                   f"{', '.join(_KINDS)}.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def inspect(files: tuple[str, ...], required: str | None, as_json: bool) -> None:
    """What each FILE really is, decided by its bytes, never its name.

    Exit 0 when every FILE is of the --require'd kind (or none is asked), 1 when some is
    not, 2 when a file cannot be read or is corrupt.

    \b
    Examples:
      bazel-ldfix inspect third_party/vendor/lib/libvendor.so
      bazel-ldfix inspect --require shared-object --json lib/libvendor.so.3
    """
    from bazel_ldfix.linkage import kinds, render

    want = kinds.Kind(required) if required is not None else None
    docs = []
    texts = []
    bad = mismatched = False
    for path in files:
        try:
            item = kinds.inspect(path)
        except BadInputError as exc:
            click.echo(f"error: {_explain_bad(exc)}", err=True)
            bad = True
            docs.append(render.inspection_document(
                kinds.Inspection(path, kinds.Kind.NOT_ELF), want, error=str(exc)))
            continue
        docs.append(render.inspection_document(item, want))
        texts.append(render.inspection_text(item))
        problem = item.mismatch(want) if want is not None else None
        if problem is not None and want is not None:
            mismatched = True
            click.echo(f"bazel-ldfix: {render.printable(path)} is not {want.words}: {problem}",
                       err=True)
    if as_json:
        click.echo(render.inspections_json(docs))
    elif texts:
        click.echo("\n".join(texts))
    sys.exit(2 if bad else 1 if mismatched else 0)


def _loader_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The environment options of `resolve`, for commands that resolve a closure."""
    func = click.option("--root", type=click.Path(exists=True, file_okay=False), default="/",
                        help="Resolve as if DIR were / (a sysroot or container image).")(func)
    func = click.option("--inhibit-cache", is_flag=True, help="Ignore /etc/ld.so.cache.")(func)
    func = click.option("--library-path", metavar="P", default=None,
                        help="Use P instead of $LD_LIBRARY_PATH (as ld.so --library-path)."
                        )(func)
    return func


@cli.command("assert-linkage", short_help="Fail unless FILE links as asserted.")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--needs", "needs", multiple=True, metavar="SONAME",
              help="FILE has a DT_NEEDED entry SONAME (repeatable).")
@click.option("--imports", "imports", multiple=True, metavar="SYMBOL",
              help="FILE's .dynsym has SYMBOL undefined: it takes it from a library "
                   "(repeatable).")
@click.option("--no-defines", "no_defines", multiple=True, metavar="SYMBOL",
              help="FILE defines no SYMBOL, in .dynsym nor in .symtab (repeatable).")
@click.option("--binds", "binds", multiple=True, metavar="SYMBOL=SONAME",
              help="FILE's references to SYMBOL bind to SONAME's definition in the loader's "
                   "global lookup order (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_loader_options
@_pass_invocation
def assert_linkage(inv: Invocation, file: str, needs: tuple[str, ...], imports: tuple[str, ...],
                   no_defines: tuple[str, ...], binds: tuple[str, ...], as_json: bool,
                   library_path: str | None, inhibit_cache: bool, root: str) -> None:
    """Fail unless FILE links as asserted; every assertion is checked and reported.

    SYMBOL is a mangled name or a demangled C++ name; * matches any text, and a name
    matches what is declared inside it (a class its constructors and destructor).
    Exit 0 when every assertion holds, 1 when some fails, 2 for bad input, 68 when a C++
    pattern needs c++filt and there is none.

    \b
    Examples:
      bazel-ldfix assert-linkage --needs libvendor.so.3 bazel-bin/app/vendor_test
      bazel-ldfix assert-linkage --binds 'vendor_value=libvendor.so.3' bazel-bin/app/_ext.so
    """
    import shutil

    from bazel_ldfix.linkage import gate, names, render

    asked = gate.Assertions(needs, imports, no_defines, gate.parse_binds(binds))
    if not any((needs, imports, no_defines, binds)):
        raise BadInputError("nothing to assert: give --needs, --imports, --no-defines or "
                            "--binds")
    report = gate.check(file, asked, _options(inv, library_path, inhibit_cache, root),
                        names.Demangler(shutil.which("c++filt")))
    click.echo(render.gate_json(report) if as_json else render.gate_text(report))
    sys.exit(0 if report.ok else 1)


@cli.command(short_help="Symbols several loaded objects define, and split state.")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_loader_options
@_pass_invocation
def dupes(inv: Invocation, file: str, as_json: bool, library_path: str | None, inhibit_cache: bool,
          root: str) -> None:
    """Dynamic symbols defined by more than one object of FILE's load, and which split state.

    Thread-local and data objects first. Exit 0 when interposition unifies every duplicate,
    1 when some object keeps its own copy of a name another object defines, 2 for bad input.

    \b
    Examples:
      bazel-ldfix dupes bazel-bin/app/vendor_test
      bazel-ldfix dupes --json bazel-bin/app/_ext.so
    """
    import shutil

    from bazel_ldfix.linkage import gate, kinds, names, render
    from bazel_ldfix.linkage.dupes import find_dupes

    found = kinds.inspect(file)
    if found.kind not in gate.LINKED_KINDS:
        raise BadInputError(f"{file}: {found.kind.words}, not a linked ELF object "
                            "(a shared object or a program)")
    report = find_dupes(file, _options(inv, library_path, inhibit_cache, root))
    demangled: dict[str, str] = {}
    program = shutil.which("c++filt")
    if program is not None:  # names are shown demangled when a demangler is there
        demangled = names.Demangler(program).demangle(d.name for d in report.duplicates)
    click.echo(render.dupes_json(report, demangled) if as_json
               else render.dupes_text(report, demangled))
    sys.exit(1 if report.split else 0)


def _options(inv: Invocation, library_path: str | None, inhibit_cache: bool,
             root: str, loader: str | None = None) -> Options:
    from bazel_ldfix.loader.resolve import Options

    value = library_path if library_path is not None else inv.env.get("LD_LIBRARY_PATH")
    return Options(value, inhibit_cache, os.path.normpath(os.path.join(inv.cwd, root)),
                   inv.cwd, _user_path(inv, loader))


def _user_path(inv: Invocation, path: str | None) -> str | None:
    """A path the user gave, taken from where the user is."""
    return None if path is None else os.path.normpath(os.path.join(inv.cwd, path))


def _explain_bad(exc: BadInputError) -> str:
    """glibc's terse words, with what they usually mean for a user's file."""
    text = str(exc)
    if text.endswith(": invalid ELF header"):
        return text[: -len("invalid ELF header")] + (
            "not an ELF file (a linker script, a Git LFS pointer or a text file?)")
    if text.endswith(": file too short"):
        return text + " (empty or truncated)"
    return text


def _printable(text: str) -> str:
    from bazel_ldfix.quoting import printable

    return printable(text)


def _color(inv: Invocation, stream: Any = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR set (every command alike)."""
    stream = sys.stdout if stream is None else stream
    return bool(stream.isatty()) and "NO_COLOR" not in inv.env


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json``, ``--format json``) in the tool's
    own options: then an error is also a JSON document on stdout, for the script reading it.
    """
    own = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in own or "--format=json" in own or any(
        a == "--format" and b == "json" for a, b in itertools.pairwise(own))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: LdfixError becomes one line on stderr and its exit code."""
    inv = from_environ(os.environ, os.getcwd())
    if inv.by_bazel_run:
        # `bazel run` starts us in our runfiles tree: go where the user is, so that every
        # relative path given (and every check click makes of one) means what it means there.
        try:
            os.chdir(inv.cwd)
        except OSError as exc:
            click.echo(f"error: cannot enter {inv.cwd}: {exc.strerror}", err=True)
            return 2
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="bazel-ldfix",
                 standalone_mode=False, obj=inv)
    except LdfixError as exc:
        # Escaped, so that a name cannot forge a line; only a failed Bazel step's message
        # has lines of its own (Bazel's stderr, indented), escaped one by one.
        message = str(exc)
        text = "\n".join(_printable(line) for line in message.split("\n")) \
            if isinstance(exc, BazelError) else _printable(message)
        click.echo(f"error: {text}", err=True)
        if _wants_json(list(argv) if argv is not None else sys.argv[1:]):
            from bazel_ldfix.report import error_json

            click.echo(error_json(str(exc), exc.exit_code))
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:
        return 0
    return 0

"""The group, and ``main``: the one place that builds the session and maps what a command
ends with (an exit code, an :class:`LdfixError`, click's own exceptions) to the process's
exit code."""

from __future__ import annotations

import itertools
import os
import shlex
import sys
from collections.abc import Sequence

import click
from click import formatting

from bazel_ldfix import __version__
from bazel_ldfix.cli import registry
from bazel_ldfix.cli.arguments import BazelArgsCommand
from bazel_ldfix.cli.process import from_process
from bazel_ldfix.errors import BazelError, BazelNotFoundError, LdfixError
from bazel_ldfix.quoting import printable
from bazel_ldfix.session import Session


def _help_width() -> int:
    """The width click's HelpFormatter picks (80 columns at most, 50 at least), found as
    ``shutil.get_terminal_size`` finds it, without importing shutil (and the compression
    modules it imports) for one number."""
    if formatting.FORCED_WIDTH is not None:
        return formatting.FORCED_WIDTH
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0 and sys.__stdout__ is not None:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return max(min(columns or 80, 80) - 2, 50)


class _Context(click.Context):
    def make_formatter(self) -> click.HelpFormatter:
        width = self.terminal_width if self.terminal_width is not None else _help_width()
        return self.formatter_class(width=width, max_width=self.max_content_width)


class _Group(click.Group):
    """The commands of :data:`registry.COMMANDS`, in its order; each one's module is
    imported only when it runs, and ``--help`` lists them all from the table alone."""

    context_class = _Context

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(registry.COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return registry.load(cmd_name) if cmd_name in registry.COMMANDS else None

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # Click suggests from the commands it holds: here, from the table.
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=registry.COMMANDS, ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.summary)
                                for name, entry in registry.COMMANDS.items()])


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="bazel-ldfix")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Repair and explain Bazel tests that fail at load time.

    \b
    Start here:
      bazel-ldfix test //...         bazel test, with the libraries the tests need
      bazel-ldfix diagnose           after a failed bazel test: why, and the fix
      bazel-ldfix fix --write //...  the BUILD change that fixes it for good
    """
    if ctx.obj is None:  # called as a library (CliRunner), not through main()
        ctx.obj = from_process()


@cli.result_callback()
@click.pass_context
def _exit_with(ctx: click.Context, code: int | None) -> None:
    """Every command returns its exit code; click's own main then exits with it too."""
    ctx.exit(code or 0)


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json``, ``--format json``) in the tool's
    own options: then an error is also a JSON document on stdout, for the script reading it.
    """
    own = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in own or "--format=json" in own or any(
        a == "--format" and b == "json" for a, b in itertools.pairwise(own))


def _next_step(exc: BazelNotFoundError, session: Session) -> str:
    """What to do when Bazel cannot be started: where the name came from, and the way out."""
    executable = exc.cmd[0] if exc.cmd else "bazel"
    if session.env.get("BAZEL") == executable:
        return " (named by $BAZEL; set it to a Bazel that runs, or unset it)"
    if "/" in executable:
        return " (named by --bazel)"
    return (f"; no `{executable}` on PATH: install Bazel (Bazelisk, or Debian's "
            "bazel-bootstrap), or name one with --bazel PATH or BAZEL=PATH")


# Click 8.2+ asks for the help of a command given no arguments by this error (older ones
# print it themselves); it is shown as click shows it.
_NO_ARGS: type[click.UsageError] | tuple[()] = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_line(exc: click.UsageError, argv: Sequence[str], prog: str) -> str:
    """Click's words for a command line it cannot read, as one line, and where the help is
    (the rest of click's usage block is one ``--help`` away), run as the user ran the tool
    (``prog``). The words are escaped, never reflowed: a name in them stays as given."""
    words = printable(exc.format_message().strip()).removesuffix(".")
    if words[1:2].islower():
        words = words[0].lower() + words[1:]
    if exc.ctx is not None:     # its path starts with the group's name, "bazel-ldfix"
        where = " ".join([prog, *exc.ctx.command_path.split()[1:]])
    else:   # click's parser leaves it out: the command is the first word, if it is one
        named = next((a for a in argv if not a.startswith("-")), None)
        where = f"{prog} {named}" if named in registry.COMMANDS else prog
    return f"{words} (see `{printable(where)} --help`)"


def _before_command(exc: click.UsageError, argv: Sequence[str], prog: str) -> str | None:
    """An option the group does not take, given before a command (``bazel-ldfix
    --config=ci test //...``): the line that says to put it after the command, with the
    command line that does; None for any other error."""
    if not isinstance(exc, click.NoSuchOption) or exc.ctx is None or exc.ctx.parent:
        return None
    at = next((i for i, word in enumerate(argv) if word in registry.COMMANDS), None)
    if at is None or not any(w.split("=", 1)[0] == exc.option_name for w in argv[:at]):
        return None
    moved = [w for w in argv[:at] if w not in ("--", "-h", "--help", "--version")]
    name, rest = argv[at], list(argv[at + 1:])
    fixed = [name, *moved, *rest]
    command = registry.load(name)
    whose = f"the options of bazel-ldfix {name}"
    if isinstance(command, BazelArgsCommand):
        whose += " and Bazel's"
        # The command's own options first, then Bazel's arguments, its moved ones first.
        ctx = click.Context(command)
        own, bazels = command.split(ctx, rest)
        mine = [w for w in moved if command.own_option(ctx, w)]
        fixed = [name, *mine, *own, *[w for w in moved if w not in mine], *bazels]
    are = "are" if len(moved) > 1 else "is"
    return (f"{printable(' '.join(moved))} {are} given before the command {name}; {whose} "
            f"go after it: {printable(prog + ' ' + shlex.join(fixed))}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: a command's exit code, or LdfixError as one line on stderr and its code."""
    given = list(argv) if argv is not None else sys.argv[1:]
    try:
        # Called with no arguments, main is the entry point: sys.argv says how the tool
        # was run.
        session = from_process(own_argv=argv is None)
    except LdfixError as exc:
        return _failed(exc, given, None)
    if session.by_bazel_run:
        # `bazel run` starts us in our runfiles tree: go where the user is, so that every
        # relative path given (and every check click makes of one) means what it means there.
        try:
            os.chdir(session.cwd)
        except OSError as exc:
            click.echo(f"error: cannot enter {printable(session.cwd)}: {exc.strerror}",
                       err=True)
            return 2
    try:
        code = cli.main(args=list(argv) if argv is not None else None,
                        prog_name="bazel-ldfix", standalone_mode=False, obj=session)
    except LdfixError as exc:
        return _failed(exc, given, session)
    except _NO_ARGS as exc:
        exc.show()   # the help itself, for a command given no arguments
        return 2
    except click.UsageError as exc:
        line = _before_command(exc, given, session.prog) or _usage_line(exc, given,
                                                                        session.prog)
        click.echo(f"error: {line}", err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return 130
    except SystemExit as exc:
        # Not from a command (they return their code): click's main ends with it when
        # stdout is a closed pipe.
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:
        return 0
    return code if isinstance(code, int) else 0


def _failed(exc: LdfixError, argv: Sequence[str], session: Session | None) -> int:
    """An error as one line on stderr (and a JSON document on stdout when the command line
    asks for JSON); its exit code. ``session``: None when none could be built."""
    # Escaped, so that a name cannot forge a line; only a failed Bazel step's message has
    # lines of its own (Bazel's stderr, indented), escaped one by one.
    lines = exc.lines() if isinstance(exc, BazelError) else [str(exc)]
    if isinstance(exc, BazelNotFoundError) and session is not None:
        lines[0] += _next_step(exc, session)
    click.echo(f"error: {chr(10).join(printable(line) for line in lines)}", err=True)
    if _wants_json(argv):
        # Here: +5 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.render.common import error_json

        click.echo(error_json(str(exc), exc.exit_code))
    return exc.exit_code

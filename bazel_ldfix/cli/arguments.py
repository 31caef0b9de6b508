"""What the commands share in how they read their arguments: the command classes that run
Bazel, the options declared once (each group packed into one frozen dataclass), and the
words for a file the loader's terse error describes."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from bazel_ldfix import PROG, outputbase
from bazel_ldfix.errors import BadInputError, BuildStepError, NotElfError
from bazel_ldfix.quoting import printable
from bazel_ldfix.session import BazelChoice, LoaderChoice, Session

if TYPE_CHECKING:
    from bazel_ldfix.bazel.options import OptionNames

PASSTHROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False,
               "help_option_names": ["-h", "--help"]}


class BazelCommand(click.Command):
    """A command that starts Bazel. While it runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT end
    every Bazel it started for itself (:mod:`bazel_ldfix.children`), and it exits
    128 + N."""

    def invoke(self, ctx: click.Context) -> Any:
        # Here: +56 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix import children

        try:
            with children.ended_on_signals():
                return self.run(ctx)
        except children.Interrupted as stop:
            # Every Bazel the tool started for itself is ended already. A terminal closed
            # (SIGHUP) may take stderr with it: the exit code still says it.
            with contextlib.suppress(OSError):
                click.echo(f"bazel-ldfix: interrupted by {stop.name}; stopped (exit code "
                           f"{stop.exit_code})", err=True)
            return stop.exit_code

    def run(self, ctx: click.Context) -> Any:
        """The command itself, with the signals handled."""
        return super().invoke(ctx)


class BazelArgsCommand(BazelCommand):
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
        own, rest = self.split(ctx, args)
        self._refuse_misplaced(ctx, own, rest, takes_value, flags)
        return super().parse_args(ctx, [*own, "--", *rest])

    def split(self, ctx: click.Context, args: Sequence[str]) -> tuple[list[str], list[str]]:
        """The tool's own options that ``args`` start with, and Bazel's arguments after."""
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
        return own, list(args[at:])

    def own_option(self, ctx: click.Context, word: str) -> bool:
        """Whether ``word`` is one of the command's own options (with its ``=value``)."""
        takes_value, flags = self._own_options(ctx)
        return word in flags or word.split("=", 1)[0] in takes_value

    def run(self, ctx: click.Context) -> Any:
        """When Bazel refuses its command line (exit code 2) and one of its arguments was
        meant for the tool (:meth:`_meant`), the error says what was meant; the exit code
        stays 2, Bazel's. Bazel is asked which words it takes with the signals still
        handled."""
        # Here: +56 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.bazel.exitcodes import COMMAND_LINE_ERROR

        try:
            code = super().run(ctx)
        except BuildStepError as exc:
            meant = self._meant(ctx) if exc.code == COMMAND_LINE_ERROR else None
            if meant is None:
                raise
            raise BadInputError(_refused(meant)) from None
        if code == COMMAND_LINE_ERROR:
            # `test` fell back to `bazel test` as given, which Bazel refused.
            meant = self._meant(ctx)
            if meant is not None:
                click.echo(f"error: {printable(_refused(meant))}", err=True)
        return code

    def _meant(self, ctx: click.Context) -> str | None:
        """What the tool's option among Bazel's arguments was meant to be, or None: a flag
        of the tool's given a value (``--prepend=true``), or, of the words this Bazel's
        ``test`` does not take (``bazel help completion`` says which), the first close to
        an option of the tool's (``--wrte``: ``--write``). None when Bazel cannot be
        asked: a word Bazel takes is never guessed at."""
        # Here: +56 ms CPU on --help at the top (benchmarks/START.md).
        import difflib

        takes_value, flags = self._own_options(ctx)
        words = [w for w in itertools.takewhile(lambda w: w != "--",
                                                ctx.params.get("bazel_args", ()))
                 if w.startswith("--")]
        for word in words:
            name = word.split("=", 1)[0]
            if name in flags and "=" in word:
                return (f"{name} is a flag of bazel-ldfix {ctx.info_name} and takes no "
                        f"value: write {name} alone, before Bazel's arguments")
        known = self._bazel_option_names(ctx) if words else None
        if known is None:
            return None
        own = sorted(n for n in takes_value | flags if n.startswith("--"))
        for word in words:
            name = word.split("=", 1)[0]
            if name in known.test or name in own:
                continue
            if name in known.startup:
                return (f"{name} is a startup option of Bazel's, not an option of its test "
                        f"command: give it as {shlex.quote('--startup-option=' + word)}, "
                        "before Bazel's arguments")
            near = difflib.get_close_matches(name, own, n=1, cutoff=0.75)
            if near:
                return (f"{name} is not an option of bazel-ldfix {ctx.info_name}; did you mean "
                        f"{near[0]}? The tool's options go before Bazel's arguments")
        return None

    @staticmethod
    def _bazel_option_names(ctx: click.Context) -> OptionNames | None:
        # Here: +56 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.bazel.options import option_names

        session = ctx.find_object(Session)
        if session is None:
            return None
        bazel = session.bazel(BazelChoice(ctx.params.get("bazel_path"),
                                          tuple(ctx.params.get("startup") or ()),
                                          ctx.params.get("bazel_timeout")))
        return option_names(bazel)

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
            session = ctx.find_object(Session)
            prog = session.prog if session is not None else PROG
            fixed = prog + " " + shlex.join([ctx.info_name or self.name or "",
                                             *own, *moved, *kept])
            are, it = ("are options", "them") if len(names) > 1 else ("is an option", "it")
            raise BadInputError(f"{options} {are} of bazel-ldfix, not of Bazel; "
                                f"put {it} before the Bazel arguments: {fixed}")




def _refused(meant: str) -> str:
    return f"Bazel refused its command line (exit code 2, its error is above): {meant}"


def _quiet(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """-q is the session's: every part of the command reads it there."""
    session = ctx.find_object(Session)
    if value and session is not None:
        ctx.obj = session.quieted()


def _packed(func: Callable[..., Any], names: Sequence[str], into: str,
            make: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` called with the parameters ``names`` made one, ``into`` (``make`` of them)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs[into] = make(**{name: kwargs.pop(name) for name in names})
        return func(*args, **kwargs)

    return wrapper


def bazel_choice(*, output_base_help: str = "Use this output_base instead of asking Bazel.",
                 no_cache_help: str = "Walk output_base/external and query the rules' env; "
                                      "read no cache (the repair made replaces a kept one "
                                      "that differs).",
                 bazel_help: str = "The bazel to run (default: $BAZEL, else bazel)."
                 ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options that say which Bazel a command runs, and how, packed into one
    :class:`~bazel_ldfix.session.BazelChoice` given as ``bazel``."""
    # Here: +56 ms CPU on --help at the top (benchmarks/START.md).
    from bazel_ldfix.bazel.client import DEFAULT_TIMEOUT

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        func = _packed(func, ("bazel_path", "startup", "bazel_timeout", "output_base",
                              "no_cache"), "bazel",
                       lambda bazel_path, startup, bazel_timeout, output_base, no_cache:
                       BazelChoice(bazel_path, tuple(startup), bazel_timeout, output_base,
                                   no_cache))
        func = click.option("--bazel", "bazel_path", metavar="PATH", default=None,
                            help=bazel_help)(func)
        func = click.option("--startup-option", "startup", multiple=True, metavar="OPT",
                            help="A Bazel startup option, e.g. --output_user_root=DIR "
                                 "(repeatable).")(func)
        func = output_base_option(output_base_help)(func)
        func = click.option("--no-cache", is_flag=True, help=no_cache_help)(func)
        return click.option(
            "--bazel-timeout", "bazel_timeout", type=click.FloatRange(min=0),
            metavar="SECONDS", default=DEFAULT_TIMEOUT, show_default=True,
            help="End a `bazel info`, `bazel query` or download step of bazel-ldfix's own "
                 "after this long (0: no limit); `test` then runs `bazel test` unchanged."
        )(func)

    return decorate


def _checked_output_base(_ctx: click.Context, _param: click.Parameter,
                         value: str | None) -> str | None:
    """An --output-base that is not there is the user's mistake: said before Bazel runs."""
    return None if value is None else outputbase.checked(value)


def output_base_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--output-base", type=click.Path(file_okay=False), default=None,
                        callback=_checked_output_base, help=help_text)


def bazel_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options of the commands that plan a repair from `bazel test BAZEL_ARGS`."""
    func = bazel_choice()(func)
    func = click.option("--prepend", is_flag=True,
                        help="Put the added directories before the existing entries.")(func)
    return quiet_option(func)


def quiet_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=_quiet,
                        help="Print nothing of bazel-ldfix's own but errors, the "
                             "diagnosis of tests that failed in the loader, and leftover "
                             "warnings (for CI logs).")(func)


github_option = click.option(
    "--github/--no-github", "github", default=None,
    help="Print GitHub Actions annotations: an ::error per test the loader stopped, a "
         "::notice per repair (default: when GITHUB_ACTIONS=true).")


def _checked_loader(_ctx: click.Context, _param: click.Parameter,
                    value: str | None) -> str | None:
    """A --loader that is not a file is the user's mistake, whatever the command reaches."""
    if value is not None and not os.path.isfile(value):
        raise BadInputError(f"--loader {value}: not a regular file")
    return value


loader_option = click.option(
    "--loader", metavar="PATH", default=None, callback=_checked_loader,
    help="Ask this dynamic loader how it searches (default: this host's own, if only root "
         "can change it). A file's own PT_INTERP is never run.")


def force_local_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--force-local-path", is_flag=True,
                        help="Add the output_base paths even under --remote_executor (the "
                             "tests run on this machine).")(func)


def loader_choice(*, root: bool = True, loader: bool = True, inhibit_default: bool = False
                  ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options that say how a command's files are resolved, packed into one
    :class:`~bazel_ldfix.session.LoaderChoice` given as ``model``: --library-path,
    --inhibit-cache (``inhibit_default``: on unless --use-cache), and --root and --loader
    where the command has them."""
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        names = ("library_path", "inhibit_cache", *(("root",) if root else ()),
                 *(("loader",) if loader else ()))
        func = _packed(func, names, "model", LoaderChoice)
        if loader:
            func = loader_option(func)
        if root:
            func = click.option("--root", type=click.Path(exists=True, file_okay=False),
                                default="/",
                                help="Resolve as if DIR were / (a sysroot or container "
                                     "image).")(func)
        if inhibit_default:
            func = click.option("--inhibit-cache/--use-cache", default=True, show_default=True,
                                help="Leave /etc/ld.so.cache out, so that it cannot hide a "
                                     "missing library.")(func)
        else:
            func = click.option("--inhibit-cache", is_flag=True,
                                help="Ignore /etc/ld.so.cache.")(func)
        return click.option("--library-path", metavar="P", default=None,
                            help="Use P instead of $LD_LIBRARY_PATH (as ld.so --library-path)."
                            )(func)

    return decorate


def options_into(cls: type[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command's parameters named like the fields of the frozen dataclass ``cls``, made
    one ``options``: the command reads its options from one value."""
    names = tuple(field.name for field in dataclasses.fields(cls))
    return lambda func: _packed(func, names, "options", cls)


def explain_bad(exc: BadInputError) -> str:
    """glibc's terse words, with what they usually mean for a user's file."""
    text = str(exc)
    if text.endswith(": invalid ELF header"):
        if isinstance(exc, NotElfError) and exc.archive:
            return text[: -len("invalid ELF header")] + (
                "not an ELF file: a static archive (ar), which is linked into programs, "
                "never loaded")
        return text[: -len("invalid ELF header")] + (
            "not an ELF file (a linker script, a Git LFS pointer or a text file?)")
    if text.endswith(": file too short"):
        return text + " (empty or truncated)"
    return text

"""The composition root: the one :class:`~bazel_ldfix.session.Session` of this process.

``main`` (or the group, when called as a library) builds it from the process's environment
and working directory, with the outputs on the process's stdout and stderr; commands
receive it through :data:`pass_session` (click's ``ctx.obj`` and ``make_pass_decorator``).
Nothing else reads ``os.environ`` or the process's own directory.
"""

from __future__ import annotations

import errno
import os
import shlex
import sys
from collections.abc import Mapping, Sequence

import click

from bazel_ldfix import PROG
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.quoting import printable
from bazel_ldfix.session import Session, of_process, replaced


def from_process(*, own_argv: bool = False) -> Session:
    """The session of this process: its environment and working directory, its words on
    stderr (escaped where they name a file), its results on stdout. BadInputError when that
    directory is gone (removed while the shell sat in it). ``own_argv``: ``sys.argv`` is the
    tool's own command line (``main`` as the entry point), so it says how the user ran the
    tool; else (a library call, a test) the suggested commands say ``bazel-ldfix``."""
    try:
        cwd = os.getcwd()
    except OSError as exc:
        why = "it was removed" if exc.errno == errno.ENOENT else exc.strerror
        raise BadInputError(f"the current directory cannot be used ({why}); cd to a "
                            "directory that exists") from None
    session = of_process(os.environ, cwd)
    prog = PROG
    if own_argv and sys.argv and sys.argv[0]:
        prog = prog_of(sys.argv[0], sys.executable, session.env,
                       by_bazel_run=session.by_bazel_run)
    bare = "NO_COLOR" in session.env
    return replaced(session, prog=prog, say=_say, show=click.echo,
                    color=not bare and sys.stdout.isatty(),
                    color_err=not bare and sys.stderr.isatty(),
                    waiting=_say_waiting if sys.stderr.isatty() else None,
                    on_error=warn_unreadable, progress=_Progress())


class _Progress:
    """Progress of a long walk of ``output_base/external`` on stderr; the index module is
    imported at the first walk, not at start-up."""

    def __init__(self) -> None:
        self._shown: object = None

    def __call__(self, files: int, repository: str | None) -> None:
        if self._shown is None:
            # Here: +72 ms CPU on --help at the top (benchmarks/START.md).
            from bazel_ldfix.outputbase.index import Progress

            self._shown = Progress(sys.stderr)
        self._shown(files, repository)  # type: ignore[operator]


# What `bazel run` runs (docs/use-from-bazel.md): the suggested commands run it again.
BAZEL_RUN = "bazel run @bazel_ldfix//:bazel-ldfix --"


def prog_of(argv0: str, executable: str, env: Mapping[str, str], *,
            by_bazel_run: bool = False) -> str:
    """How the user ran the tool, as shell words that run it again from where they are:

    - under ``bazel run``: that command (:data:`BAZEL_RUN`);
    - ``python -m bazel_ldfix``: this interpreter by its full path, then ``-m bazel_ldfix``
      (the ``python`` the user typed is not known; this one has the package);
    - the installed script: by its name alone when ``PATH`` finds that very file, else as
      it was named (``.venv/bin/bazel-ldfix``, relative to where the user is).
    """
    if by_bazel_run:
        return BAZEL_RUN
    if os.path.basename(argv0) == "__main__.py":
        return shlex.join([executable, "-m", "bazel_ldfix"])
    name = os.path.basename(argv0)
    found = _on_path(name, env.get("PATH"))
    try:
        same = found is not None and os.path.samefile(found, argv0)
    except OSError:
        same = False
    return shlex.quote(name if same else argv0)


def _on_path(name: str, path: str | None) -> str | None:
    """The file a shell runs for ``name``: the first executable one on ``path``."""
    for directory in (path or "").split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def warn_unreadable(path: str, exc: OSError) -> None:
    click.echo(f"bazel-ldfix: warning: cannot read {printable(path)}: {exc.strerror}",
               err=True)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _say_waiting(cmd: Sequence[str]) -> None:
    """On a terminal, a Bazel command that takes a while (its server starting) is named."""
    click.echo(f"bazel-ldfix: waiting for `{printable(shlex.join(cmd))}` (the Bazel server "
               "may be starting)...", err=True)


pass_session = click.make_pass_decorator(Session)

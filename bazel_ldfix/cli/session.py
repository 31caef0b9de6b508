"""The composition root: what every command shares, built once per run.

``main`` (or the group, when called as a library) builds one :class:`Session` from the
process's environment and working directory; commands receive it through
:data:`pass_session` (click's ``ctx.obj`` and ``make_pass_decorator``) and build the Bazel
runner, the loader options and the index cache's place from it, never from ``os.environ``
or the process's own directory.

Modules that are slow to import (the loader model, pyelftools) are imported inside the
methods that need them, so that ``--help`` stays fast; the same holds in the command modules.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from bazel_ldfix import PROG
from bazel_ldfix.invocation import Invocation, from_environ

if TYPE_CHECKING:
    from bazel_ldfix import elf
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.flow.caller import Caller
    from bazel_ldfix.loader.cuda import HostDriver
    from bazel_ldfix.loader.resolve import LoaderFactory, Options
    from bazel_ldfix.outputbase.index import Progress


@dataclass(frozen=True)
class Session:
    """Where the user is, their environment, how output is shown, and the factories built
    on them (the Bazel runner, the loader's options)."""

    invocation: Invocation
    color: bool
    """Colour on stdout: only on a terminal, and never with NO_COLOR set."""
    color_err: bool
    """The same for stderr."""
    interactive: bool
    """stderr is a terminal: a Bazel command that takes a while is named there."""
    quiet: bool = False
    """Print nothing of the tool's own but errors and diagnoses (``-q``)."""
    prog: str = PROG
    """How the user ran the tool, as shell words: the start of every command it suggests
    (:func:`prog_of`)."""

    @classmethod
    def of(cls, invocation: Invocation, prog: str = PROG) -> Session:
        bare = "NO_COLOR" in invocation.env
        return cls(invocation, not bare and sys.stdout.isatty(),
                   not bare and sys.stderr.isatty(), sys.stderr.isatty(), prog=prog)

    @classmethod
    def from_process(cls, *, own_argv: bool = False) -> Session:
        """The session of this process: its environment and working directory.
        BadInputError when that directory is gone (removed while the shell sat in it).
        ``own_argv``: ``sys.argv`` is the tool's own command line (``main`` as the entry
        point), so it says how the user ran the tool; else (a library call, a test) the
        suggested commands say ``bazel-ldfix``."""
        try:
            cwd = os.getcwd()
        except OSError as exc:
            from bazel_ldfix.errors import BadInputError

            why = "it was removed" if exc.errno == errno.ENOENT else exc.strerror
            raise BadInputError(f"the current directory cannot be used ({why}); cd to a "
                                "directory that exists") from None
        invocation = from_environ(os.environ, cwd)
        prog = PROG
        if own_argv and sys.argv and sys.argv[0]:
            prog = prog_of(sys.argv[0], sys.executable, invocation.env,
                           by_bazel_run=invocation.by_bazel_run)
        return cls.of(invocation, prog)

    @property
    def cwd(self) -> str:
        return self.invocation.cwd

    @property
    def env(self) -> Mapping[str, str]:
        return self.invocation.env

    def quieted(self) -> Session:
        return dataclasses.replace(self, quiet=True)

    def user_path(self, path: str | None) -> str | None:
        """A path the user gave, taken from where the user is."""
        return None if path is None else os.path.normpath(os.path.join(self.cwd, path))

    def bazel(self, bazel_path: str | None, startup: Sequence[str],
              timeout: float | None = None) -> Bazel:
        """The Bazel to run: --bazel, else $BAZEL, else bazel; run where the user is.
        ``timeout``: --bazel-timeout (0: no limit; None: the default)."""
        from bazel_ldfix.bazel.client import DEFAULT_TIMEOUT, Bazel

        executable = bazel_path or self.env.get("BAZEL") or "bazel"
        limit = DEFAULT_TIMEOUT if timeout is None else (timeout or None)
        return Bazel(executable, self.cwd, dict(self.env), tuple(startup),
                     waiting=_say_waiting if self.interactive and not self.quiet else None,
                     timeout=limit)

    def options(self, library_path: str | None, inhibit_cache: bool, root: str,
                loader: str | None = None) -> Options:
        """How to resolve: --library-path, else the user's LD_LIBRARY_PATH; the root and the
        loader named on the command line, from where the user is."""
        from bazel_ldfix.loader.resolve import Options

        value = library_path if library_path is not None else self.env.get("LD_LIBRARY_PATH")
        return Options(value, inhibit_cache, os.path.normpath(os.path.join(self.cwd, root)),
                       self.cwd, self.user_path(loader))

    def loaders(self, loader: str | None) -> LoaderFactory:
        """This machine's loader for each file modelled, or the one --loader names."""
        from bazel_ldfix.loader.resolve import LoaderFactory

        return LoaderFactory(self.user_path(loader))

    def host_header(self) -> elf.ElfHeader:
        """The ELF class and machine of the programs this machine runs."""
        from bazel_ldfix.loader.resolve import host_header

        return host_header()

    def cuda_host(self) -> HostDriver:
        """The host's NVIDIA driver: the kernel module's version, else the version in the
        name of the libcuda.so.1 that ld.so.cache names; BAZEL_LDFIX_CUDA_COMPAT=1 allows
        compat drivers whatever the host has (docs/cuda.md)."""
        from bazel_ldfix.loader import cuda

        return cuda.host_driver(_read_small(PROC_NVIDIA_VERSION), _cached_libcuda(),
                                self.env.get("BAZEL_LDFIX_CUDA_COMPAT") == "1")

    def cache_dir(self) -> str | None:
        """The index cache's directory (None: none can be trusted)."""
        from bazel_ldfix.outputbase import indexcache

        return indexcache.default_dir(self.env)

    def links_root(self) -> str | None:
        """Where the repair makes its links directories (None: none can be trusted).

        BadInputError when the per-user directory's path holds ``:`` or ``;``: a links
        directory under it could not be an entry of LD_LIBRARY_PATH, which the loader
        splits at both. Only the commands that give the loader a value ask.
        """
        from bazel_ldfix import linkdir, pathlist, userdir
        from bazel_ldfix.errors import BadInputError

        path, source = userdir.cache_path(self.env)
        if not pathlist.listable(path):
            held = next(c for c in path if c in ":;")
            raise BadInputError(
                f"the cache directory {path} (from {source}) holds {held!r}, which the "
                "loader reads as a separator in LD_LIBRARY_PATH, so no links directory "
                "under it can be given to the tests; set XDG_CACHE_HOME to a path without "
                "':' or ';'")
        root = userdir.cache_root(self.env)
        return userdir.private_dir(os.path.join(root, linkdir.SUBDIR)) if root else None

    def caller(self) -> Caller:
        """Who runs a flow (:mod:`bazel_ldfix.flow`): this session, its words on stderr
        (escaped by the flow where they name a file), its result on stdout."""
        from bazel_ldfix.flow.caller import Caller

        return Caller(self.env, self.cwd, _say, click.echo, self.quiet, self.color_err,
                      self.links_root(), self.cache_dir(), self.progress(), warn_unreadable,
                      self.cuda_host(), self.prog)

    def progress(self) -> Progress | None:
        """Progress of a long index walk on stderr, unless quiet."""
        from bazel_ldfix.outputbase.index import Progress

        return None if self.quiet else Progress(sys.stderr)


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


PROC_NVIDIA_VERSION = "/proc/driver/nvidia/version"


def _read_small(path: str, limit: int = 4096) -> str | None:
    """The start of a small text file (a /proc file reports no size), or None."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _cached_libcuda() -> str | None:
    """The real path of the libcuda.so.1 this host's ld.so.cache names, if any."""
    from bazel_ldfix.errors import LdfixError
    from bazel_ldfix.loader import ldcache

    try:
        found = ldcache.read_cache("/etc/ld.so.cache").lookup("libcuda.so.1")
    except (OSError, LdfixError):
        return None
    return os.path.realpath(found) if found and os.path.isfile(found) else None


def warn_unreadable(path: str, exc: OSError) -> None:
    click.echo(f"bazel-ldfix: warning: cannot read {_printable(path)}: {exc.strerror}",
               err=True)


def _printable(text: str) -> str:
    from bazel_ldfix.quoting import printable

    return printable(text)


def _say(line: str) -> None:
    click.echo(line, err=True)


def _say_waiting(cmd: Sequence[str]) -> None:
    """On a terminal, a Bazel command that takes a while (its server starting) is named."""
    from bazel_ldfix.quoting import printable

    click.echo(f"bazel-ldfix: waiting for `{printable(shlex.join(cmd))}` (the Bazel server "
               "may be starting)...", err=True)


pass_session = click.make_pass_decorator(Session)

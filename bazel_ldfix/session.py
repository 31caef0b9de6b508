"""Who runs the tool, where, and with what: the one object every command is given.

A :class:`Session` holds where the user is (their directory, their environment, the workspace
``bazel run`` named), how they ran the tool (the start of every command it suggests), where
its words go (``say`` on stderr, ``show`` on stdout, quiet or not, in colour or not), the
per-user store, and the facts of this host's loader (its ELF class and machine, its NVIDIA
driver). It makes the Bazel runner and the loader's options from those, never from
``os.environ`` or the process's own directory: the composition root (:mod:`bazel_ldfix.cli`)
reads the process once and builds the session.

Started by ``bazel run @bazel_ldfix//:bazel-ldfix -- ARGS``, the tool runs inside its own
runfiles tree, and Bazel says where the user was in two variables (Bazel's ``RunCommand``,
set since Bazel 0.13): ``BUILD_WORKING_DIRECTORY``, the directory ``bazel run`` was typed in,
and ``BUILD_WORKSPACE_DIRECTORY``, the root of its workspace. Bazel also hands the binary the
variables that locate its own runfiles. They describe this tool, not the user's tests, so
they are not passed on to the Bazel the tool starts.

The loader model and pyelftools are slow to import: the methods that need them import
them, so that ``--help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from bazel_ldfix import PROG, pathlist
from bazel_ldfix.errors import BadInputError, LdfixError

if TYPE_CHECKING:
    from bazel_ldfix import elf
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.loader.closure import LoaderFactory, Options
    from bazel_ldfix.loader.cuda import HostDriver
    from bazel_ldfix.outputbase.index import ProgressFn
    from bazel_ldfix.store import Store, Unusable

# Set by `bazel run` (and by the Python launcher) for the binary's own runfiles; a user's
# shell does not set them, and the user's `bazel test` must not see them.
RUNFILES_VARIABLES = ("RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "RUNFILES_MANIFEST_ONLY",
                      "JAVA_RUNFILES", "PYTHON_RUNFILES")

# Where the host's NVIDIA kernel module says its version (docs/cuda.md).
PROC_NVIDIA_VERSION = "/proc/driver/nvidia/version"


def _nowhere(_line: str) -> None:
    """Words for nobody: a session made by a library call or a test says nothing."""


@dataclass(frozen=True)
class BazelChoice:
    """Which Bazel a command runs, and how: the options every Bazel command shares."""

    path: str | None = None
    """--bazel (None: $BAZEL, else ``bazel`` on PATH)."""
    startup: tuple[str, ...] = ()
    """--startup-option, each a startup option of Bazel's."""
    timeout: float | None = None
    """--bazel-timeout for each call of the tool's own (0: no limit; None: the default)."""
    output_base: str | None = None
    """--output-base: this output_base instead of asking Bazel."""
    no_cache: bool = False
    """--no-cache: read nothing the per-user store keeps."""


@dataclass(frozen=True)
class LoaderChoice:
    """How a command that models the loader resolves files: the options those commands
    share."""

    library_path: str | None = None
    """--library-path (None: the user's LD_LIBRARY_PATH)."""
    inhibit_cache: bool = False
    """--inhibit-cache: leave /etc/ld.so.cache out."""
    root: str = "/"
    """--root: resolve as if this directory were /."""
    loader: str | None = None
    """--loader: ask this dynamic loader how it searches (None: this host's)."""


@dataclass(frozen=True)
class Session:
    """Who runs the tool, where, and with what; see the module's docstring."""

    cwd: str
    """The user's working directory: relative paths on the command line are meant here."""
    env: Mapping[str, str]
    """The environment for what the tool starts and models: the user's, without the
    variables ``bazel run`` added for this tool's own runfiles."""
    workspace: str | None = None
    """The workspace root ``bazel run`` named, or None when not started by ``bazel run``."""
    prog: str = PROG
    """How the user ran the tool, as shell words: the start of every command it suggests."""
    say: Callable[[str], None] = _nowhere
    """One line of what happened on the way (stderr)."""
    show: Callable[[str], None] = _nowhere
    """The result (stdout)."""
    quiet: bool = False
    """Print nothing of the tool's own but errors, diagnoses and leftover warnings (-q)."""
    color: bool = False
    """Colour on stdout: only on a terminal, and never with NO_COLOR set."""
    color_err: bool = False
    """The same for stderr."""
    waiting: Callable[[Sequence[str]], None] | None = None
    """Told of a Bazel command that takes a while (its server starting), on a terminal."""
    on_error: Callable[[str, OSError], None] | None = None
    """Told of each file that cannot be read."""
    progress: ProgressFn | None = None
    """Told of the progress of a long walk of ``output_base/external``."""
    store_root: str | None = None
    """The per-user store's directory, when the caller names one (None: the one the
    environment names, :func:`bazel_ldfix.store.place`)."""
    driver: HostDriver | None = None
    """The host's NVIDIA driver, when the caller knows it (None: read from this host)."""

    @property
    def by_bazel_run(self) -> bool:
        return self.workspace is not None

    def inform(self, line: str) -> None:
        """Say ``line``, one of what happened on the way, unless quiet (``-q`` keeps only
        errors, the diagnosis and the leftover warnings)."""
        if not self.quiet:
            self.say(line)

    def quieted(self) -> Session:
        """This session under ``-q``: nothing said on the way, no progress."""
        return replaced(self, quiet=True, progress=None, waiting=None)

    def user_path(self, path: str | None) -> str | None:
        """A path the user gave, taken from where the user is."""
        return None if path is None else os.path.normpath(os.path.join(self.cwd, path))

    # The Bazel runner and the loader's options.

    def bazel(self, choice: BazelChoice = BazelChoice()) -> Bazel:
        """The Bazel to run: --bazel, else $BAZEL, else bazel; run where the user is."""
        # Here: +107 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.bazel.client import DEFAULT_TIMEOUT, Bazel

        executable = choice.path or self.env.get("BAZEL") or "bazel"
        limit = DEFAULT_TIMEOUT if choice.timeout is None else (choice.timeout or None)
        return Bazel(executable, self.cwd, dict(self.env), tuple(choice.startup),
                     waiting=self.waiting, timeout=limit)

    def options(self, choice: LoaderChoice) -> Options:
        """How to resolve: --library-path, else the user's LD_LIBRARY_PATH; the root and the
        loader named on the command line, from where the user is."""
        # Here: +107 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.loader.closure import Options

        value = choice.library_path if choice.library_path is not None \
            else self.env.get("LD_LIBRARY_PATH")
        return Options(value, choice.inhibit_cache,
                       os.path.normpath(os.path.join(self.cwd, choice.root)), self.cwd,
                       self.user_path(choice.loader))

    def loaders(self, loader: str | None = None) -> LoaderFactory:
        """This machine's loader for each file modelled, or the one --loader names."""
        # Here: +107 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.loader.closure import LoaderFactory

        return LoaderFactory(self.user_path(loader))

    # The host's loader facts.

    def host_header(self) -> elf.ElfHeader:
        """The ELF class and machine of the programs this machine runs."""
        # Here: +107 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.loader.closure import host_header

        return host_header()

    @functools.cached_property
    def cuda(self) -> HostDriver:
        """The host's NVIDIA driver: the kernel module's version, else the version in the
        name of the libcuda.so.1 that ld.so.cache names; BAZEL_LDFIX_CUDA_COMPAT=1 allows
        compat drivers whatever the host has (docs/cuda.md)."""
        # Here: +107 ms CPU on --help at the top (benchmarks/START.md).
        from bazel_ldfix.loader import cuda

        if self.driver is not None:
            return self.driver
        return cuda.host_driver(_read_small(PROC_NVIDIA_VERSION), _cached_libcuda(),
                                self.env.get("BAZEL_LDFIX_CUDA_COMPAT") == "1")

    # The per-user store.

    @functools.cached_property
    def store(self) -> Store | None:
        """The per-user store records are kept in (None: none can be trusted)."""
        from bazel_ldfix import store

        if self.store_root is not None:
            return store.at(self.store_root)
        return store.of_env(self.env)

    @functools.cached_property
    def links_root(self) -> str | None:
        """Where the repair makes its links directories (None: none can be trusted).

        BadInputError when the per-user directory's path holds ``:`` or ``;``: a links
        directory under it could not be an entry of LD_LIBRARY_PATH, which the loader
        splits at both. Only the commands that give the loader a value ask
        (:meth:`for_repair`).
        """
        from bazel_ldfix import store

        path, source = (self.store_root, "the caller") if self.store_root is not None \
            else store.place(self.env)
        if not pathlist.listable(path):
            held = next(c for c in path if c in ":;")
            raise BadInputError(
                f"the cache directory {path} (from {source}) holds {held!r}, which the "
                "loader reads as a separator in LD_LIBRARY_PATH, so no links directory "
                "under it can be given to the tests; set XDG_CACHE_HOME to a path without "
                "':' or ';'")
        kept = self.store
        return kept.links_dir() if kept is not None else None

    @functools.cached_property
    def links_problem(self) -> Unusable | None:
        """Why no links directory can be made (None: one can), so that a repair that needs
        one says so rather than suggest what cannot work."""
        from bazel_ldfix import store

        if self.links_root is not None:
            return None
        path = self.store_root if self.store_root is not None else store.place(self.env)[0]
        if self.store is not None:
            path = os.path.join(self.store.root, store.LINKS)
        return store.Unusable(path, store.why_not_private(path))

    def for_repair(self) -> Session:
        """This session, settled for a command that gives the tests a value: its links
        directory's place (BadInputError, before any Bazel runs, when it cannot be an
        entry of LD_LIBRARY_PATH) and the host's driver are read now, not while a plan
        reads the facts it keeps."""
        _ = self.links_root, self.cuda
        return self


def of_process(environ: Mapping[str, str], process_cwd: str) -> Session:
    """The session a process's environment and working directory describe (its outputs,
    colour and ``prog`` are the composition root's to set, :func:`replaced`)."""
    working = environ.get("BUILD_WORKING_DIRECTORY") or None
    workspace = environ.get("BUILD_WORKSPACE_DIRECTORY") or None
    if working is None and workspace is None:
        return Session(process_cwd, MappingProxyType(dict(environ)))
    # `bazel run` sets both; with only one, the other is the best answer there is.
    cwd = working or workspace
    assert cwd is not None
    env = {k: v for k, v in environ.items() if k not in RUNFILES_VARIABLES}
    return Session(cwd, MappingProxyType(env), workspace or cwd)


def replaced(session: Session, **changes: object) -> Session:
    """``session`` with some fields changed (outputs, callbacks), keeping what it has
    worked out already (the store's place, the host's driver): the same user, the same
    host."""
    new = dataclasses.replace(session, **changes)  # type: ignore[arg-type]
    for name in ("cuda", "store", "links_root", "links_problem"):
        if name in session.__dict__:
            new.__dict__[name] = session.__dict__[name]
    return new


def _read_small(path: str, limit: int = 4096) -> str | None:
    """The start of a small text file (a /proc file reports no size), or None."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _cached_libcuda() -> str | None:
    """The real path of the libcuda.so.1 this host's ld.so.cache names, if any."""
    # Here: +107 ms CPU on --help at the top (benchmarks/START.md).
    from bazel_ldfix.loader import ldcache

    try:
        found = ldcache.read_cache("/etc/ld.so.cache").lookup("libcuda.so.1")
    except (OSError, LdfixError):
        return None
    return os.path.realpath(found) if found and os.path.isfile(found) else None

"""What a repair's plan is made with, besides its tests and their environment.

:class:`Setting` is what one command asks of all its repairs; :class:`PlanContext` adds
what is known once Bazel has built: the output_base, the loaders, the models, and the
session that runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix.loader.cuda import NO_HOST_DRIVER, HostDriver

if TYPE_CHECKING:
    from bazel_ldfix import elf
    from bazel_ldfix.bazel.bep import Option
    from bazel_ldfix.loader.search import LoaderSource
    from bazel_ldfix.outputbase.index import ProgressFn
    from bazel_ldfix.repair.models import Models
    from bazel_ldfix.session import Session
    from bazel_ldfix.store import Store


@dataclass(frozen=True)
class Setting:
    """What one command asks of its repairs, whatever its tests: ``prepend`` the added
    directories; ``no_cache``: read nothing the per-user store keeps (the index, the rules'
    answer, the kept repair); ``force_local_path``: the tests run on this machine even
    under ``--remote_executor``, so its paths are given."""

    prepend: bool = False
    no_cache: bool = False
    force_local_path: bool = False


@dataclass(frozen=True)
class RunFacts:
    """What Bazel said of the run a plan is for: its canonical options (where its tests
    run), its target patterns as Bazel read them, and notes of its build step."""

    options: tuple[Option, ...] = ()
    patterns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanContext:
    """Everything one plan is made with but its tests and their environment.

    ``models`` holds the tests' resolutions, shared by the plans of one command (None: a
    new one per plan); ``host`` is the class and machine a test that is a script runs as
    (None: this machine's); ``session`` who runs it: its per-user store, where links
    directories may be made, the host's driver, its progress lines (None: none of them,
    the repair alone); ``on_error`` hears of each file that could not be read (None: the
    session's).
    """

    output_base: str
    loaders: LoaderSource
    models: Models | None = None
    host: elf.ElfHeader | None = None
    session: Session | None = None
    setting: Setting = Setting()
    run: RunFacts = RunFacts()
    on_error: Callable[[str, OSError], None] | None = None

    @property
    def store(self) -> Store | None:
        """The per-user store the index may be kept in (None: walk)."""
        if self.session is None or self.setting.no_cache:
            return None
        return self.session.store

    @property
    def links_root(self) -> str | None:
        return None if self.session is None else self.session.links_root

    @property
    def links_problem(self) -> str | None:
        """Why no links directory can be made, in words (None: one can, or no one asks)."""
        problem = None if self.session is None else self.session.links_problem
        return None if problem is None else problem.words()

    @property
    def cuda(self) -> HostDriver:
        return NO_HOST_DRIVER if self.session is None else self.session.cuda

    @property
    def progress(self) -> ProgressFn | None:
        return None if self.session is None else self.session.progress

    @property
    def told(self) -> Callable[[str, OSError], None] | None:
        """Who hears of a file that could not be read."""
        if self.on_error is not None:
            return self.on_error
        return None if self.session is None else self.session.on_error

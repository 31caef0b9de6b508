"""What a repair's plan is made with, besides its tests and their environment.

:class:`Setting` is what one command asks of all its repairs; :class:`PlanContext` adds
what is known once Bazel has built: the output_base, the loaders, the session.
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


@dataclass(frozen=True)
class Setting:
    """What one command asks of its repairs, whatever its tests.

    ``cache_dir`` is the per-user cache (None: the index of ``external/`` is walked, the
    rules are queried, and nothing is kept or given again); ``links_root`` is where links
    directories may be made (None: nowhere). ``on_error`` hears of each file that could
    not be read, ``progress`` of a long walk of ``external/``. ``force_local_path``: the
    tests run on this machine even under ``--remote_executor``, so its paths are given.
    """

    prepend: bool = False
    cache_dir: str | None = None
    links_root: str | None = None
    cuda: HostDriver = NO_HOST_DRIVER
    on_error: Callable[[str, OSError], None] | None = None
    progress: ProgressFn | None = None
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

    ``session`` holds the tests' resolutions, shared by the plans of one command (None: a
    new one per plan); ``host`` is the class and machine a test that is a script runs as
    (None: this machine's).
    """

    output_base: str
    loaders: LoaderSource
    session: Models | None = None
    host: elf.ElfHeader | None = None
    setting: Setting = Setting()
    run: RunFacts = RunFacts()

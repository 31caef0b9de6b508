"""The loader model of this machine as a plan's session uses it, for the tests of plans."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bazel_ldfix import elf
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.loader.closure import Options, cache_lookup, host_of, interp_for
from bazel_ldfix.loader.resolution import Environment
from bazel_ldfix.loader.search import Loader, Loaders
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext


def resolver(session: Models) -> Loaders:
    """This machine's loaders, over the session's memo."""
    def make_loader(info: elf.ElfInfo, loader_env: Environment) -> Loader:
        return Loader(host_of(interp_for(info)), loader_env, session.memo)

    def cache_for(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
        return cache_lookup(info, Options())

    return Loaders(make_loader, cache_for)


def plan_of(output_base: Path, inputs: list[TestInput], session: Models,
            value: str | None = None, *, search: bool = True) -> Repair:
    """The plan of ``inputs``, each test's LD_LIBRARY_PATH being ``value``."""
    env = TestEnvironment((), "nothing", {t.label: value for t in inputs})
    loaders = resolver(session)
    return plan_repair(inputs, env, PlanContext(str(output_base), loaders, models=session),
                       search=search)

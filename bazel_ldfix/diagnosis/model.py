"""The loader model's view of one failed test: every name it misses, the chain included.

The diagnosis resolves the test executable as the repair does (its choice, its reasons), and
then what each library found misses by itself, which a log cannot show yet: the loader
stops at the first library it cannot load.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from bazel_ldfix import elf, pathlist
from bazel_ldfix.errors import LdfixError
from bazel_ldfix.loader.resolution import Environment
from bazel_ldfix.loader.search import Loader, Loaders, LoaderSource
from bazel_ldfix.outputbase import index

if TYPE_CHECKING:
    from bazel_ldfix.repair.results import Missing
    from bazel_ldfix.repair.setting import PlanContext
    from bazel_ldfix.session import Session

OnError = Callable[[str, OSError], None]


def model_missing(label: str | None, executable: str, output_base: str,
                  library_path: str | None) -> tuple[str, ...]:
    """Every name the loader model misses for one test, its libraries' own included."""
    return tuple(missing_for(label, executable, output_base, library_path, HOST_LOADERS,
                             None)[0])


def host_loader(info: elf.ElfInfo, env: Environment) -> Loader:
    """This machine's loader for ``info`` (:class:`LoaderFactory`'s default)."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.loader.closure import LoaderFactory

    return LoaderFactory().make_loader(info, env)


def host_cache(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.loader.closure import LoaderFactory

    return LoaderFactory().cache_for(info)


# This machine's loaders, the default of the diagnosis (as the repair uses them).
HOST_LOADERS = Loaders(host_loader, host_cache)


def missing_for(label: str | None, executable: str, output_base: str,
                library_path: str | None, loaders: LoaderSource,
                session: Session | None) -> tuple[dict[str, Missing], str | None]:
    """What the repair finds missing for this test, by soname, and a note when the model
    could not resolve the executable."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.bazel.testenv import TestEnvironment
    from bazel_ldfix.repair.plan import plan_repair
    from bazel_ldfix.repair.results import TestInput

    key = label or executable
    env = TestEnvironment(pathlist.split(library_path),
                                 "the run's --test_env" if library_path else "nothing",
                                 {key: library_path})
    try:
        context = _context(output_base, loaders, session)
        repair = plan_repair([TestInput(key, executable)], env, context)
    except LdfixError as exc:
        return {}, f"the loader model could not resolve {executable}: {exc}"
    return _chain({m.soname: m for m in repair.missing}, library_path, loaders,
                  output_base, session.on_error if session is not None else None), None


def exposed(label: str | None, executable: str, output_base: str, library_path: str | None,
            given: Sequence[index.Choice], loaders: LoaderSource,
            session: Session | None) -> tuple[str, ...] | None:
    """The entries that give the test ``given`` (and what else the repair finds it
    missing) without changing anything it loads: their directories, or a links directory
    (:mod:`bazel_ldfix.repair.exposure`); None when the model cannot resolve the test."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.bazel.testenv import TestEnvironment
    from bazel_ldfix.repair.plan import plan_repair
    from bazel_ldfix.repair.results import TestInput

    key = label or executable
    env = TestEnvironment(pathlist.split(library_path), "the run's value",
                                 {key: library_path})
    try:
        context = _context(output_base, loaders, session)
        planned = plan_repair([TestInput(key, executable)], env, context, given=given)
    except LdfixError:
        return None
    return planned.added


def _context(output_base: str, loaders: LoaderSource, session: Session | None
             ) -> PlanContext:
    """The plan's context for one test of a diagnosis: the session's links directories,
    host driver and unreadable-file lines; the index walked, not read from the store."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.repair.setting import PlanContext, Setting

    return PlanContext(output_base, loaders, session=session, setting=Setting(no_cache=True))


def _chain(found: Mapping[str, Missing], library_path: str | None, loaders: LoaderSource,
           output_base: str, on_error: OnError | None) -> dict[str, Missing]:
    """``found`` plus what each library found there misses by itself in the test's own
    environment: what the test misses next once that library is staged by a BUILD fix.

    The repair's rounds resolve with every directory found so far, so a dependency that sits
    beside its parent is never missing there; whether it shows depends on the order the
    rounds met the files. Resolving each found file on its own makes the prediction the same
    for every test whose chain allows it.
    """
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.repair.results import Missing as MissingLibrary

    out = dict(found)
    pending = [m for m in found.values() if m.dir is not None]
    while pending:
        parent = pending.pop(0)
        assert parent.dir is not None
        path = os.path.join(parent.dir, parent.soname)
        try:
            info = elf.read_elf(path)
            env = Environment(library_path, parent.dir, loaders.cache_for(info))
            resolution = loaders.make_loader(info, env).resolve(path, info=info)
        except LdfixError:
            continue
        for lib in resolution.libraries:
            if lib.path is not None or lib.error is not None or lib.name in out:
                continue
            choice = index.locate([lib.name], [os.path.join(output_base, "external")],
                                  info.header, [parent.dir], on_error)[lib.name]
            needed_by = tuple(path if n == resolution.file else n for n in lib.needed_by)
            out[lib.name] = MissingLibrary(lib.name, needed_by, choice.dir,
                                           choice.passed_over)
            pending.append(out[lib.name])
    return out


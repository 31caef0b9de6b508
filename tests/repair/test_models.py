"""The models of one command's tests: its plans share what they learn, and the answer is the
one a plan alone gives.

``bazel-ldfix env`` plans twice in one session (first without searching, then with the
rules' env); every scan of a plan records each outcome once. Whatever was asked before,
the plan equals, whole, the plan of a fresh session, and the plan with every test resolved
on its own (``Session(share=False)``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from elfbuild import lib, program
from modelhelp import plan_of

from bazel_ldfix import elf
from bazel_ldfix.loader.closure import Options, cache_lookup, host_of, interp_for
from bazel_ldfix.loader.resolution import Environment
from bazel_ldfix.loader.search import Loader, Loaders
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import Repair, TestInput
from tests.repair.test_loadalike import _family


def _plan(output_base: Path, inputs: list[TestInput], session: Models,
          *, search: bool = True) -> Repair:
    return plan_of(output_base, inputs, session, search=search)


def _two_packages(top: Path) -> list[TestInput]:
    """Twins of one package, and programs of two more whose ``$ORIGIN/../lib`` are two
    directories: each needs a library found only in the output_base, whose own
    dependency is missing from the other package's copy."""
    inputs = _family(top, 3)
    ext = top / "ob" / "external"
    for pkg in ("q", "r"):
        deep = lib(ext / f"deep_{pkg}" / "libdeep.so.4")
        os.symlink(deep.name, deep.parent / "libdeep.so")
        mid = lib(ext / f"mid_{pkg}" / "libmid.so.1", needs=[deep])
        os.symlink(mid.name, mid.parent / "libmid.so")
        own = lib(top / "ob" / "bin" / pkg / "lib" / "libown.so.1",
                  needs=[deep] if pkg == "q" else [])
        for i in range(2):
            exe = program(top / "ob" / "bin" / pkg / "app" / f"t{i}", needs=[mid, own],
                          runpath="$ORIGIN/../lib")
            inputs.append(TestInput(f"//{pkg}:t{i}", str(exe)))
    return inputs


def test_a_plan_after_another_in_the_same_session_is_the_plan_alone(tmp_path: Path) -> None:
    inputs = _two_packages(tmp_path)
    ob = tmp_path / "ob"
    session = Models()
    first = _plan(ob, inputs, session, search=False)
    second = _plan(ob, inputs, session)
    fresh = _plan(ob, inputs, Models())
    alone = _plan(ob, inputs, Models(share=False))
    assert repr(second) == repr(fresh) == repr(alone)
    assert repr(first) == repr(_plan(ob, inputs, Models(), search=False))
    assert session.twins > 0
    # What the plan found, and who needs it: the closures first, in listing order.
    assert {m.soname for m in second.missing} == {"libsdk.so.11", "libmid.so.1",
                                                  "libdeep.so.4"}
    needers = {m.soname: m.needed_by for m in second.missing}
    assert needers["libmid.so.1"] == tuple(str(tmp_path / "ob" / "bin" / p / "app" / f"t{i}")
                                           for p in ("q", "r") for i in range(2))
    # The loader's own spelling of the path it took, through $ORIGIN/../lib.
    assert needers["libdeep.so.4"][0] == f"{tmp_path}/ob/bin/q/app/../lib/libown.so.1"
    assert not any(t.missing_after for t in second.tests)
    assert [t.missing_before for t in second.tests] == [t.missing_before for t in first.tests]


def test_an_outcome_asked_again_is_the_same_answer(tmp_path: Path) -> None:
    inputs = _family(tmp_path, 2)
    session = Models()
    subjects = [session.subject(t, elf.read_header(t.executable)) for t in inputs]

    def make_loader(info: elf.ElfInfo, loader_env: Environment) -> Loader:
        return Loader(host_of(interp_for(info)), loader_env, session.memo)

    def cache_for(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
        return cache_lookup(info, Options())

    values = {s.label: None for s in subjects}
    for extras in (False, True):
        once = session.outcomes(subjects, values, Loaders(make_loader, cache_for), extras=extras)
        again = session.outcomes(subjects, values, Loaders(make_loader, cache_for), extras=extras)
        assert all(a is b for a, b in zip(once, again, strict=True))
        single = [session.outcome(s, None, Loaders(make_loader, cache_for), extras=extras)
                  for s in subjects]
        assert all(a is b for a, b in zip(once, single, strict=True))
        # The staged libsdk.so, dlopen()ed, needs libdep.so.2, which nothing stages.
        expected = ("libsdk.so.11", "libdep.so.2") if extras else ("libsdk.so.11",)
        assert [o.missing for o in once] == [expected] * 2

"""The tests of a repair that load here only a ``_solib_`` file their runfiles manifest does
not declare (a leftover of an earlier build), on Bazel 4.2.3's layout of a cc_test."""

from __future__ import annotations

from pathlib import Path

from modelhelp import plan_of

from bazel_ldfix.repair.leftovers import leftovers
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import TestInput
from tests.bazel.test_declaredinputs import _loaded, _test


def test_a_test_that_loads_an_undeclared_file_is_named_with_it(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so",))
    repair = plan_of(tmp_path, [TestInput("//t:needs", str(exe))], Models())
    [(label, found)] = leftovers(repair)
    assert label == "//t:needs"
    assert [f.soname for f in found] == ["libleft.so"]
    assert Path(found[0].path).resolve() == Path(_loaded(exe)["libleft.so"]).resolve()


def test_a_test_whose_files_are_all_declared_has_none(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so", "libleft.so"))
    assert leftovers(plan_of(tmp_path, [TestInput("//t:needs", str(exe))], Models())) == []


def test_a_test_that_fails_anyway_is_left_to_the_diagnosis(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so",))
    (exe.parent.parent / "_solib_k8" / "_U_t" / "libdecl.so").unlink()     # found nowhere
    repair = plan_of(tmp_path, [TestInput("//t:needs", str(exe))], Models())
    assert repair.tests[0].missing_after == ("libdecl.so",)
    assert leftovers(repair) == []

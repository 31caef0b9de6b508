"""A failed test's context: the run's own plan is read, not made again.

``bazel-ldfix test`` hands the diagnosis what its plan found each test still missing in
the value the run gave it. A test the plan proved to load everything it links is not
modelled again: the model would answer the same, and a thousand failed tests would cost a
thousand plans.
"""

from __future__ import annotations

from pathlib import Path

from diagnose_fixtures import fake_bazel

from bazel_ldfix import elf
from bazel_ldfix.diagnosis import logs, report
from bazel_ldfix.diagnosis.model import HOST_LOADERS
from bazel_ldfix.diagnosis.runvalues import RanWith
from bazel_ldfix.loader.resolution import Environment
from bazel_ldfix.loader.search import Loader, Loaders


class Counted:
    """This machine's loaders, counting the programs the model resolves."""

    def __init__(self) -> None:
        self.made = 0
        self.loaders = Loaders(self.make_loader, HOST_LOADERS.cache_for)

    def make_loader(self, info: elf.ElfInfo, env: Environment) -> Loader:
        self.made += 1
        return HOST_LOADERS.make_loader(info, env)


def _diagnosed(tmp_path: Path, planned: dict[str, tuple[str, ...]]) -> tuple[int, str]:
    fake = fake_bazel(tmp_path)
    found = logs.from_command_log(str(fake.output_base))
    assert found is not None
    counted = Counted()
    result = report.diagnose(found, ran_with=RanWith("the run's", {}, None, planned),
                               loaders=counted.loaders)
    finding = result.findings[0]
    assert finding.soname == "libxdemo.so.11"      # from the loader's own words, either way
    return counted.made, str(finding.found)


def test_a_test_the_plan_proved_to_load_is_not_planned_again(tmp_path: Path) -> None:
    # What remains is the fix's own model (the value it offers, which changes nothing
    # else the test loads): the same with or without the run's plan.
    reused, found = _diagnosed(tmp_path / "a", {"//t:app_test": ()})
    unknown, found_anew = _diagnosed(tmp_path / "b", {})
    assert reused < unknown
    assert found.replace("/a/", "/b/") == found_anew


def test_a_test_the_plan_found_missing_something_is_planned(tmp_path: Path) -> None:
    missed, _ = _diagnosed(tmp_path / "a", {"//t:app_test": ("libxdemo.so.11",)})
    unknown, _ = _diagnosed(tmp_path / "b", {})
    assert missed == unknown

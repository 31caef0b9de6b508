"""What a repair says of itself (the value each test is given, what it had, what is still
missing), checked by running the real tests with that value."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from modelhelp import plan_of

from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import Repair, TestInput
from tests.repair.test_loadalike import _family


def _run(executable: str, library_path: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    if library_path is not None:
        env["LD_LIBRARY_PATH"] = library_path
    return subprocess.run([executable], env=env, capture_output=True).returncode


def _repair(tmp_path: Path, value: str | None = None) -> tuple[Repair, list[TestInput]]:
    inputs = _family(tmp_path, 2)
    return plan_of(tmp_path / "ob", inputs, Models(), value), inputs


def test_the_value_given_makes_the_real_tests_load(tmp_path: Path) -> None:
    repair, inputs = _repair(tmp_path)
    sdk = str(tmp_path / "ob" / "external" / "sdk" / "lib")
    assert repair.added == (sdk,) and repair.base == ()
    assert repair.ld_library_path == sdk
    assert repair.flags == (f"--test_env=LD_LIBRARY_PATH={sdk}",)
    assert repair.unresolved == () and repair.withheld == ()
    for test in inputs:
        assert _run(test.executable, None) == 127
        assert _run(test.executable, repair.ld_library_path) == 0


def test_the_value_a_test_had_is_kept_as_its_base(tmp_path: Path) -> None:
    repair, inputs = _repair(tmp_path, "/opt/keep")
    assert repair.base == ("/opt/keep",)
    assert repair.base_of(inputs[0].label) == ("/opt/keep",)
    assert repair.given_to(inputs[0].label) == repair.given
    value = repair.ld_library_path
    assert value is not None and value.split(":")[0] == "/opt/keep"
    assert _run(inputs[0].executable, value) == 0


def test_a_library_found_nowhere_is_unresolved_and_no_flag_is_added(tmp_path: Path) -> None:
    inputs = _family(tmp_path, 1)
    (tmp_path / "ob" / "external" / "sdk" / "lib" / "libsdk.so.11").rename(
        tmp_path / "elsewhere.so")
    repair = plan_of(tmp_path / "ob", inputs, Models())
    assert repair.unresolved == ("libsdk.so.11",)
    assert repair.ld_library_path is None and repair.flags == ()
    assert repair.tests[0].missing_after == ("libsdk.so.11",)

"""``inspect`` as a user runs it: one verdict per file, the exit code the worst of them."""

from __future__ import annotations

import json
from pathlib import Path

from elfbuild import lib, program, truncated
from toolrun import run


def test_every_file_is_named_and_a_kind_not_required_exits_1(tmp_path: Path) -> None:
    libx = lib(tmp_path / "libx.so.1")
    app = program(tmp_path / "app")
    ok = run("inspect", "--require", "shared-object", str(libx))
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.startswith(f"{libx}: ")
    mixed = run("inspect", "--require", "shared-object", str(libx), str(app))
    assert mixed.returncode == 1
    assert len(mixed.stdout.splitlines()) >= 2
    assert mixed.stderr.startswith(f"bazel-ldfix: {app} is not ")


def test_a_corrupt_file_exits_2_and_the_others_are_still_inspected(tmp_path: Path) -> None:
    libx = lib(tmp_path / "libx.so.1")
    cut = truncated(tmp_path / "libcut.so", libx, 100)
    result = run("inspect", "--json", str(cut), str(libx))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: {cut}: file too short (empty or truncated)"]
    files = json.loads(result.stdout)["files"]
    assert [(f["path"], f["kind"]) for f in files] == [
        (str(cut), None), (str(libx), "shared-object")]
    assert files[0]["error"] == f"{cut}: file too short"


def test_an_unknown_kind_is_refused_by_name(tmp_path: Path) -> None:
    result = run("inspect", "--require", "dll", str(tmp_path))
    assert result.returncode == 2
    assert "'dll' is not one of" in result.stderr and "Traceback" not in result.stderr

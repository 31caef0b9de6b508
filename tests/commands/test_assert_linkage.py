"""``assert-linkage`` as a user runs it: every assertion reported, exit 0 only when all
hold, and bad input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from elfbuild import lib, program
from toolrun import run


@pytest.fixture
def app(tmp_path: Path) -> Path:
    libx = lib(tmp_path / "l" / "libx.so.1")
    return program(tmp_path / "app", needs=[libx], runpath="$ORIGIN/l")


def test_an_assertion_that_holds_exits_0(app: Path) -> None:
    result = run("assert-linkage", "--needs", "libx.so.1", str(app))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"{app} (a position-independent executable):",
        "  ok   --needs libx.so.1: a DT_NEEDED entry",
        "the assertion holds"]


def test_every_assertion_is_checked_and_one_failure_exits_1(app: Path) -> None:
    result = run("assert-linkage", "--json", "--needs", "libx.so.1", "--needs", "liby.so.9",
                 str(app))
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["version"] == 1 and doc["ok"] is False
    assert [(c["subject"], c["ok"]) for c in doc["checks"]] == [
        ("libx.so.1", True), ("liby.so.9", False)]


@pytest.mark.parametrize(("args", "line"), [
    ([], "error: nothing to assert: give --needs, --imports, --no-defines or --binds"),
    (["--binds", "noeq"], "error: --binds 'noeq': expected SYMBOL=SONAME"),
])
def test_bad_arguments_are_one_line_and_exit_2(app: Path, args: list[str], line: str) -> None:
    result = run("assert-linkage", *args, str(app))
    assert (result.returncode, result.stdout, result.stderr.splitlines()) == (2, "", [line])


def test_a_file_that_is_not_linked_elf_is_bad_input(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    result = run("assert-linkage", "--needs", "libx.so.1", str(notes))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {notes}: not an ELF file, not a linked ELF object (a shared object or a "
        "program)"]

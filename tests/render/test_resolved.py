"""``resolve`` and ``check`` rendered: the tree, the steps of a miss, the real loader's
listing, and their JSON documents, for real files."""

from __future__ import annotations

import json
from pathlib import Path

from elfbuild import lib, program

from bazel_ldfix.loader.closure import Options, resolve_file
from bazel_ldfix.loader.realloader import check_file, matrix
from bazel_ldfix.render.resolved import (
    check_text,
    checks_json,
    matrix_json,
    matrix_text,
    resolution_tree,
    resolutions_json,
)


def _app(tmp_path: Path) -> Path:
    """app needs libx.so.1 (found by RUNPATH) and libmiss.so.2 (in a directory not searched)."""
    libx = lib(tmp_path / "lib" / "libx.so.1")
    miss = lib(tmp_path / "elsewhere" / "libmiss.so.2")
    return program(tmp_path / "app", needs=[libx, miss], runpath="$ORIGIN/lib")


def test_the_tree_says_how_each_library_was_found_and_every_step_of_a_miss(
        tmp_path: Path) -> None:
    app = _app(tmp_path)
    text = resolution_tree(resolve_file(str(app), Options()), color=False)
    assert text.splitlines()[0] == str(app)
    assert f"libx.so.1 [runpath] {tmp_path}/lib/libx.so.1" in text
    assert "libmiss.so.2 not found" in text
    steps = [line.split("┊ ", 1)[1] for line in text.splitlines() if "┊ " in line]
    assert [s.split(":")[0] for s in steps[1:6]] == [
        "1. rpath", "2. LD_LIBRARY_PATH", "3. runpath", "4. ld.so.cache", "5. default"]
    assert steps[3] == f"3. runpath: {tmp_path}/lib"
    assert "(see above)" in text                  # libc.so.6, expanded where it first appears
    assert "\x1b[" not in text
    coloured = resolution_tree(resolve_file(str(app), Options()), color=True)
    assert "\x1b[31mlibmiss.so.2 not found" in coloured


def test_the_json_of_one_file_is_one_document_of_several_a_list(tmp_path: Path) -> None:
    res = resolve_file(str(_app(tmp_path)), Options())
    doc = json.loads(resolutions_json([res]))
    assert doc["version"] == 1 and doc["missing"] == ["libmiss.so.2"]
    miss = next(d for d in doc["libraries"] if d["soname"] == "libmiss.so.2")
    assert [t["via"] for t in miss["tried"]] == [
        "rpath", "LD_LIBRARY_PATH", "runpath", "ld.so.cache", "default"]
    found = next(d for d in doc["libraries"] if d["soname"] == "libx.so.1")
    assert found["tried"] == [] and found["via"] == "runpath"
    assert isinstance(json.loads(resolutions_json([res, res])), list)


def test_check_lists_what_the_real_loader_listed(tmp_path: Path) -> None:
    result = check_file(str(_app(tmp_path)), Options())
    lines = check_text(result, color=False).splitlines()
    assert lines[0].endswith(f"(the real loader, {result.interp}):")
    assert f"  libx.so.1 => {tmp_path}/lib/libx.so.1" in lines
    assert "  libmiss.so.2 => not found" in lines
    assert lines[-1] == "the model agrees with the loader"
    doc = json.loads(checks_json([result]))
    assert (doc["version"], doc["loads"], doc["missing"]) == (1, False, ["libmiss.so.2"])
    assert doc["disagreements"] == []


def test_the_matrix_names_the_smallest_set(tmp_path: Path) -> None:
    elsewhere = str(tmp_path / "elsewhere")
    found = matrix(str(_app(tmp_path)), [elsewhere, str(tmp_path)], Options())
    text = matrix_text(found)
    assert text.splitlines()[-1] == f"  smallest set: {elsewhere}"
    doc = json.loads(matrix_json([found]))
    assert doc["version"] == 1 and doc["smallest"] == [elsewhere]
    assert doc["rows"][0]["missing"] == ["libmiss.so.2"]

"""``inspect`` rendered for people and scripts, on real files; a hostile file name cannot
forge a line of output."""

from __future__ import annotations

import json
from pathlib import Path

from elfbuild import lib

from bazel_ldfix.linkage import kinds
from bazel_ldfix.render.linkage import (
    inspection_document,
    inspection_text,
    inspections_json,
    printable,
)


def test_the_text_lists_what_the_loader_reads(tmp_path: Path) -> None:
    dep = lib(tmp_path / "d" / "libd.so.2")
    libx = lib(tmp_path / "libx.so", soname="libx.so.1", needs=[dep], runpath="$ORIGIN/d")
    lines = inspection_text(kinds.inspect(str(libx))).splitlines()
    assert lines[0].startswith(f"{libx}: ")
    assert "  soname: libx.so.1" in lines
    assert "  needed: libd.so.2" in lines
    assert "  runpath: $ORIGIN/d" in lines
    assert not any(line.startswith("  rpath:") for line in lines)


def test_a_name_with_a_newline_stays_on_its_line(tmp_path: Path) -> None:
    odd = lib(tmp_path / "lib\nx.so: forged")
    text = inspection_text(kinds.inspect(str(odd)))
    assert text.splitlines()[0].startswith(ascii(str(odd)) + ": ")
    assert not any(line.startswith("x.so: forged") for line in text.splitlines())
    assert printable("plain") == "plain"


def test_the_document_says_whether_the_required_kind_holds(tmp_path: Path) -> None:
    libx = lib(tmp_path / "libx.so.1")
    item = kinds.inspect(str(libx))
    doc = json.loads(inspections_json([
        inspection_document(item, kinds.Kind.SHARED_OBJECT),
        inspection_document(item, kinds.Kind.PIE),
        inspection_document(item, None, error="unreadable")]))
    ok, wrong, bad = doc["files"]
    assert doc["version"] == 1
    assert (ok["kind"], ok["required"], ok["ok"], ok["problem"]) == (
        "shared-object", "shared-object", True, None)
    assert (wrong["ok"], wrong["problem"] is not None) == (False, True)
    assert (bad["kind"], bad["ok"], bad["error"]) == (None, None, "unreadable")
    assert ok["elf"]["soname"] == "libx.so.1"

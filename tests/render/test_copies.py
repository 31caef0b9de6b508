"""``locate``'s words and JSON for the copies the index finds under output_base/external."""

from __future__ import annotations

import json
from pathlib import Path

from elfbuild import lfs_pointer, lib, patch_class

from bazel_ldfix import elf
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.outputbase import index
from bazel_ldfix.render.copies import locate_json, locate_text


def _found(tmp_path: Path) -> tuple[str, dict[str, list[index.Copy]]]:
    """libx.so.1 three times (good, 32-bit, a Git LFS pointer) and libnone.so.2 nowhere."""
    root = tmp_path / "ob" / "external"
    lib(root / "good" / "lib" / "libx.so.1")
    patch_class(lib(root / "c32" / "libx.so.1"), elf.ELFCLASS32)
    lfs_pointer(root / "lfs" / "libx.so.1")
    found = index.copies(["libx.so.1", "libnone.so.2"], [str(root)], host_header())
    return str(root), {name: list(copies) for name, copies in found.items()}


def test_text_names_each_copy_best_first_and_why_the_others_would_not_load(
        tmp_path: Path) -> None:
    root, found = _found(tmp_path)
    lines = locate_text(found, root).splitlines()
    assert lines[0] == "libx.so.1:"
    assert lines[1] == f"  {root}/good/lib  (ELFCLASS64, x86-64)"
    rest = dict(line.strip().split("  ", 1) for line in lines[2:4])
    assert rest[f"{root}/c32"].startswith("(ELFCLASS32, x86-64; ")
    assert "wrong ELF class" in rest[f"{root}/c32"]
    assert not rest[f"{root}/lfs"].startswith("(ELFCLASS")     # not ELF: only the reason
    assert lines[4] == f"libnone.so.2: nowhere under {root}"


def test_json_is_keyed_by_soname_with_the_same_order(tmp_path: Path) -> None:
    root, found = _found(tmp_path)
    doc = json.loads(locate_json(found))
    assert list(doc) == ["libx.so.1", "libnone.so.2"] and doc["libnone.so.2"] == []
    best = doc["libx.so.1"][0]
    assert best == {"dir": f"{root}/good/lib", "machine": "x86-64", "class": "ELFCLASS64",
                    "path": f"{root}/good/lib/libx.so.1", "reason": None, "passed": None}
    assert [c["class"] for c in doc["libx.so.1"][1:]].count(None) == 1

"""A runfiles tree anyone else could write is walked, not listed from its MANIFEST.

Whoever can write a tree can also write, last, a MANIFEST that names other targets than its
links do: the listing would then examine files the loader never opens. So the listing needs
MANIFEST and every directory to be the user's own and writable by no one else.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfbuild import lib
from runfilestree import both_ways, lay_out

from bazel_ldfix.bazel import runfiles


def _rewrite_manifest(tree: Path, text: str) -> None:
    """MANIFEST written again last, the way build-runfiles writes it."""
    (tree / "MANIFEST").unlink()
    (tree / "MANIFEST.tmp").write_text(text)
    (tree / "MANIFEST.tmp").rename(tree / "MANIFEST")


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path, str]:
    """A tree whose link was pointed elsewhere, with a MANIFEST written after that still
    naming the old target (what a walk finds differs from what the MANIFEST says)."""
    good = lib(tmp_path / "good" / "liba.so.1")
    evil = tmp_path / "evil" / "liba.so.1"
    evil.parent.mkdir()
    evil.write_text("not a library\n")
    exe = tmp_path / "bin" / "p" / "app_test"
    tree = lay_out(exe, [f"ws/p/app_test {exe}", f"ws/lib/liba.so.1 {good}"])
    text = (tree / "MANIFEST").read_text()
    (tree / "ws" / "lib" / "liba.so.1").unlink()
    (tree / "ws" / "lib" / "liba.so.1").symlink_to(evil)
    return exe, tree, text


def test_the_users_own_tree_with_a_lying_manifest_is_trusted(
        planted: tuple[Path, Path, str]) -> None:
    # What the cases below start from: the user's own tree is taken at its MANIFEST's word.
    exe, tree, text = planted
    _rewrite_manifest(tree, text)
    assert runfiles.tree_listing(str(exe)) is not None


@pytest.mark.parametrize("who", ["directory writable by others",
                                 "directory writable by another group",
                                 "MANIFEST writable by others",
                                 "directory of another user"])
def test_a_tree_another_user_could_write_is_walked(planted: tuple[Path, Path, str],
                                                    who: str) -> None:
    exe, tree, text = planted
    lib_dir = tree / "ws" / "lib"
    if who in ("directory writable by another group", "directory of another user") and \
            os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user or group")
    if who == "directory writable by others":
        lib_dir.chmod(0o757)
    elif who == "directory writable by another group":
        os.chown(lib_dir, -1, os.getegid() + 1)
        lib_dir.chmod(0o775)
    elif who == "directory of another user":
        os.chown(lib_dir, os.geteuid() + 1, -1)
    _rewrite_manifest(tree, text)
    if who == "MANIFEST writable by others":
        (tree / "MANIFEST").chmod(0o646)
        # (a mode change sets MANIFEST's ctime: the directories stay older)
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//p:app_test", exe)
    # Walked both ways: the link's real target, not a library, is what was examined.
    assert from_manifest == walked
    assert [s.kind.value for s in walked.skipped] == ["not_elf"]

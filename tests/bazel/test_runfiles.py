"""A runfiles tree is listed from its MANIFEST only where that is exactly what a walk finds.

On trees laid out the way Bazel's build-runfiles lays them out, a test's answer (its
runfiles' shared objects, the files skipped and why, its working directory) from the
MANIFEST is the walk's, compared whole; each change that could make them differ makes the
walk the one that answers. tests/bazel/test_runfiles_bazel.py does the same on trees real
Bazel made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from elfbuild import lib, program
from foreign import text_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runfilestree import both_ways, lay_out, past_manifest

from bazel_ldfix.bazel import runfiles
from bazel_ldfix.fs.memo import Memo


@pytest.fixture
def laid_out(tmp_path: Path) -> tuple[Path, Path]:
    libs = tmp_path / "src"
    lib(libs / "liba.so.1")
    lib(libs / "libb.so")
    text_file(libs / "libnotes.so")
    exe = tmp_path / "bin" / "p" / "app_test"
    tree = lay_out(exe, [f"ws/p/app_test {exe}",
                         f"ws/_solib_k8/a/liba.so {libs / 'liba.so.1'}",
                         f"ws/_solib_k8/a/liba.so.1 {libs / 'liba.so.1'}",
                         f"ws/_solib_k8/b/libb.so {libs / 'libb.so'}",
                         f"ws/data/libnotes.so {libs / 'libnotes.so'}",
                         f"ws/data/libgone.so {libs / 'nowhere.so'}",
                         "ws/p/__init__.py ",
                         f"other/libb.so {libs / 'libb.so'}"])
    return exe, tree


def test_a_laid_out_tree_is_listed_as_the_walk_finds_it(laid_out: tuple[Path, Path]) -> None:
    exe, tree = laid_out
    listing = runfiles.tree_listing(str(exe))
    assert listing is not None
    assert "ws/p/__init__.py" in listing.files and listing.top == ("MANIFEST", "other", "ws")
    from_manifest, walked = both_ways("//p:app_test", exe)
    assert from_manifest == walked
    assert walked.cwd == f"{tree}/ws"
    # One file through two paths counts once, where it sorts first.
    assert walked.extras == (f"{tree}/other/libb.so", f"{tree}/ws/_solib_k8/a/liba.so")
    assert [(os.path.basename(s.path), s.kind.value) for s in walked.skipped] == [
        ("libgone.so", "gone"), ("libnotes.so", "not_elf")]


def test_a_manifest_written_again_as_it_was_is_trusted(laid_out: tuple[Path, Path]) -> None:
    # What the cases below start from: rewriting MANIFEST the way build-runfiles does.
    exe, tree = laid_out
    text = (tree / "MANIFEST").read_text()
    (tree / "MANIFEST").unlink()
    (tree / "MANIFEST.tmp").write_text(text)
    (tree / "MANIFEST.tmp").rename(tree / "MANIFEST")
    assert runfiles.tree_listing(str(exe)) is not None


@pytest.mark.parametrize("change", [
    "MANIFEST a link", "MANIFEST copied (input's mtime)", "MANIFEST cut short",
    "MANIFEST written again in place", "MANIFEST written anew",
    "a directory changed after", "an entry a directory link", "a relative target",
    "a path twice", "a file and a directory", "an absolute path", "a '..' path",
    "no input manifest"])
def test_what_makes_the_manifest_untrusted(laid_out: tuple[Path, Path], change: str) -> None:
    exe, tree = laid_out
    manifest = tree / "MANIFEST"
    source = Path(f"{exe}.runfiles_manifest")
    text = manifest.read_text()

    def rewrite(new: str) -> None:
        manifest.unlink()
        (tree / "MANIFEST.tmp").write_text(new)
        (tree / "MANIFEST.tmp").rename(manifest)

    if change == "MANIFEST a link":
        manifest.unlink()
        manifest.symlink_to(source)
    elif change == "MANIFEST copied (input's mtime)":
        shutil.copy2(source, manifest)
    elif change == "MANIFEST cut short":
        rewrite(text[:-1])
    elif change == "MANIFEST written again in place":
        past_manifest(tree)
        manifest.write_text("ws/p/app_test \n")   # what it lists is there, the rest is not
    elif change == "MANIFEST written anew":
        past_manifest(tree)
        manifest.unlink()
        manifest.write_text("ws/p/app_test \n")
    elif change == "a directory changed after":
        past_manifest(tree)
        (tree / "ws" / "data" / "libgone.so").unlink()
        (tree / "ws" / "data" / "libgone.so").symlink_to("/nowhere.so")
    elif change == "an entry a directory link":
        (tree / "other" / "libb.so").unlink()
        (tree / "other" / "libb.so").symlink_to(tree / "ws" / "_solib_k8")
        rewrite(text.replace(f"other/libb.so {exe.parent.parent.parent / 'src' / 'libb.so'}",
                             f"other/libb.so {tree / 'ws' / '_solib_k8'}"))
    elif change == "a relative target":
        (tree / "other" / "rel.txt").symlink_to("../ws/p/app_test")
        rewrite(text + "other/rel.txt ../ws/p/app_test\n")
    elif change == "a path twice":
        rewrite(text + text.splitlines()[0] + "\n")
    elif change == "a file and a directory":
        rewrite(text + f"ws/p/app_test/x {exe}\n")
    elif change == "an absolute path":
        rewrite(text + f"/abs {exe}\n")
    elif change == "a '..' path":
        rewrite(text + f"ws/../escape {exe}\n")
    elif change == "no input manifest":
        source.unlink()
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//p:app_test", exe)
    assert from_manifest == walked


def test_a_directory_named_like_a_mount_point_makes_it_walk(
        laid_out: tuple[Path, Path]) -> None:
    exe, _tree = laid_out
    assert runfiles.tree_listing(str(exe), mount_names={"proc"}) is not None
    assert runfiles.tree_listing(str(exe), mount_names={"_solib_k8"}) is None


def test_a_tree_without_a_manifest_is_walked(tmp_path: Path) -> None:
    lib(tmp_path / "src" / "libz.so.1")
    exe = program(tmp_path / "bin" / "z_test")
    there = tmp_path / "bin" / "z_test.runfiles" / "ws" / "lib" / "libz.so.1"
    there.parent.mkdir(parents=True)
    there.symlink_to(tmp_path / "src" / "libz.so.1")
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//:z_test", exe)
    assert from_manifest == walked and walked.extras == (str(there),)


def test_realpath_through_a_new_chain_ending_in_an_absolute_link(tmp_path: Path) -> None:
    """The real path of a runfiles path is its last link's target's: as os.path.realpath."""
    real = tmp_path / "real"
    (real / "d").mkdir(parents=True)
    (real / "d" / "f").write_text("x")
    (tmp_path / "via").symlink_to(real)
    cases = {"t1/a/b/link": real / "d" / "f",            # absolute target
             "t2/a/link": tmp_path / "via" / "d" / "f",    # target through a link
             "t3/a/loop": tmp_path / "t3" / "a" / "loop",  # a link to itself
             "t4/a/dangling": tmp_path / "nowhere" / "f",
             "t5/a/rel": Path("../../real/d/f")}
    for path, target in cases.items():
        (tmp_path / path).parent.mkdir(parents=True)
        (tmp_path / path).symlink_to(target)
    (tmp_path / "t6").symlink_to(tmp_path / "t1" / "a")  # a chain through a linked directory
    memo = Memo()
    for path in [*cases, "t6/b/link", "t6/b/link/x", *cases]:
        full = f"{tmp_path}/{path}"
        assert memo.realpath(full) == os.path.realpath(full), path


name = st.text(st.characters(blacklist_characters="/\0 \n\\", blacklist_categories=("Cs",)),
               min_size=1, max_size=6).filter(lambda s: s not in (".", "..", "MANIFEST"))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(name, max_size=2), name | name.map(lambda s: f"lib{s}.so"),
                          st.sampled_from(["lib", "text", "missing", "empty"])),
                min_size=1, max_size=8))
def test_any_tree_build_runfiles_makes_is_listed_as_the_walk_finds_it(
        tmp_path_factory: pytest.TempPathFactory,
        entries: list[tuple[list[str], str, str]]) -> None:
    top = tmp_path_factory.mktemp("any")
    targets = {"lib": lib(top / "src" / "libt.so.1"), "text": text_file(top / "src" / "t.so"),
               "missing": top / "src" / "nowhere.so", "empty": ""}
    exe = top / "bin" / "t"
    # The test's own entry first: an entry under ws/t/ would need it to be a directory.
    lines: dict[str, str] = {"ws/t": f"ws/t {exe}"}
    for parts, leaf, kind in entries:
        path = "/".join(["ws", *parts, leaf])
        clash = any(p == path or p.startswith(path + "/") or path.startswith(p + "/")
                    for p in lines)
        if not clash:
            lines[path] = f"{path} {targets[kind]}"
    lay_out(exe, list(lines.values()))
    assert runfiles.tree_listing(str(exe)) is not None
    from_manifest, walked = both_ways("//:t", exe)
    assert from_manifest == walked


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_any_manifest_text_is_read_or_refused_without_an_error(
        tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    top = tmp_path_factory.mktemp("text")
    exe = top / "t"
    tree = lay_out(exe, [f"ws/t {exe}"])
    (tree / "MANIFEST").unlink()
    (tree / "MANIFEST").write_bytes(data)
    listing = runfiles.tree_listing(str(exe))
    if listing is not None:
        from_manifest, walked = both_ways("//:t", exe)
        assert from_manifest == walked

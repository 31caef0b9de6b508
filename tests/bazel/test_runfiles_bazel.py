"""On trees real Bazel 4.2.3 made, the answer from the MANIFEST is the walk's, and a tree
changed after the build (by hand, or by Bazel copying a new manifest into the old tree) is
walked.

A test's answer (its runfiles' shared objects, the files skipped and why, its working
directory, its executable) is computed both ways and compared whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace, sdk
from elfbuild import lib
from foreign import linker_script, text_file
from runfilestree import both_ways, past_manifest

from bazel_ldfix.bazel import runfiles

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

SDK_BUILD = """package(default_visibility = ["//visibility:public"])
cc_import(name = "xdemo", shared_library = "lib/libxdemo.so")
filegroup(name = "odd", srcs = glob(["odd/**"]))
filegroup(name = "plugins", srcs = glob(["plugins/**"]))
"""
# One test per change made to its tree below, so that each starts from the tree Bazel made.
TESTS = ("same", "removed", "added", "dirlink", "stale")


@dataclass
class Built:
    ws: Workspace
    sdk: Path

    def executable(self, name: str) -> Path:
        return self.ws.output_base / "execroot" / "ws" / "bazel-out" / "k8-fastbuild" / \
            "bin" / "t" / name


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    top = tmp_path_factory.mktemp("listing")
    root = top / "sdk"
    sdk(root, "xdemo", "11")
    lib(root / "plugins" / "libplugin.so")           # a shared object the test may dlopen
    lib(root / "plugins" / "libplugin_copy.so.1")
    linker_script(root / "odd" / "libscript.so")     # skipped, with its reason
    text_file(root / "odd" / "libtext.so")
    (root / "odd" / "notes.txt").write_text("not a library\n")
    tests = "".join(
        f'cc_test(name = "{name}", srcs = ["x.c"], deps = ["@sdk//:xdemo"], '
        f'data = ["@sdk//:odd", "@sdk//:plugins"])\n' for name in TESTS)
    files = {
        "WORKSPACE": f'new_local_repository(name = "sdk", path = "{root}", '
                     f"build_file_content = {json.dumps(SDK_BUILD)})\n",
        # Empty files in the runfiles: a py_test's __init__.py (no target in the manifest).
        "t/BUILD": tests + 'py_test(name = "py", srcs = ["py.py"], '
                           'data = ["@sdk//:odd", "@sdk//:plugins"])\n',
        "t/x.c": "int xdemo_value(void);\nint main(void) { return xdemo_value() != 11; }\n",
        "t/py.py": "pass\n",
    }
    ws = make_workspace(top / "ws", files, env=clean_env())
    done = ws.bazel("build", "//t:all")
    assert done.returncode == 0, done.stderr[-3000:]
    try:
        yield Built(ws, root)
    finally:
        ws.shutdown()


@pytest.mark.parametrize("name", ["same", "py"])
def test_a_tree_bazel_made_is_listed_from_its_manifest_as_the_walk_finds_it(
        built: Built, name: str) -> None:
    exe = built.executable(name)
    listing = runfiles.tree_listing(str(exe))
    assert listing is not None, "the manifest of an unchanged tree is not trusted"
    from_manifest, walked = both_ways(f"//t:{name}", exe)
    assert from_manifest == walked
    tree = f"{exe}.runfiles"
    names = {os.path.basename(p) for p in walked.extras}
    assert {"libplugin.so", "libplugin_copy.so.1"} <= names
    assert {os.path.basename(s.path): s.kind.value for s in walked.skipped} == {
        "libscript.so": "linker_script", "libtext.so": "not_elf"}
    assert walked.cwd == f"{tree}/ws"
    if name == "py":
        # Bazel 4.2.3 stages empty __init__.py files (no target): build-runfiles creates them.
        assert any(p.endswith("__init__.py") for p in listing.files)
        assert walked.info is None
    else:
        assert "libxdemo.so" in names and walked.info is not None


def test_a_symlink_removed_by_hand_makes_it_walk(built: Built) -> None:
    exe = built.executable("removed")
    tree = Path(f"{exe}.runfiles")
    # Bazel 4.2.3 stages an external file twice (--legacy_external_runfiles): the first by
    # sort order is the one kept; remove it.
    gone = tree / "sdk" / "plugins" / "libplugin.so"
    assert str(gone) in both_ways("//t:removed", exe)[1].extras
    past_manifest(tree)
    gone.unlink()
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//t:removed", exe)
    assert from_manifest == walked
    assert str(gone) not in walked.extras
    assert str(tree / "ws" / "external" / "sdk" / "plugins" / "libplugin.so") in walked.extras


def test_a_symlink_added_by_hand_makes_it_walk(built: Built, tmp_path: Path) -> None:
    exe = built.executable("added")
    tree = Path(f"{exe}.runfiles")
    past_manifest(tree)
    added = tree / "ws" / "extra" / "libadded.so.2"
    added.parent.mkdir()
    added.symlink_to(lib(tmp_path / "libadded.so.2"))
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//t:added", exe)
    assert from_manifest == walked
    assert str(added) in walked.extras


def test_a_data_file_replaced_by_a_directory_link_makes_it_walk(built: Built) -> None:
    exe = built.executable("dirlink")
    tree = Path(f"{exe}.runfiles")
    notes = tree / "sdk" / "odd" / "notes.txt"
    past_manifest(tree)
    notes.unlink()
    notes.symlink_to(built.sdk / "plugins", target_is_directory=True)
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//t:dirlink", exe)
    assert from_manifest == walked
    # The walk follows the link; the plugins are kept there, the first path by sort order.
    assert str(notes / "libplugin.so") in walked.extras


def test_a_manifest_copied_into_an_old_tree_makes_it_walk(
        built: Built) -> None:
    """Bazel 4.2.3 with --noenable_runfiles copies the new manifest into the old tree."""
    build = built.ws.root / "t" / "BUILD"
    text = build.read_text()
    build.write_text(text.replace(
        'cc_test(name = "stale", srcs = ["x.c"], deps = ["@sdk//:xdemo"], '
        'data = ["@sdk//:odd", "@sdk//:plugins"])',
        'cc_test(name = "stale", srcs = ["x.c"], deps = ["@sdk//:xdemo"], '
        'data = ["@sdk//:odd"])'))
    try:
        done = built.ws.bazel("build", "--noenable_runfiles", "//t:stale")
        assert done.returncode == 0, done.stderr[-3000:]
    finally:
        build.write_text(text)
    exe = built.executable("stale")
    tree = Path(f"{exe}.runfiles")
    manifest = (tree / "MANIFEST").read_text()
    assert "libplugin.so" not in manifest, "the manifest was not copied"
    assert list(tree.glob("**/libplugin.so")), "the old tree was not kept"
    assert runfiles.tree_listing(str(exe)) is None
    from_manifest, walked = both_ways("//t:stale", exe)
    assert from_manifest == walked
    assert "libplugin.so" in {os.path.basename(p) for p in walked.extras}



"""In a runfiles tree listed from its MANIFEST, a link is known by the manifest's target.

The tests of one command share a memo: a library accepted through one tree's link to it is
accepted through every other tree's link to the same target, without a ``readlink`` or a
``stat`` of each. That holds only for trees :func:`runfiles.tree_listing` vouches for; a
tree changed after Bazel made it (a link retargeted, a file added) is walked, and its answer
must be the walk's whatever the trees before it taught the memo.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from elfbuild import lib
from foreign import text_file
from hypothesis import given, settings
from hypothesis import strategies as st
from runfilestree import both_ways, lay_out, past_manifest

from bazel_ldfix.bazel import runfiles
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.repair import loadalike
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.runfilesobjects import tree_listing
from bazel_ldfix.repair.testread import Subject


@pytest.fixture
def src(tmp_path: Path) -> Path:
    lib(tmp_path / "src" / "libk.so.1")
    text_file(tmp_path / "src" / "libnote.so")
    return tmp_path / "src"


def _tree(tmp_path: Path, src: Path, name: str) -> Path:
    exe = tmp_path / "bin" / "p" / name
    lay_out(exe, [f"ws/p/{name} {exe}",
                  f"ws/_solib_k8/k/libk.so {src / 'libk.so.1'}",
                  f"ws/data/libnote.so {src / 'libnote.so'}"])
    return exe


def _shared(exes: list[Path]) -> list[Subject]:
    """The subjects of ``exes`` read in order by one session, as a command reads them."""
    session = Models()
    host = host_header()
    return [session.subject(TestInput(f"//p:{exe.name}", str(exe)), host)
            for exe in exes]


def test_trees_sharing_targets_get_each_the_walks_answer(tmp_path: Path, src: Path) -> None:
    exes = [_tree(tmp_path, src, f"t{n}_test") for n in range(3)]
    assert all(runfiles.tree_listing(str(exe)) is not None for exe in exes)
    for exe, subject in zip(exes, _shared(exes), strict=True):
        _from_manifest, walked = both_ways(f"//p:{exe.name}", exe)
        assert subject == walked
        tree = f"{exe}.runfiles"
        assert subject.extras == (f"{tree}/ws/_solib_k8/k/libk.so",)
        # A file refused is named by this tree's own path, not by the first tree's.
        assert [s.path for s in subject.skipped] == [f"{tree}/ws/data/libnote.so"]


@pytest.mark.parametrize("change", ["a link retargeted", "a library added"])
def test_a_tree_changed_after_bazel_is_walked_whatever_came_before(
        tmp_path: Path, src: Path, change: str) -> None:
    first, changed = _tree(tmp_path, src, "a_test"), _tree(tmp_path, src, "b_test")
    tree = Path(f"{changed}.runfiles")
    past_manifest(tree)
    if change == "a link retargeted":
        # The same name, now to a file the loader refuses: only the walk can tell.
        link = tree / "ws" / "_solib_k8" / "k" / "libk.so"
        link.unlink()
        link.symlink_to(src / "libnote.so")
    else:
        (tree / "ws" / "_solib_k8" / "k" / "libk2.so").symlink_to(src / "libk.so.1")
    assert runfiles.tree_listing(str(changed)) is None
    _, subject = _shared([first, changed])
    _from_manifest, walked = both_ways("//p:b_test", changed)
    assert subject == walked
    if change == "a link retargeted":
        # Now a second path to the refused file, which sorts first: it names the skip.
        assert subject.extras == ()
        assert [os.path.basename(s.path) for s in subject.skipped] == ["libk.so"]


def test_a_link_to_the_executable_is_no_directory_once_it_was_read(
        tmp_path: Path, src: Path) -> None:
    exe = _tree(tmp_path, src, "x_test")
    memo = Memo()
    listing = tree_listing(str(exe), memo, read=True)
    assert listing is not None and listing.targets["ws/p/x_test"] == str(exe)
    assert listing == runfiles.tree_listing(str(exe))


def test_the_twins_digest_comes_from_the_read_that_listed_the_tree(
        tmp_path: Path, src: Path) -> None:
    exes = [_tree(tmp_path, src, f"d{n}_test") for n in range(2)]
    subjects = _shared(exes)
    memo = Memo()
    for exe, subject in zip(exes, subjects, strict=True):
        read = loadalike._manifest_digest(f"{exe}.runfiles", str(exe), memo)
        assert read is not None and subject.digest == read
        shape = loadalike.shape(str(exe), subject.info, subject.host, subject.cwd,
                            subject.extras, [], memo)
        assert shape is not None
        assert shape == loadalike.shape(str(exe), subject.info, subject.host, subject.cwd,
                                    subject.extras, [], memo, digest=subject.digest)
    # The two tests differ only in their own entry: twins.
    assert subjects[0].digest == subjects[1].digest


def _digest_line_by_line(data: bytes, own: set[bytes]) -> bytes:
    """What the digest is: every line, those whose target is the executable reduced to
    ``\\0self <directory of its runfiles path>``."""
    digest = hashlib.blake2b(digest_size=16)
    for line in data.split(b"\n"):
        staged, sep, target = line.rpartition(b" ")
        if sep and target in own:
            line = b"\0self " + staged.rpartition(b"/")[0]
        digest.update(line + b"\n")
    return digest.digest()


class _Real(Memo):
    """A memo whose real path of the executable is given (a link elsewhere)."""

    def __init__(self, real: str) -> None:
        super().__init__()
        self.real = real

    def realpath(self, path: str) -> str:
        return self.real


_piece = st.sampled_from([b"/", b" ", b"\n", b"a", b"/x", b"/x/t", b"t", b"\\", b"\xff"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_piece, min_size=1, max_size=4), st.lists(_piece, min_size=1, max_size=4),
       st.lists(st.one_of(_piece, st.sampled_from([b"EXE", b" EXE\n", b"REAL", b" REAL"])),
                max_size=14))
def test_the_digest_reduces_exactly_the_executables_lines(
        exe_parts: list[bytes], real_parts: list[bytes], parts: list[bytes]) -> None:
    exe, real = b"".join(exe_parts), b"".join(real_parts)
    data = b"".join(exe if p == b"EXE" else b" " + exe + b"\n" if p == b" EXE\n" else
                    real if p == b"REAL" else b" " + real if p == b" REAL" else p
                    for p in parts)
    memo = _Real(os.fsdecode(real))
    assert loadalike.manifest_digest(data, os.fsdecode(exe), memo) == \
        _digest_line_by_line(data, {exe, real})


def test_real_paths_by_a_resolved_parent_and_by_a_known_link(tmp_path: Path) -> None:
    """Beside a path whose directory was resolved already, and for a link whose target is
    known, the memo's real path is os.path.realpath's."""
    real = tmp_path / "real"
    (real / "d").mkdir(parents=True)
    (real / "d" / "f").write_text("x")
    (real / "d" / "g").symlink_to("f")
    (real / "d" / "loop").symlink_to(real / "d" / "loop")
    (tmp_path / "via").symlink_to(real)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "link").symlink_to(tmp_path / "via" / "d" / "g")
    (tmp_path / "t" / "chain").symlink_to(tmp_path / "t" / "link")
    memo = Memo()
    paths = [f"{tmp_path}/via/d/f", f"{tmp_path}/via/d/g", f"{tmp_path}/via/d/nothing",
             f"{tmp_path}/via/d/loop", f"{tmp_path}/via/d/", f"{tmp_path}/t/link"]
    for path in paths * 2:
        assert memo.realpath(path) == os.path.realpath(path), path
    for link in ("link", "chain"):
        path = f"{tmp_path}/t/{link}"
        assert Memo().link_realpath(path, os.readlink(path)) == os.path.realpath(path)
        assert memo.link_realpath(path, os.readlink(path)) == os.path.realpath(path)

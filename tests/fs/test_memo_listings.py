"""What one command's memo answers from another question's answer, checked against the
real loader and against a memo that never saw the other question.

The rules: a directory named through ``..`` is listed as the one the kernel reaches (the
parent of where the links before ``..`` lead, never the lexical parent); a subdirectory is
known absent from a listing of its parent (with the parent's errno when the parent is not
there); a search only tries the directories whose subdirectories list the name; and
searches made for one program, one value of LD_LIBRARY_PATH or one ``$ORIGIN`` never answer
for another.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import lib, program

from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.resolution import Environment, Resolution
from bazel_ldfix.loader.search import Loader
from bazel_ldfix.loader.trace import run_trace
from bazel_ldfix.loader.verify import opened_path
from tests.loader import test_search
from tests.loader.test_search import found

pytestmark = test_search.pytestmark


def _shared(memo: Memo) -> Callable[[Path, str | None], Resolution]:
    """The model with ``memo`` (shared by every call), asserted to agree with the real
    loader and with a fresh memo."""

    def resolve(file: Path, library_path: str | None) -> Resolution:
        env = Environment(library_path, "/")
        model = Loader(test_search._host(), env, memo).resolve(str(file))
        fresh = Loader(test_search._host(), env, Memo()).resolve(str(file))
        assert model == fresh
        real = run_trace(test_search.INTERP, opened_path(str(file), model.info),
                         library_path=library_path, inhibit_cache=True, cwd="/")
        from bazel_ldfix.loader.conformance import compare

        assert compare(model, real) == (), f"model: {model.libraries}\nloader: {real}"
        return model

    return resolve


def test_dotdot_after_a_link_is_the_parent_of_its_target(tmp_path: Path) -> None:
    lexical = lib(tmp_path / "a" / "lib" / "libx.so.1")
    real = lib(tmp_path / "b" / "lib" / "libx.so.1")
    (tmp_path / "b" / "inner").mkdir()
    os.symlink(tmp_path / "b" / "inner", tmp_path / "a" / "link")
    app = program(tmp_path / "app", needs=[real])
    resolve = _shared(Memo())
    # The lexical parent first, so that its listing is known when the other is asked.
    assert found(resolve(app, str(tmp_path / "a" / "lib")))["libx.so.1"] == str(lexical)
    through = f"{tmp_path}/a/link/../lib"
    assert found(resolve(app, through))["libx.so.1"] == f"{through}/libx.so.1"
    memo = Memo()
    assert memo.listing(through + "/").names == memo.listing(str(real.parent)).names


def test_dotdot_after_a_missing_directory_is_not_there(tmp_path: Path) -> None:
    lib(tmp_path / "lib" / "libx.so.1")
    app = program(tmp_path / "app", needs=[tmp_path / "lib" / "libx.so.1"])
    resolve = _shared(Memo())
    assert found(resolve(app, str(tmp_path / "lib")))["libx.so.1"] is not None
    # tmp/missing/.. is no directory to the kernel, whatever tmp/lib holds.
    assert found(resolve(app, f"{tmp_path}/missing/../lib"))["libx.so.1"] is None
    (tmp_path / "file").write_text("")
    assert found(resolve(app, f"{tmp_path}/file/../lib"))["libx.so.1"] is None
    memo = Memo()
    memo.listing(str(tmp_path / "lib"))
    assert memo.listing(f"{tmp_path}/missing/../lib").missing_errno == errno.ENOENT
    assert memo.listing(f"{tmp_path}/file/../lib").missing_errno == errno.ENOTDIR


@pytest.mark.parametrize("parent_first", [True, False])
def test_a_subdirectory_is_listed_alike_whether_its_parent_is_known(
        tmp_path: Path, parent_first: bool) -> None:
    (tmp_path / "d" / "tls").parent.mkdir()
    (tmp_path / "d" / "tls").write_text("")            # a file where a directory could be
    (tmp_path / "d" / "x86_64").mkdir()
    (tmp_path / "d" / "x86_64" / "libx.so.1").write_text("")
    (tmp_path / "d" / "Haswell").mkdir()
    asked = [f"{tmp_path}/d/tls/x86_64/", f"{tmp_path}/d/x86_64/", f"{tmp_path}/d/nope/x/",
             f"{tmp_path}/d/glibc-hwcaps/x86-64-v2/", f"{tmp_path}/d/haswell/"]
    memo = Memo()
    if parent_first:
        memo.listing(f"{tmp_path}/d/")
    for path in asked:
        alone = Memo().listing(path)
        assert memo.listing(path) == alone, path
    assert memo.listing(asked[0]).missing_errno == errno.ENOTDIR
    assert memo.listing(asked[2]).missing_errno == errno.ENOENT
    assert memo.listing(asked[1]).names == {"libx.so.1"}


def test_the_same_runpath_from_two_origins_finds_each_ones_library(tmp_path: Path) -> None:
    """Two packages whose programs name ``$ORIGIN/../lib``: the same string, two places."""
    resolve = _shared(Memo())
    apps = []
    for pkg in ("p", "q"):
        dep = lib(tmp_path / pkg / "lib" / "libdep.so.1")
        apps.append((program(tmp_path / pkg / "bin" / "app", needs=[dep],
                             runpath="$ORIGIN/../lib"), dep))
    for app, dep in apps:
        res = resolve(app, None)
        assert os.path.realpath(found(res)["libdep.so.1"] or "") == str(dep)


def test_a_library_reached_through_two_chains_is_searched_for_each(tmp_path: Path) -> None:
    """The same library needs a name its RPATH-less search finds through the loading
    chain: the program's RPATH differs, so does the answer."""
    leaf_a = lib(tmp_path / "a" / "libleaf.so.1")
    leaf_b = lib(tmp_path / "b" / "libleaf.so.1")
    mid = lib(tmp_path / "mid" / "libmid.so.1", needs=[leaf_a])
    one = program(tmp_path / "one", needs=[mid], rpath=f"{tmp_path}/mid:{tmp_path}/a")
    two = program(tmp_path / "two", needs=[mid], rpath=f"{tmp_path}/mid:{tmp_path}/b")
    resolve = _shared(Memo())
    assert found(resolve(one, None))["libleaf.so.1"] == str(leaf_a)
    assert found(resolve(two, None))["libleaf.so.1"] == str(leaf_b)


def test_two_values_of_the_search_path_are_two_searches(tmp_path: Path) -> None:
    deps = [lib(tmp_path / d / "libdep.so.1") for d in ("x", "y")]
    app = program(tmp_path / "app", needs=[deps[0]])
    resolve = _shared(Memo())
    for value, dep in ((f"{tmp_path}/x", deps[0]), (f"{tmp_path}/y:{tmp_path}/x", deps[1]),
                       (f"{tmp_path}/x", deps[0]), (None, None)):
        assert found(resolve(app, value))["libdep.so.1"] == (str(dep) if dep else None)

"""The cached index of output_base/external: hits, and never a stale one.

Bazel only ever moves timestamps forward. A test that wants an index to be written (its
state settled) sets the tree's timestamps into the past, each time to a new moment, as
time passing would.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from elfbuild import cc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import elf, store
from bazel_ldfix.outputbase import index, indexcache
from bazel_ldfix.store import Record

POOL = ["liba.so.1", "libb.so.2", "libc.so.3", "libd.so"]


class Output:
    """An output_base/external with repositories made the way Bazel makes them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ext = root / "output_base" / "external"
        self.elsewhere = root / "elsewhere"  # what local repositories point at
        self.ext.mkdir(parents=True)
        self.elsewhere.mkdir()
        self.cache = str(root / "cache")
        self.moment = 7200  # seconds ago: each ageing goes one minute forward
        self.fetches = 0

    def fetch(self, name: str, libs: Sequence[tuple[str, str]], *,
              symlinked: bool = False) -> None:
        """Add or re-fetch ``@name``: a fresh directory (or symlink) and marker."""
        self.remove(name)
        self.fetches += 1
        target = (self.elsewhere / f"{name}-{self.fetches}") if symlinked else self.ext / name
        target.mkdir()
        (target / "BUILD").write_text("")
        for sub, lib in libs:
            (target / sub).mkdir(parents=True, exist_ok=True)
            (target / sub / lib).write_text("")
        if symlinked:
            (self.ext / name).symlink_to(target)
        (self.ext / f"@{name}.marker").write_text(f"fetch {self.fetches}\n")

    def remove(self, name: str) -> None:
        repo = self.ext / name
        if repo.is_symlink():
            repo.unlink()
        elif repo.exists():
            shutil.rmtree(repo)
        (self.ext / f"@{name}.marker").unlink(missing_ok=True)

    def age(self) -> None:
        """Time passes: every timestamp moves to one moment, newer than the last one."""
        self.moment -= 60
        when = time.time() - self.moment
        for top in (self.ext, self.elsewhere):
            for dirpath, dirs, files in os.walk(top):
                for name in dirs + files:
                    os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
            os.utime(top, (when, when))

    def lookup(self, names: Sequence[str] = POOL, *,
               cache: bool = True) -> tuple[dict[str, list[str]], bool]:
        """What index.candidates finds, and whether it walked."""
        walks: list[int] = []
        found = index.candidates(names, [str(self.ext)],
                                 store=store.at(self.cache) if cache else None,
                                 progress=lambda n, repo: walks.append(n))
        return found, bool(walks)


@pytest.fixture
def out(tmp_path: Path) -> Output:
    o = Output(tmp_path)
    o.fetch("cuda", [("lib", "liba.so.1"), ("targets/x86_64-linux/lib", "libb.so.2")])
    o.fetch("pip_numpy", [("numpy.libs", "libc.so.3")])
    o.fetch("local", [("lib", "libd.so")], symlinked=True)
    o.age()
    return o


def test_a_second_lookup_is_served_by_the_cache_without_a_walk(out: Output) -> None:
    first, walked = out.lookup()
    assert walked
    assert first["liba.so.1"] == [str(out.ext / "cuda" / "lib" / "liba.so.1")]
    assert first["libd.so"] == [str(out.ext / "local" / "lib" / "libd.so")]
    kept = store.at(out.cache)
    assert kept is not None
    assert os.listdir(os.path.join(out.cache, "index")) == [os.path.basename(
        kept.path(Record.INDEX, str(out.ext)))]
    second, walked = out.lookup()
    assert not walked
    assert second == first
    # Names the walk did not look for are in the index too.
    assert out.lookup(["libb.so.2", "libnowhere.so.1"]) == (
        {"libb.so.2": [str(out.ext / "cuda" / "targets" / "x86_64-linux" / "lib" / "libb.so.2")],
         "libnowhere.so.1": []}, False)


def test_a_state_within_the_settle_margin_is_never_written(tmp_path: Path) -> None:
    """A change in the same clock tick could leave every timestamp as it was."""
    o = Output(tmp_path)
    o.fetch("cuda", [("lib", "liba.so.1")])
    assert not indexcache.state(str(o.ext)).settled
    assert o.lookup()[1]
    assert o.lookup()[1]  # walked again: nothing was written
    assert not os.path.exists(os.path.join(o.cache, "index"))
    later = time.time_ns() + indexcache.SETTLE_NS + 10**9
    assert indexcache.state(str(o.ext), now_ns=later).settled


def test_adding_a_repository_invalidates_the_cache(out: Output) -> None:
    out.lookup()
    out.fetch("tensorrt", [("lib", "liba.so.1")])
    found, walked = out.lookup()
    assert walked
    assert found["liba.so.1"] == [str(out.ext / "cuda" / "lib" / "liba.so.1"),
                                  str(out.ext / "tensorrt" / "lib" / "liba.so.1")]


def test_removing_a_repository_invalidates_the_cache(out: Output) -> None:
    before = indexcache.state(str(out.ext))
    out.lookup()
    out.remove("pip_numpy")
    assert indexcache.state(str(out.ext)).key != before.key
    found, walked = out.lookup()
    assert walked
    assert found["libc.so.3"] == []


def test_refetching_a_repository_invalidates_the_cache(out: Output) -> None:
    """The re-fetched repository keeps its old files and gains one: every old path
    still exists, so only the state can tell."""
    out.lookup()
    out.fetch("cuda", [("lib", "liba.so.1"), ("targets/x86_64-linux/lib", "libb.so.2"),
                       ("lib", "libc.so.3")])
    found, walked = out.lookup()
    assert walked
    assert found["libc.so.3"] == [str(out.ext / "cuda" / "lib" / "libc.so.3"),
                                  str(out.ext / "pip_numpy" / "numpy.libs" / "libc.so.3")]


def test_repointing_a_symlinked_repository_invalidates_the_cache(out: Output) -> None:
    out.lookup()
    out.fetch("local", [("lib", "libd.so"), ("lib64", "liba.so.1")], symlinked=True)
    found, walked = out.lookup()
    assert walked
    assert str(out.ext / "local" / "lib64" / "liba.so.1") in found["liba.so.1"]


def test_a_change_at_the_top_of_a_symlinked_repository_invalidates_the_cache(
        out: Output) -> None:
    """Not something Bazel does, but a local repository can be edited: what the symlink
    points at is part of the state."""
    out.lookup()
    (out.elsewhere / "local-3" / "lib64").mkdir()
    (out.elsewhere / "local-3" / "lib64" / "liba.so.1").write_text("")
    found, walked = out.lookup()
    assert walked
    assert str(out.ext / "local" / "lib64" / "liba.so.1") in found["liba.so.1"]


def test_a_rewritten_marker_alone_invalidates_the_cache(out: Output) -> None:
    before = indexcache.state(str(out.ext))
    (out.ext / "@pip_numpy.marker").write_text("fetch 99, another hash\n")
    assert indexcache.state(str(out.ext)).key != before.key


def test_a_cached_path_that_vanished_sends_the_lookup_back_to_a_walk(out: Output) -> None:
    """Deep inside a repository, where the state does not look (a local repository being
    edited): a cached path that no longer exists is caught."""
    out.lookup()
    before = indexcache.state(str(out.ext))
    (out.elsewhere / "local-3" / "lib" / "libd.so").unlink()
    assert indexcache.state(str(out.ext)) == before
    found, walked = out.lookup(["libd.so"])
    assert walked
    assert found == {"libd.so": []}


def test_a_corrupt_or_foreign_cache_file_is_ignored(out: Output) -> None:
    expected, _ = out.lookup()
    kept = store.at(out.cache)
    assert kept is not None
    path = kept.path(Record.INDEX, str(out.ext))
    for junk in (b"", b"garbage"):
        Path(path).write_bytes(junk)
        assert out.lookup() == (expected, True)
    # Whole and of this version, but the index of another root.
    assert kept.keep(Record.INDEX, str(out.ext), b"/somewhere/else\0003\nabc\0\0liba.so.1\0x")
    assert out.lookup() == (expected, True)


def test_without_a_cache_dir_nothing_is_read_or_written(out: Output) -> None:
    assert out.lookup(cache=False)[1]
    assert out.lookup(cache=False)[1]
    assert not os.path.exists(out.cache)


def test_an_unwritable_cache_dir_only_costs_a_walk(out: Output) -> None:
    os.makedirs(out.cache, mode=0o700)
    Path(out.cache, "index").write_text("a file where the directory should be")
    assert out.lookup()[1]
    assert out.lookup()[1]


odd = st.text(st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
              min_size=1, max_size=8).filter(lambda s: s not in (".", ".."))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.lists(odd, max_size=2), odd.map(lambda s: f"lib{s}.so.1")),
                min_size=1, max_size=6))
def test_any_name_and_directory_survives_the_cache(
        tmp_path_factory: pytest.TempPathFactory, files: list[tuple[list[str], str]]) -> None:
    root = tmp_path_factory.mktemp("ext")
    for parts, name in files:
        directory = root.joinpath(*parts)
        if directory.exists() and not directory.is_dir():
            continue
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / name).is_dir():
            (directory / name).write_text("")
    found = index.scan(str(root))
    settled = indexcache.State(b"state\0\0of the tree", True)
    cache = store.at(str(tmp_path_factory.mktemp("cache")))
    assert cache is not None
    assert indexcache.save(cache, str(root), settled, found)
    names = [name for _, name in files] + ["libabsent.so.1"]
    assert indexcache.load(cache, str(root), settled, names) == {
        name: found.get(name, []) for name in names}
    other = indexcache.State(b"another state", True)
    assert indexcache.load(cache, str(root), other, names) is None


repo_names = st.sampled_from(["cuda", "pip_numpy", "local", "npm_left_pad"])
libs = st.lists(st.tuples(st.sampled_from(["lib", "lib64", "targets/sbsa-linux/lib", "."]),
                          st.sampled_from(POOL)), max_size=3)
operations = st.lists(st.one_of(
    st.tuples(st.just("fetch"), repo_names, libs, st.booleans()),
    st.tuples(st.just("remove"), repo_names, st.just([]), st.just(False)),
    st.tuples(st.just("age"), st.just(""), st.just([]), st.just(False))), max_size=6)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations)
def test_what_bazel_does_to_external_never_yields_a_stale_hit(
        tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, str, list[tuple[str, str]], bool]]) -> None:
    """Any sequence of fetches, re-fetches, removals and time passing: the cached lookup
    finds what a walk finds, and once everything settles, without walking."""
    o = Output(tmp_path_factory.mktemp("ob"))
    o.fetch("cuda", [("lib", "liba.so.1")])
    o.age()
    for op, name, placed, symlinked in steps:
        if op == "fetch":
            o.fetch(name, placed, symlinked=symlinked)
        elif op == "remove":
            o.remove(name)
        else:
            o.age()
        assert o.lookup()[0] == o.lookup(cache=False)[0]
    o.age()
    o.lookup()
    assert o.lookup() == (o.lookup(cache=False)[0], False)


def test_locate_with_the_cache_agrees_with_locate_without(tmp_path: Path) -> None:
    o = Output(tmp_path)
    o.fetch("cuda", [])
    real = cc(o.ext / "cuda" / "lib" / "liba.so.1", "-shared", src="int f(void){return 1;}")
    shutil.copyfile(real, o.ext / "cuda" / "liba.so.1")
    o.age()
    expect = elf.read_header("/bin/sh")
    uncached = index.locate(["liba.so.1"], [str(o.ext)], expect)
    for _ in range(2):  # written, then read
        assert index.locate(["liba.so.1"], [str(o.ext)], expect,
                            store=store.at(o.cache)) == uncached
    assert uncached["liba.so.1"].dir == str(o.ext / "cuda")

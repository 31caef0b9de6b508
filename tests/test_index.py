"""The output_base index and the choice among copies, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfbuild import cc, patch_class, patch_machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import elf, index

SO = "int f(void){return 1;}"


def shared(path: Path, soname: str | None = None) -> Path:
    return cc(path, "-shared", f"-Wl,-soname,{soname or path.name}", src=SO)


def host_header() -> elf.ElfHeader:
    return elf.read_header("/bin/sh")


def test_walk_follows_symlinked_directories_once_and_ends_on_cycles(tmp_path: Path) -> None:
    real = tmp_path / "real" / "lib"
    shared(real / "libx.so.1")
    ext = tmp_path / "external"
    ext.mkdir()
    (ext / "repo").symlink_to(tmp_path / "real")         # a symlinked repository
    (ext / "again").symlink_to(tmp_path / "real")        # the same directory a second time
    (real / "loop").symlink_to(ext)                      # a cycle back to the top
    found = index.walk(str(ext))
    assert found == {"libx.so.1": [str(ext / "again" / "lib" / "libx.so.1")]}


def test_a_wrong_machine_copy_is_passed_over_with_the_reason(tmp_path: Path) -> None:
    good = shared(tmp_path / "a" / "lib" / "libx.so.1")
    arm = tmp_path / "a" / "aarch64" / "libx.so.1"
    arm.parent.mkdir()
    arm.write_bytes(good.read_bytes())
    patch_machine(arm, 183)
    m32 = tmp_path / "a" / "lib32" / "libx.so.1"
    m32.parent.mkdir()
    m32.write_bytes(good.read_bytes())
    patch_class(m32, 1)
    choice = index.choose("libx.so.1", [str(arm), str(m32), str(good)], host_header())
    assert choice.dir == str(good.parent)
    assert {(p.path, p.reason) for p in choice.passed_over} == {
        (str(arm), "wrong machine: aarch64"), (str(m32), "wrong ELF class: ELFCLASS32")}


def test_the_directory_of_the_linked_library_is_preferred(tmp_path: Path) -> None:
    near = shared(tmp_path / "z" / "deep" / "lib" / "libx.so.1")
    far = shared(tmp_path / "a" / "libx.so.1")
    choice = index.choose("libx.so.1", [str(far), str(near)], host_header(),
                          preferred=[str(near.parent)])
    assert choice.path == str(near)
    assert choice.passed_over[0].path == str(far)
    # Without a preference: deterministic, the shortest path.
    assert index.choose("libx.so.1", [str(near), str(far)], host_header()).path == str(far)


def test_a_git_lfs_pointer_is_not_a_candidate(tmp_path: Path) -> None:
    pointer = tmp_path / "libx.so.1"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n")
    choice = index.choose("libx.so.1", [str(pointer)], host_header())
    assert choice.dir is None
    assert choice.passed_over[0].reason == "not loadable: invalid ELF header"


def test_locate_walks_only_for_names_not_beside_the_linked_libraries(tmp_path: Path) -> None:
    linked = shared(tmp_path / "sdk" / "lib" / "libx.so.1")
    shared(tmp_path / "ext" / "other" / "liby.so.2")
    unreadable_root = tmp_path / "ext"
    found = index.locate(["libx.so.1", "liby.so.2", "libz.so.3"], [str(unreadable_root)],
                         host_header(), preferred=[str(linked.parent)])
    assert found["libx.so.1"].dir == str(linked.parent)
    assert found["liby.so.2"].dir == str(tmp_path / "ext" / "other")
    assert found["libz.so.3"].dir is None


names = st.sampled_from(["libx.so", "libx.so.1", "liby.so.2", "notes.txt", "libz.so.3.1"])
layout = st.lists(st.tuples(st.lists(st.sampled_from("abc"), min_size=0, max_size=3), names),
                  max_size=12)
links = st.lists(st.tuples(st.lists(st.sampled_from("abc"), min_size=0, max_size=2),
                           st.lists(st.sampled_from("abc"), min_size=0, max_size=2)), max_size=4)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout, links)
def test_walk_finds_what_a_brute_force_walk_finds(
        tmp_path_factory: pytest.TempPathFactory,
        files: list[tuple[list[str], str]], symlinks: list[tuple[list[str], list[str]]]) -> None:
    root = tmp_path_factory.mktemp("tree")
    for parts, name in files:
        directory = root.joinpath(*parts)
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / name).exists():
            (directory / name).write_text("x")
    for i, (src, dst) in enumerate(symlinks):
        parent = root.joinpath(*src)
        parent.mkdir(parents=True, exist_ok=True)
        (parent / f"link{i}").symlink_to(root.joinpath(*dst))
    found = index.walk(str(root))
    # Brute force: every library file reachable through links, by its real path.
    expected: set[str] = set()
    for dirpath, dirs, filenames in os.walk(root, followlinks=True):
        if dirpath.count("/link") > 4:
            dirs[:] = []  # deep enough to have gone round every cycle
        expected |= {os.path.realpath(os.path.join(dirpath, n))
                     for n in filenames if index.looks_like_library(n)}
    got = {os.path.realpath(p) for paths in found.values() for p in paths}
    assert got == expected

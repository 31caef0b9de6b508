"""The output_base index and the choice among copies, on real files."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import cc, lfs_pointer, patch_class, patch_machine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import elf
from bazel_ldfix.fs.mounts import STAT_EVERY_DIRECTORY, Mounts
from bazel_ldfix.outputbase import index

SO = "int f(void){return 1;}"
HERE = Path(__file__).resolve().parent
MOUNTS = Mounts.read()
# Every way the walk can learn a directory's identity: readdir's inode where the mount
# table allows it (the default), a stat of every directory, and a stat of the directories
# named like a mount point.
MOUNT_MODES = {
    "mount table": MOUNTS,
    "stat every directory": STAT_EVERY_DIRECTORY,
    "names of mount points": Mounts(MOUNTS.uniform, frozenset({"a", "b", "link0"})),
}


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


def reference_walk(root: str) -> dict[str, list[str]]:
    """The oracle: directories known by their real path (no inode in sight), depth first in
    sorted order, a directory reached twice walked where it is reached first."""
    out: dict[str, list[str]] = {}
    seen: set[str] = set()

    def visit(directory: str) -> None:
        real = os.path.realpath(directory)
        if real in seen:
            return
        seen.add(real)
        names = sorted(os.listdir(directory))
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.isdir(path) and index.looks_like_library(name):
                out.setdefault(name, []).append(path)
        for name in names:
            if os.path.isdir(os.path.join(directory, name)):
                visit(os.path.join(directory, name))

    visit(root)
    return {name: sorted(paths) for name, paths in out.items()}


names = st.sampled_from(["libx.so", "libx.so.1", "liby.so.2", "notes.txt", "libz.so.3.1"])
parts = st.lists(st.sampled_from("abc"), min_size=0, max_size=3)
layout = st.lists(st.tuples(parts, names), max_size=14)
# Symlinks anywhere to any directory: symlinked repositories, the same directory reached
# twice, cycles (a link to an ancestor), dangling links.
links = st.lists(st.tuples(st.lists(st.sampled_from("abc"), max_size=2), parts), max_size=5)


def build_tree(root: Path, files: list[tuple[list[str], str]],
               symlinks: list[tuple[list[str], list[str]]]) -> None:
    for where, name in files:
        directory = root.joinpath(*where)
        directory.mkdir(parents=True, exist_ok=True)
        if not (directory / name).exists():
            (directory / name).write_text("x")
    for i, (src, dst) in enumerate(symlinks):
        parent = root.joinpath(*src)
        parent.mkdir(parents=True, exist_ok=True)
        (parent / f"link{i}").symlink_to(root.joinpath(*dst))


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout, links)
def test_walk_finds_what_a_brute_force_walk_finds(
        tmp_path_factory: pytest.TempPathFactory,
        files: list[tuple[list[str], str]], symlinks: list[tuple[list[str], list[str]]]) -> None:
    root = tmp_path_factory.mktemp("tree")
    build_tree(root, files, symlinks)
    expected = reference_walk(str(root))
    for mode, mounts in MOUNT_MODES.items():
        assert index.walk(str(root), mounts=mounts) == expected, mode
    # Every library file reachable through links, by its real path, once.
    brute: set[str] = set()
    for dirpath, dirs, filenames in os.walk(root, followlinks=True):
        if dirpath.count("/link") > 4:
            dirs[:] = []  # deep enough to have gone round every cycle
        brute |= {os.path.realpath(os.path.join(dirpath, n))
                  for n in filenames if index.looks_like_library(n)}
    got = [os.path.realpath(p) for paths in expected.values() for p in paths]
    assert set(got) == brute


def test_scan_lists_directories_and_only_the_wanted_names(tmp_path: Path) -> None:
    build_tree(tmp_path, [(["a", "lib"], "libx.so.1"), (["b"], "libx.so.1"),
                          (["b"], "liby.so.2"), ([], "libz.so")], [(["c"], ["a"])])
    root = str(tmp_path)
    assert index.scan(root) == {"libx.so.1": [f"{root}/a/lib", f"{root}/b"],
                                "liby.so.2": [f"{root}/b"], "libz.so": [root]}
    # c -> a comes after a: a is walked where it is reached first.
    assert index.scan(root, {"libx.so.1"}.__contains__) == {
        "libx.so.1": [f"{root}/a/lib", f"{root}/b"]}


def test_an_unreadable_directory_is_reported_and_the_walk_goes_on(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every directory")
    build_tree(tmp_path, [(["a"], "libx.so.1"), (["b"], "libx.so.1")], [])
    (tmp_path / "a").chmod(0)
    errors: list[str] = []
    try:
        found = index.walk(str(tmp_path), on_error=lambda p, _e: errors.append(p))
    finally:
        (tmp_path / "a").chmod(0o755)
    assert found == {"libx.so.1": [str(tmp_path / "b" / "libx.so.1")]}
    assert errors == [str(tmp_path / "a")]


MOUNTED_WALK = """
import json, os, sys
from bazel_ldfix.fs.mounts import Mounts
from bazel_ldfix.outputbase import index
sys.path[:0] = sys.argv[2].split(os.pathsep)
from test_index import reference_walk
root = sys.argv[1]
for fs in ("r1", "r2"):
    os.makedirs(os.path.join(root, fs, "x", "lib"))
    open(os.path.join(root, fs, "x", "lib", "libx.so.1"), "w").close()
blind = Mounts(Mounts.read().uniform | {os.stat(root).st_dev}, frozenset())
print(json.dumps({"walk": index.walk(root), "reference": reference_walk(root),
                  "blind": index.walk(root, mounts=blind)}))
"""


def test_directories_on_two_mounted_filesystems_with_the_same_inodes_are_both_walked(
        tmp_path: Path) -> None:
    """Two tmpfs mounted side by side number their inodes alike (per-superblock numbers),
    and readdir gives a mount point the inode of the directory it covers: known by its
    parent's device and readdir's inode, ``r2/x`` would be ``r1/x`` and be skipped."""
    root = tmp_path / "external"
    for fs in ("r1", "r2"):
        (root / fs).mkdir(parents=True)
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare(1)")
    mount = " && ".join(f"mount -t tmpfs ldfix {root / fs}" for fs in ("r1", "r2"))
    proc = subprocess.run(
        [unshare, "--mount", "--map-root-user", "sh", "-c",
         f'{mount} && exec "$0" -c "$1" "$2" "$3"', sys.executable, MOUNTED_WALK,
         str(root), os.pathsep.join([str(HERE), str(HERE.parent / "support")])],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0 and "mount" in proc.stderr + proc.stdout and not proc.stdout:
        pytest.skip(f"cannot mount in a user namespace here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    both = sorted(f"{root}/{fs}/x/lib/libx.so.1" for fs in ("r1", "r2"))
    assert result["walk"] == result["reference"] == {"libx.so.1": both}
    assert result["blind"] != result["walk"]  # the test can tell the difference


class FakeTerminal(io.StringIO):
    def __init__(self, tty: bool = True) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_shows_after_a_second_on_a_terminal_and_erases_itself() -> None:
    out, clock = FakeTerminal(), Clock()
    progress = index.Progress(out, clock=clock)
    progress(0, "")
    clock.now += 0.5
    progress(1000, "repo_a")
    assert out.getvalue() == ""  # a short walk says nothing
    clock.now += 0.6
    progress(2000, "repo_b")
    assert out.getvalue().endswith("bazel-ldfix: scanning 2,000 files (in repo_b)")
    clock.now += 0.05
    progress(2100, "repo_c")  # at most ten updates a second
    assert "repo_c" not in out.getvalue()
    progress(3000, None)
    assert out.getvalue().endswith("\r\x1b[K")


def test_progress_is_silent_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    out, clock = FakeTerminal(tty=False), Clock()
    progress = index.Progress(out, clock=clock)
    progress(0, "")
    clock.now += 5
    progress(10**6, "repo")
    progress(10**6, None)
    assert out.getvalue() == ""


def test_the_walk_reports_progress_with_the_repository(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / "repo_a" / f"d{i}").mkdir(parents=True)
    (tmp_path / "repo_b").mkdir()
    calls: list[tuple[int, str | None]] = []
    index.walk(str(tmp_path), progress=lambda n, repo: calls.append((n, repo)))
    assert calls[0] == (0, "")
    assert calls[-1] == (302, None)
    assert any(repo == "repo_a" for _, repo in calls[1:-1])


@pytest.fixture(scope="module")
def a_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared(tmp_path_factory.mktemp("elf") / "libt.so")


places = st.lists(st.tuples(parts, st.sampled_from(["libx.so.1", "liby.so.2"])),
                  min_size=1, max_size=8)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(places, links, st.data())
def test_the_fast_path_agrees_with_the_walk_and_walks_nothing(
        tmp_path_factory: pytest.TempPathFactory, a_library: Path,
        files: list[tuple[list[str], str]], symlinks: list[tuple[list[str], list[str]]],
        data: st.DataObject) -> None:
    root = tmp_path_factory.mktemp("ext")
    build_tree(root, [], symlinks)
    for where, name in files:
        directory = root.joinpath(*where)
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(a_library, directory / name)
    # The directories of the libraries the test links: some that hold a wanted file.
    holding = sorted({str(root.joinpath(*where)) for where, _ in files})
    preferred = data.draw(st.lists(st.sampled_from(holding), min_size=1, unique=True))
    wanted = sorted({name for where, name in files if str(root.joinpath(*where)) in preferred})
    walks: list[int] = []
    fast = index.locate(wanted, [str(root)], host_header(), preferred,
                        progress=lambda n, repo: walks.append(n))
    assert walks == []  # everything was beside a linked library
    everywhere = index.walk(str(root))
    for name in wanted:
        slow = index.choose(name, everywhere[name], host_header(), preferred)
        assert os.path.realpath(str(fast[name].dir)) == os.path.realpath(str(slow.dir))


def test_copies_lists_every_copy_best_first(tmp_path: Path) -> None:
    ext = tmp_path / "external"
    good = shared(ext / "sdk" / "targets" / "x86_64-linux" / "lib" / "libx.so.1")
    arm = ext / "sdk" / "targets" / "sbsa-linux" / "lib" / "libx.so.1"
    arm.parent.mkdir(parents=True)
    arm.write_bytes(good.read_bytes())
    patch_machine(arm, 183)
    (ext / "sdk" / "lib64").symlink_to("targets/x86_64-linux/lib")
    lfs_pointer(ext / "pointer" / "libx.so.1")
    found = index.copies(["libx.so.1", "libnone.so.1"], [str(ext)], host_header())
    assert found["libnone.so.1"] == ()
    listed = [(c.dir, c.class_name, c.machine_name, c.reason) for c in found["libx.so.1"]]
    assert listed == [
        # lib64 comes first in sorted order, so the x86-64 directory is reached through it
        (str(ext / "sdk" / "lib64"), "ELFCLASS64", "x86-64", None),
        (str(ext / "pointer"), None, None, "not loadable: invalid ELF header"),
        (str(arm.parent), "ELFCLASS64", "aarch64", "wrong machine: aarch64"),
    ]


def test_a_linked_librarys_directory_reached_through_a_symlink_is_still_preferred(
        tmp_path: Path) -> None:
    ext = tmp_path / "external"
    linked = shared(ext / "sdk" / "targets" / "x86_64-linux" / "lib" / "libx.so.1")
    (ext / "sdk" / "lib64").symlink_to("targets/x86_64-linux/lib")  # walked first
    shared(ext / "a" / "libx.so.1")  # a shorter path
    found = index.walk(str(ext))["libx.so.1"]
    assert str(linked) not in found
    choice = index.choose("libx.so.1", found, host_header(), preferred=[str(linked.parent)])
    assert choice.dir == str(ext / "sdk" / "lib64")


def test_the_directory_behind_a_staged_library_is_searched_first_and_alone(
        tmp_path: Path) -> None:
    """Bazel stages lib/libx.so of a cc_import as a symlink in _solib_k8; the test needs
    libx.so.1, which is not staged but sits beside the symlink's target."""
    ext = tmp_path / "external"
    versioned = shared(ext / "sdk" / "lib" / "libx.so.1")
    (ext / "sdk" / "lib" / "libx.so").symlink_to("libx.so.1")
    shared(ext / "a" / "libx.so.1")  # a shorter path, which a walk would choose
    solib = tmp_path / "bin" / "_solib_k8" / "_U@sdk_S_S_Clibx___Ulib"
    solib.mkdir(parents=True)
    (solib / "libx.so").symlink_to(ext / "sdk" / "lib" / "libx.so")
    # Each link of the chain, as it names the next, then the real directory.
    preferred = index.preferred_dirs([str(solib / "libx.so"), str(tmp_path / "missing")])
    assert preferred == (str(versioned.parent), str(tmp_path))
    walks: list[int] = []
    found = index.locate(["libx.so.1"], [str(ext)], host_header(), preferred,
                         progress=lambda n, repo: walks.append(n))
    assert found["libx.so.1"].dir == str(versioned.parent)
    assert walks == []

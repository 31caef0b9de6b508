"""A repair is given again only while everything it was made from is as it was.

A plan's memo keeps every fact it reads of the file system (Memo.watch, Memo.facts). The
first test runs a whole plan under a recorder of Python's own file-system calls and checks
that each call is covered by a kept fact: a read the facts do not cover would let a
change go unseen. The others change, one at a time, each kind of thing a repair depends on,
and check that the kept facts no longer hold; and that the kept file is believed only
whole, only from this user, and only for the same inputs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

import fsaccess
import pytest
from elfbuild import lib, program
from runfilestree import past_manifest, tree_of

from bazel_ldfix import store
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.fs.facts import PROBES, Facts, holds
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.given import Given
from bazel_ldfix.loader.closure import LoaderFactory, host_header
from bazel_ldfix.loader.cuda import NO_HOST_DRIVER
from bazel_ldfix.outputbase import indexcache  # noqa: F401  (registers the "index" facts)
from bazel_ldfix.repair import replay
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext
from bazel_ldfix.session import Session
from bazel_ldfix.store import Record, Store


def _later() -> int:
    """A "now" by which every timestamp read so far has settled (taken when asked: a
    module-level constant would fall behind the files of a long session)."""
    return time.time_ns() + 10**12


def _workspace(top: Path, count: int = 3) -> tuple[Path, list[TestInput]]:
    """``count`` cc_tests laid out as Bazel lays them out: each links the SDK's unversioned
    file (SONAME libsdk.so.11, which only output_base/external holds) through its
    ``_solib_k8`` link, and stages the link in a runfiles tree with a MANIFEST."""
    ob = top / "ob"
    ext = ob / "external" / "sdk" / "lib"
    dep = lib(ob / "external" / "deps" / "lib" / "libdep.so.2")   # found by the index
    real = lib(ext / "libsdk.so.11", needs=[dep])
    os.symlink(real.name, ext / "libsdk.so")
    bin_dir = ob / "execroot" / "ws" / "bazel-out" / "k8-fastbuild" / "bin"
    solib = bin_dir / "_solib_k8" / "_U@sdk_S_S_Clib"
    solib.mkdir(parents=True)
    os.symlink(ext / "libsdk.so", solib / "libsdk.so")
    inputs = []
    for i in range(count):
        exe = program(bin_dir / "p" / f"t{i}", needs=[real],
                      runpath="$ORIGIN/../_solib_k8/_U@sdk_S_S_Clib")
        tree_of(exe, [f"ws/_solib_k8/_U@sdk_S_S_Clib/libsdk.so {solib}/libsdk.so",
                      f"ws/p/t{i} {exe}"])
        inputs.append(TestInput(f"//p:t{i}", str(exe)))
    return ob, inputs


_SESSIONS: dict[str, Session] = {}


def _session(cache: Path) -> Session:
    """One session per store, settled once: as a command settles it before Bazel runs."""
    key = str(cache)
    if key not in _SESSIONS:
        _SESSIONS[key] = Session("/", {}, store_root=key, driver=NO_HOST_DRIVER).for_repair()
    return _SESSIONS[key]


def _planned(ob: Path, inputs: list[TestInput], cache: Path
             ) -> tuple[Repair, Facts | None]:
    session = Models()
    factory = LoaderFactory(memo=session.memo)
    factory.warm()      # as a command does while Bazel builds
    session.memo.watch()
    env = TestEnvironment((), "nothing", {t.label: None for t in inputs})
    context = PlanContext(str(ob), factory, models=session, host=host_header(),
                          session=_session(cache))
    planned = plan_repair(inputs, env, context)
    return planned, session.memo.facts()


# Which kinds of kept fact decide what each call says (a file's identity decides its bytes).
_COVERS = {
    "open": {"key", "stat", "lstat"},
    "stat": {"key", "stat", "dir", "isfile"},
    "lstat": {"lstat", "link"},
    "readlink": {"link"},
    "listdir": {"list"},
    "scandir": {"list"},
    "access": {"access"},
}


def _tree_paths(facts: Facts) -> set[str]:
    """What each kept runfiles tree fact stands for: its input manifest, its MANIFEST and
    its directories."""
    out = set()
    for question in facts.get("tree", {}):
        executable, *dirs = question.split("\0")
        root = executable + ".runfiles"
        out |= {executable + ".runfiles_manifest", root + "/MANIFEST"}
        out |= {f"{root}/{d}" if d else root for d in dirs}
    return out


def _covered(call: str, path: str, facts: Facts, ob: Path,
             cache: Path, rechecked: set[tuple[str, str]]) -> bool:
    if any(path in facts.get(kind, {}) for kind in _COVERS[call]) or \
            (call, path) in rechecked:
        return True
    if call in ("open", "stat") and path in _tree_paths(facts):
        return True   # a runfiles tree's own statuses (MANIFEST's bytes by its identity)
    if call in ("open", "stat") and os.path.realpath(path) in facts.get("key", {}):
        return True   # the file a path names (memo.realpath keeps each link it follows)
    if path == "/proc/self/mountinfo":
        return "" in facts.get("mounts", {})
    external = str(ob / "external")
    if path.startswith((str(cache) + "/", external + "/", "<dir_fd>/")) or \
            path in (str(cache), external):
        return external in facts.get("index", {})   # the index of external/, by its state
    return False


def test_every_file_system_read_of_a_plan_is_a_kept_fact(tmp_path: Path) -> None:
    ob, inputs = _workspace(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _planned(ob, inputs, cache)     # what this process asks once (the host's loader)
    with fsaccess.recording() as calls:
        planned, facts = _planned(ob, inputs, cache)
    # A real search: beside the link each test stages, then in the index of external/.
    assert planned.added == (str(ob / "external" / "sdk" / "lib"),
                             str(ob / "external" / "deps" / "lib"))
    assert facts is not None
    assert calls, "the recorder saw nothing"
    # What the host's loader said, which loader each file gets, what each runfiles tree
    # was: checking those facts reads again what was read to answer them.
    with fsaccess.recording() as again:
        assert all(PROBES[kind](path) == value for kind, kept in facts.items()
                   for path, value in kept.items()
                   if kind in ("trusted", "loader", "mounts", "index", "tree"))
    uncovered = sorted({(call, path) for call, path in calls
                        if not _covered(call, path, facts, ob, cache, set(again))})
    assert uncovered == []
    assert holds(facts)


def _retarget_solib(ob: Path) -> None:
    solib = next((ob / "execroot").rglob("_U@sdk_S_S_Clib"))
    os.unlink(solib / "libsdk.so")
    os.symlink(ob / "external" / "sdk" / "lib" / "libsdk.so.11", solib / "libsdk.so")


def _replace_library(ob: Path) -> None:
    path = ob / "external" / "deps" / "lib" / "libdep.so.2"
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)      # the same bytes, another file


def _rewrite_in_place_keeping_mtime(ob: Path) -> None:
    # As `cp -p` over the file does: the same inode, size and modification time.
    path = ob / "external" / "sdk" / "lib" / "libsdk.so.11"
    before = os.stat(path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    while time.time_ns() < before.st_ctime_ns + 20_000_000:     # a clock tick past its
        time.sleep(0.001)                                       # ctime, seldom waited
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _add_library(ob: Path) -> None:
    lib(ob / "external" / "sdk" / "lib" / "libnew.so.1")


def _rebuild_test(ob: Path) -> None:
    exe = next((ob / "execroot").rglob("t0"))
    data = exe.read_bytes()
    exe.unlink()
    exe.write_bytes(data)
    exe.chmod(0o755)


def _touch_tree(ob: Path) -> None:
    tree = next((ob / "execroot").rglob("t1.runfiles"))
    past_manifest(tree)
    (tree / "ws" / "extra").mkdir()


def _rewrite_manifest(ob: Path) -> None:
    manifest = next((ob / "execroot").rglob("t2.runfiles")) / "MANIFEST"
    text = manifest.read_text()
    manifest.unlink()
    manifest.write_text(text)


def _new_repository(ob: Path) -> None:
    (ob / "external" / "other").mkdir()


@pytest.mark.parametrize("change", [_retarget_solib, _replace_library,
                                    _rewrite_in_place_keeping_mtime, _add_library,
                                    _rebuild_test, _touch_tree, _rewrite_manifest,
                                    _new_repository])
def test_each_change_to_what_a_repair_read_is_seen(tmp_path: Path,
                                                    change: Callable[[Path], None]) -> None:
    ob, inputs = _workspace(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _, facts = _planned(ob, inputs, cache)
    assert facts is not None and holds(facts)
    change(ob)
    assert not holds(facts)


def test_a_walked_tree_keeps_no_facts(tmp_path: Path) -> None:
    ob, inputs = _workspace(tmp_path, 1)
    os.unlink(f"{inputs[0].executable}.runfiles_manifest")   # no listing from MANIFEST
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _, facts = _planned(ob, inputs, cache)
    assert facts is None


def _kept(tmp_path: Path) -> tuple[Store, Repair, Facts]:
    ob, inputs = _workspace(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    planned, facts = _planned(ob, inputs, cache)
    assert facts is not None
    kept = store.at(str(cache))
    assert kept is not None
    assert replay.save(kept, "cmd", "inputs", "", facts, planned, now_ns=_later())
    return kept, planned, facts


def test_a_kept_repair_is_given_again_for_the_same_inputs_only(tmp_path: Path) -> None:
    where, planned, facts = _kept(tmp_path)
    kept = replay.load(where, "cmd")
    assert kept is not None
    assert kept.facts == facts
    again = dataclasses.replace(planned, given_again=True)
    assert replay.given_again(kept, "inputs", None) == again
    assert replay.given_again(kept, "other inputs", None) is None
    rules = replay.Kept(kept.inputs, "some rules", kept.facts, kept.repair)
    assert replay.given_again(rules, "inputs", None) is None   # not known without asking
    assert replay.given_again(rules, "inputs", "other rules") is None
    assert replay.given_again(rules, "inputs", "some rules") == again


def test_a_kept_repair_is_not_given_again_once_a_fact_changed(tmp_path: Path) -> None:
    where, _, _ = _kept(tmp_path)
    _add_library(tmp_path / "ob")
    assert replay.given_again(replay.load(where, "cmd"), "inputs", None) is None


def test_a_repair_made_anew_without_the_cache_replaces_a_kept_one_that_differs(
        tmp_path: Path) -> None:
    where, planned, facts = _kept(tmp_path)
    other = dataclasses.replace(planned, given=Given())
    assert not replay.replace_differing(where, "cmd", "inputs", "", facts, planned, _later())
    assert replay.replace_differing(where, "cmd", "inputs", "", facts, other, _later())
    kept = replay.load(where, "cmd")
    assert kept is not None and kept.repair == other
    # One that cannot be kept (it read what is no fact) removes the one that was.
    assert replay.replace_differing(where, "cmd", "inputs", "", None, planned)
    assert not os.path.exists(where.path(Record.REPAIR, "cmd"))
    # Where no repair was kept, none is written.
    assert not replay.replace_differing(where, "cmd", "inputs", "", facts, planned, _later())
    assert not os.path.exists(where.path(Record.REPAIR, "cmd"))


def test_a_kept_file_is_believed_only_whole_and_only_from_this_user(tmp_path: Path) -> None:
    kept, _, _ = _kept(tmp_path)
    where = Path(kept.path(Record.REPAIR, "cmd"))
    data = where.read_bytes()
    where.write_bytes(data[:-10])
    assert replay.load(kept, "cmd") is None      # cut short
    where.write_bytes(data)
    assert replay.load(kept, "cmd") is not None
    where.chmod(0o664)
    assert replay.load(kept, "cmd") is None      # another user could have written it
    where.chmod(0o600)
    where.parent.chmod(0o775)
    assert replay.load(kept, "cmd") is None      # in a directory others can write
    where.parent.chmod(0o700)
    # Whole, of this version, but not what save writes.
    assert kept.keep(Record.REPAIR, "cmd", b'{"inputs": "inputs"}\n{}')
    assert replay.load(kept, "cmd") is None


def test_a_repair_that_read_recent_files_is_not_kept(tmp_path: Path) -> None:
    ob, inputs = _workspace(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    planned, facts = _planned(ob, inputs, cache)
    assert facts is not None
    assert not replay.settled(facts)        # the files were written a moment ago
    kept = store.at(str(cache))
    assert kept is not None
    assert not replay.save(kept, "cmd", "inputs", "", facts, planned)
    assert not os.path.exists(kept.path(Record.REPAIR, "cmd"))
    assert replay.settled(facts, _later())


def test_facts_read_twice_differently_are_not_kept(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    memo = Memo()
    memo.watch()
    memo.keep("list", str(directory))
    memo.stat(str(directory))
    (directory / "x").touch()
    memo.stat(str(directory))
    assert memo.facts() is None
    assert not memo.still_true()


def test_only_the_most_recent_repairs_are_kept(tmp_path: Path) -> None:
    kept, planned, facts = _kept(tmp_path)
    most = Record.REPAIR.most
    assert most is not None
    os.utime(kept.path(Record.REPAIR, "cmd"), ns=(10**18, 10**18))
    for i in range(most + 3):
        assert replay.save(kept, f"cmd{i}", "inputs", "", facts, planned, now_ns=_later())
        # Each written after the one before (a clock tick can hold many writes).
        stamp = 10**18 + i + 1
        os.utime(kept.path(Record.REPAIR, f"cmd{i}"), ns=(stamp, stamp))
    assert len(os.listdir(os.path.dirname(kept.path(Record.REPAIR, "cmd")))) == most
    assert replay.load(kept, f"cmd{most + 2}") is not None
    assert replay.load(kept, "cmd") is None


def test_a_file_that_cannot_be_read_is_a_fact_too(tmp_path: Path) -> None:
    # The loader goes on without a missing interpreter; one that appears changes the load.
    missing = tmp_path / "ld.so"
    memo = Memo()
    memo.watch()
    with pytest.raises(Exception):  # noqa: B017 (whichever error the reader gives)
        memo.read_elf(str(missing))
    assert memo.still_true()
    program(missing)
    assert not memo.still_true()


def test_an_index_state_is_kept_only_once_settled(tmp_path: Path) -> None:
    external = tmp_path / "ob" / "external"
    (external / "repo").mkdir(parents=True)
    memo = Memo()
    memo.watch()
    memo.keep("index", str(external))
    facts = memo.facts()
    assert facts is not None and holds(facts)
    assert not replay.settled(facts)            # a repository made a moment ago
    assert replay.settled(facts, _later())


def test_paths_with_newlines_quotes_and_undecodable_bytes_are_kept_whole(
        tmp_path: Path) -> None:
    _, planned, facts = _kept(tmp_path)
    odd = os.fsdecode(b'/a\nb "c\' d\xff')
    facts = {**facts, "link": {**facts.get("link", {}), odd: "\0"}}
    where = store.at(str(tmp_path / "cache"))
    assert where is not None
    assert replay.save(where, "odd", "inputs", "", facts, planned, now_ns=_later())
    kept = replay.load(where, "odd")
    assert kept is not None and kept.facts == facts and kept.repair == planned

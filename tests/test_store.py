"""The per-user store believes only what this user alone wrote, whole, in this version's
format: real directories, files, links and FIFOs on this machine, another user's made with
chown where the tests run as root, a real full filesystem where one can be mounted.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix import store
from bazel_ldfix.store import Record, Store

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
pytestmark = pytest.mark.security


def opened(tmp_path: Path) -> Store:
    found = store.at(str(tmp_path / "store"))
    assert found is not None
    return found


# -- where it is ---------------------------------------------------------------------------

def test_an_absolute_xdg_cache_home_is_used_and_a_relative_one_is_not(tmp_path: Path) -> None:
    xdg = store.of_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert xdg == Store(str(tmp_path / "xdg" / "bazel-ldfix"))
    assert stat.S_IMODE(os.stat(xdg.root).st_mode) == 0o700
    home = store.of_env({"XDG_CACHE_HOME": "rel", "HOME": str(tmp_path / "home")})
    assert home == Store(str(tmp_path / "home" / ".cache" / "bazel-ldfix"))


def test_the_place_says_what_named_it_and_creates_nothing(tmp_path: Path) -> None:
    assert store.place({"XDG_CACHE_HOME": str(tmp_path / "x:y")}) == (
        str(tmp_path / "x:y" / "bazel-ldfix"), "$XDG_CACHE_HOME")
    assert store.place({"XDG_CACHE_HOME": "rel", "HOME": str(tmp_path / "h")}) == (
        str(tmp_path / "h" / ".cache" / "bazel-ldfix"), "$HOME")
    # Without $HOME, the password database's home, where it names an absolute one.
    try:
        passwd_home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        passwd_home = ""
    assert store.place({})[1] == ("the password database" if os.path.isabs(passwd_home)
                                  else "the temporary directory")
    assert store.place({"HOME": "relative"})[1] == "the temporary directory"
    assert list(tmp_path.iterdir()) == []


def test_each_record_is_one_file_of_its_own_directory_named_by_its_key(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.FLAGS, "a command", b"body")
    path = Path(kept.path(Record.FLAGS, "a command"))
    assert path.parent == tmp_path / "store" / "flags"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert kept.path(Record.FLAGS, "another") != str(path)
    assert kept.path(Record.RULES, "a command") != str(path)
    assert path.read_bytes().startswith(b"bazel-ldfix flags 2\nbody\0\0\0end ")
    assert kept.recall(Record.FLAGS, "a command") == b"body"
    assert kept.recall(Record.FLAGS, "another") is None


# -- which directories it trusts -----------------------------------------------------------

def test_a_directory_others_can_write_or_a_symlink_to_one_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert store.at(str(shared)) is None
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(mine)
    assert store.at(str(tmp_path / "link")) is None
    assert store.at(str(mine)) == Store(str(mine))


def test_a_record_directory_others_can_write_is_neither_read_nor_written(
        tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.RULES, "k", b"answer")
    rules = tmp_path / "store" / "rules"
    rules.chmod(0o777)
    assert kept.recall(Record.RULES, "k") is None
    assert not kept.keep(Record.RULES, "k", b"new")
    kept.forget(Record.RULES, "k")
    assert os.path.exists(kept.path(Record.RULES, "k"))
    rules.chmod(0o700)
    assert kept.recall(Record.RULES, "k") == b"answer"


def test_a_record_directory_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "store" / "index").symlink_to(elsewhere)
    assert not kept.keep(Record.INDEX, "k", b"x")
    assert kept.recall(Record.INDEX, "k") is None
    assert list(elsewhere.iterdir()) == []


def test_a_store_made_unsafe_after_it_was_opened_is_no_longer_used(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.FLAGS, "k", b"x")
    (tmp_path / "store").chmod(0o777)
    assert kept.recall(Record.FLAGS, "k") is None
    assert not kept.keep(Record.FLAGS, "k", b"y")
    assert kept.links_dir() is None


@as_root
def test_a_directory_or_file_of_another_user_is_not_believed(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    assert store.at(str(theirs)) is None
    kept = opened(tmp_path)
    assert kept.keep(Record.REPAIR, "k", b"facts")
    planted = kept.path(Record.REPAIR, "k")
    os.chown(planted, NOBODY, NOBODY)
    assert kept.recall(Record.REPAIR, "k") is None
    os.chown(planted, 0, 0)
    assert kept.recall(Record.REPAIR, "k") == b"facts"
    os.chown(os.path.dirname(planted), NOBODY, NOBODY)
    assert kept.recall(Record.REPAIR, "k") is None


# -- which files it trusts -----------------------------------------------------------------

def test_a_planted_symlink_or_fifo_is_read_as_nothing(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.INDEX, "good", b"index")
    good = kept.path(Record.INDEX, "good")
    Path(kept.path(Record.INDEX, "zero")).symlink_to("/dev/zero")
    Path(kept.path(Record.INDEX, "link")).symlink_to(good)
    os.mkfifo(kept.path(Record.INDEX, "fifo"), 0o600)  # O_NONBLOCK: no writer is waited for
    for key in ("zero", "link", "fifo"):
        assert kept.recall(Record.INDEX, key) is None, key
    assert kept.recall(Record.INDEX, "good") == b"index"


def test_a_file_others_can_write_is_not_believed(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.RAN_WITH, "k", b"values")
    path = Path(kept.path(Record.RAN_WITH, "k"))
    path.chmod(0o622)
    assert kept.recall(Record.RAN_WITH, "k") is None
    path.chmod(0o644)
    assert kept.recall(Record.RAN_WITH, "k") == b"values"


def test_a_file_larger_than_its_records_cap_is_not_read(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.FLAGS, "k", b"flag")
    path = Path(kept.path(Record.FLAGS, "k"))
    with path.open("ab") as f:      # sparse: its size is real, its blocks are not
        f.truncate(Record.FLAGS.max_size + 1)
    assert kept.recall(Record.FLAGS, "k") is None


def test_a_file_of_another_version_or_record_is_ignored_and_made_again(
        tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.RULES, "k", b"answer")
    path = Path(kept.path(Record.RULES, "k"))
    data = path.read_bytes()
    older = data.replace(b"bazel-ldfix rules 2\n", b"bazel-ldfix rules 1\n")
    path.write_bytes(resealed(older))
    assert kept.recall(Record.RULES, "k") is None
    # An index where a rules record should be: whole, but not a rules record.
    assert kept.keep(Record.INDEX, "k", b"answer")
    path.write_bytes(Path(kept.path(Record.INDEX, "k")).read_bytes())
    assert kept.recall(Record.RULES, "k") is None
    assert kept.keep(Record.RULES, "k", b"answer")
    assert kept.recall(Record.RULES, "k") == b"answer"


def resealed(data: bytes) -> bytes:
    """``data`` (a whole file) with its trailer made again over what it now holds."""
    import zlib

    body = data[:data.rfind(b"\0\0\0end ")]
    return body + b"\0\0\0end %d %08x\n" % (len(body), zlib.crc32(body))


def test_a_file_cut_short_or_changed_is_never_believed(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    body = b"line one\nline two\n" * 100
    assert kept.keep(Record.REPAIR, "k", body)
    path = Path(kept.path(Record.REPAIR, "k"))
    data = path.read_bytes()
    for cut in (1, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        assert kept.recall(Record.REPAIR, "k") is None, cut
    flipped = bytearray(data)
    flipped[40] ^= 1
    path.write_bytes(bytes(flipped))
    assert kept.recall(Record.REPAIR, "k") is None
    path.write_bytes(data)
    assert kept.recall(Record.REPAIR, "k") == body


# -- how it writes -------------------------------------------------------------------------

def test_a_write_replaces_the_file_whole_and_leaves_no_temporary_name(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.FLAGS, "k", b"old")
    path = kept.path(Record.FLAGS, "k")
    before = os.stat(path).st_ino
    assert kept.keep(Record.FLAGS, "k", iter([b"n", b"ew"]))
    assert kept.recall(Record.FLAGS, "k") == b"new"
    assert os.stat(path).st_ino != before       # renamed over, never written in place
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_body_over_the_cap_is_not_written_and_leaves_nothing(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.FLAGS, "k", b"old")
    cap = Record.FLAGS.max_size
    assert not kept.keep(Record.FLAGS, "k", b"x" * cap)
    assert not kept.keep(Record.FLAGS, "k", iter([b"x" * (cap // 2)] * 3))
    assert kept.recall(Record.FLAGS, "k") == b"old"
    assert os.listdir(tmp_path / "store" / "flags") == [
        os.path.basename(kept.path(Record.FLAGS, "k"))]


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The write succeeds and the rename fails (the target is a non-empty directory): the
    temporary file goes."""
    kept = opened(tmp_path)
    target = Path(kept.path(Record.INDEX, "k"))
    target.parent.mkdir(mode=0o700)
    target.mkdir()
    (target / "keep").write_text("")  # a non-empty directory cannot be replaced by a file
    assert not kept.keep(Record.INDEX, "k", b"data")
    assert os.listdir(target.parent) == [target.name]


def test_a_full_disk_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A real full filesystem: a tiny tmpfs, when this machine lets us mount one."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        kept = store.at(str(mnt / "store"))
        assert kept is not None
        assert not kept.keep(Record.INDEX, "k", b"x" * 1_000_000)
        assert os.listdir(mnt / "store" / "index") == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_only_the_most_recent_repairs_are_kept(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    most = Record.REPAIR.most
    assert most is not None
    for n in range(most):
        assert kept.keep(Record.REPAIR, str(n), b"repair")
        # Written in order, whatever the clock's tick.
        os.utime(kept.path(Record.REPAIR, str(n)), ns=(n * 10**9, n * 10**9))
    assert kept.keep(Record.REPAIR, "newest", b"repair")
    assert kept.recall(Record.REPAIR, "0") is None
    assert kept.recall(Record.REPAIR, "1") == b"repair"
    assert kept.recall(Record.REPAIR, "newest") == b"repair"
    assert len(os.listdir(tmp_path / "store" / "repair")) == most
    for n in range(most + 1):        # the other records keep as many as are written
        assert kept.keep(Record.RULES, str(n), b"answer")
    assert len(os.listdir(tmp_path / "store" / "rules")) == most + 1


def test_a_forgotten_record_is_gone(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    assert kept.keep(Record.REPAIR, "k", b"repair")
    kept.forget(Record.REPAIR, "k")
    kept.forget(Record.REPAIR, "never kept")
    assert kept.recall(Record.REPAIR, "k") is None
    assert not os.path.exists(kept.path(Record.REPAIR, "k"))


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_a_body_kept_in_chunks_is_the_body_kept_whole(
        tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes]) -> None:
    kept = store.at(str(tmp_path_factory.mktemp("store")))
    assert kept is not None
    assert kept.keep(Record.RULES, "whole", b"".join(chunks))
    assert kept.keep(Record.RULES, "chunks", iter(chunks))
    assert Path(kept.path(Record.RULES, "whole")).read_bytes() == \
        Path(kept.path(Record.RULES, "chunks")).read_bytes()
    assert kept.recall(Record.RULES, "chunks") == b"".join(chunks)


# -- the links directories -----------------------------------------------------------------

def test_the_links_directory_is_made_private_and_refused_when_not(tmp_path: Path) -> None:
    kept = opened(tmp_path)
    links = kept.links_dir()
    assert links == str(tmp_path / "store" / "links")
    assert stat.S_IMODE(os.stat(links).st_mode) == 0o700
    os.chmod(links, 0o777)
    assert kept.links_dir() is None
    os.rmdir(links)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    os.symlink(tmp_path / "elsewhere", links)
    assert kept.links_dir() is None

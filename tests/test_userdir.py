"""The per-user directory believes only what this user alone could have written, and only
whole: real directories, files, links and FIFOs on this machine, another user's made with
chown where the tests run as root.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

import pytest

from bazel_ldfix import userdir

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def test_an_absolute_xdg_cache_home_is_used_and_a_relative_one_is_not(tmp_path: Path) -> None:
    xdg = userdir.cache_root({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert xdg == str(tmp_path / "xdg" / "bazel-ldfix")
    assert stat.S_IMODE(os.stat(xdg).st_mode) == 0o700
    home = userdir.cache_root({"XDG_CACHE_HOME": "rel", "HOME": str(tmp_path / "home")})
    assert home == str(tmp_path / "home" / ".cache" / "bazel-ldfix")


def test_the_cache_path_says_what_named_it_and_creates_nothing(tmp_path: Path) -> None:
    assert userdir.cache_path({"XDG_CACHE_HOME": str(tmp_path / "x:y")}) == (
        str(tmp_path / "x:y" / "bazel-ldfix"), "$XDG_CACHE_HOME")
    assert userdir.cache_path({"XDG_CACHE_HOME": "rel", "HOME": str(tmp_path / "h")}) == (
        str(tmp_path / "h" / ".cache" / "bazel-ldfix"), "$HOME")
    # Without $HOME, the password database's home, where it names an absolute one.
    try:
        passwd_home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        passwd_home = ""
    assert userdir.cache_path({})[1] == ("the password database" if os.path.isabs(passwd_home)
                                         else "the temporary directory")
    assert userdir.cache_path({"HOME": "relative"})[1] == "the temporary directory"
    assert list(tmp_path.iterdir()) == []


def test_a_directory_others_can_write_or_a_symlink_to_one_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert userdir.private_dir(str(shared)) is None
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(mine)
    assert userdir.private_dir(str(tmp_path / "link")) is None
    assert userdir.private_dir(str(mine)) == str(mine)


@as_root
def test_a_directory_or_file_of_another_user_is_not_believed(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, NOBODY, NOBODY)
    assert userdir.private_dir(str(theirs)) is None
    planted = tmp_path / "planted"
    planted.write_bytes(userdir.seal(b"facts"))
    planted.chmod(0o600)
    os.chown(planted, NOBODY, NOBODY)
    assert userdir.read_private(str(planted), 1 << 10) is None


def test_a_planted_link_fifo_or_oversized_file_is_read_as_nothing(tmp_path: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo", 0o600)       # opened O_NONBLOCK: no writer is waited for
    (tmp_path / "big").write_bytes(b"x" * 2048)
    (tmp_path / "big").chmod(0o600)
    for name in ("zero", "fifo", "big"):
        assert userdir.read_private(str(tmp_path / name), 1024) is None, name
    assert userdir.read_private(str(tmp_path / "big"), 2048) == b"x" * 2048


def test_a_file_others_can_write_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"data")
    path.chmod(0o622)
    assert userdir.read_private(str(path), 100) is None
    path.chmod(0o644)
    assert userdir.read_private(str(path), 100) == b"data"


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary_name(tmp_path: Path) -> None:
    directory = userdir.private_dir(str(tmp_path / "cache"))
    assert directory is not None
    path = os.path.join(directory, "record")
    assert userdir.write_private(path, b"old")
    before = os.stat(path).st_ino
    assert userdir.write_private(path, iter([b"n", b"ew"]))
    assert Path(path).read_bytes() == b"new"
    assert os.stat(path).st_ino != before       # renamed over, never written in place
    assert sorted(os.listdir(directory)) == ["record"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_sealed_body_is_believed_whole_and_never_cut_short() -> None:
    body = b"line one\nline two\n" * 100
    data = userdir.seal(body)
    assert b"".join(userdir.sealed(iter([body[:7], body[7:]]))) == data
    assert userdir.unseal(data) == body
    for cut in (1, 10, len(data) // 2, len(data) - 1):
        assert userdir.unseal(data[:cut]) is None, cut
    flipped = bytearray(data)
    flipped[3] ^= 1
    assert userdir.unseal(bytes(flipped)) is None

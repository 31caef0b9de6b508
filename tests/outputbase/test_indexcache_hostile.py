"""Caches that cannot be planted: the index of output_base/external and the remembered flags.

Each test plants what another user (uid 65534), a crafted record or a damaged file would
leave, and shows it ignored: the walk is done again, no flag of the planter's reaches
Bazel, and nothing hangs or reads without end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from elfbuild import lib

from bazel_ldfix import store
from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.given import Given
from bazel_ldfix.outputbase import index
from bazel_ldfix.repair import keptrepair
from bazel_ldfix.store import Record

pytestmark = pytest.mark.security

OTHER = 65534
NAME = "libx.so.1"


def age(top: Path) -> None:
    """Every timestamp an hour into the past, so that an index may be written."""
    when = time.time() - 3600
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            os.utime(os.path.join(dirpath, name), (when, when), follow_symlinks=False)
    os.utime(top, (when, when))


@pytest.fixture
def ext(tmp_path: Path) -> Path:
    root = tmp_path / "ob" / "external"
    lib(root / "good" / "lib" / NAME)
    (root / "@good.marker").write_text("1\n")
    age(root)
    return root


def lookup(ext: Path, cache: Path) -> tuple[dict[str, list[str]], bool]:
    walks: list[int] = []
    found = index.candidates([NAME], [str(ext)], store=store.at(str(cache)),
                             progress=lambda n, repo: walks.append(n))
    return found, bool(walks)


def index_file(cache: Path, ext: Path) -> Path:
    kept = store.at(str(cache))
    assert kept is not None
    return Path(kept.path(Record.INDEX, str(ext)))


def cached(ext: Path, cache: Path) -> Path:
    """The cache file, after a walk that wrote it and a lookup that used it."""
    assert lookup(ext, cache)[1]
    assert not lookup(ext, cache)[1]
    return index_file(cache, ext)


def with_trailer(body: bytes) -> bytes:
    return body + b"\0\0\0end %d %08x\n" % (len(body), zlib.crc32(body))


def planted_record(path: Path, directory: bytes) -> None:
    """Rewrite the index so that NAME is in ``directory``, with a valid trailer."""
    body = path.read_bytes()
    body = body[:body.rindex(b"\0\0\0end ")]
    at = body.index(b"\0\0" + NAME.encode() + b"\0")
    path.write_bytes(with_trailer(body[:at] + b"\0\0" + NAME.encode() + b"\0" + directory))
    path.chmod(0o600)


def test_a_good_index_is_used(ext: Path, tmp_path: Path) -> None:
    cached(ext, tmp_path / "cache")
    found, walked = lookup(ext, tmp_path / "cache")
    assert not walked and found == {NAME: [str(ext / "good" / "lib" / NAME)]}


@pytest.mark.parametrize("record", [b"/attacker/lib", b"../../attacker", b"good/../../x",
                                    b"good//lib"])
def test_a_record_leaving_the_root_discards_the_index(ext: Path, tmp_path: Path,
                                                      record: bytes) -> None:
    path = cached(ext, tmp_path / "cache")
    planted_record(path, record)
    found, walked = lookup(ext, tmp_path / "cache")
    assert walked and found == {NAME: [str(ext / "good" / "lib" / NAME)]}


def test_an_index_written_by_another_user_is_ignored(ext: Path, tmp_path: Path) -> None:
    path = cached(ext, tmp_path / "cache")
    planted_record(path, b"evil")  # a directory under the root, but not the right one
    os.chown(path, OTHER, OTHER)
    found, walked = lookup(ext, tmp_path / "cache")
    assert walked and found == {NAME: [str(ext / "good" / "lib" / NAME)]}


def test_a_group_writable_index_is_ignored(ext: Path, tmp_path: Path) -> None:
    path = cached(ext, tmp_path / "cache")
    planted_record(path, b"evil")
    path.chmod(0o620)
    assert lookup(ext, tmp_path / "cache")[1]


def test_a_cache_directory_of_another_user_is_neither_read_nor_written(
        ext: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = cached(ext, cache)
    opened = store.at(str(cache))     # trusted then, not once another user owns it
    os.chown(cache, OTHER, OTHER)
    assert lookup(ext, cache)[1]
    path.unlink()
    assert lookup(ext, cache)[1]
    walks: list[int] = []
    index.candidates([NAME], [str(ext)], store=opened, progress=lambda n, r: walks.append(n))
    assert walks and not path.exists()


def test_an_index_cut_at_a_record_boundary_is_walked_again(ext: Path, tmp_path: Path) -> None:
    lib(ext / "more" / "liby.so.2")
    age(ext)
    cache = tmp_path / "cache"
    assert lookup(ext, cache)[1]
    path = index_file(cache, ext)
    data = path.read_bytes()
    cut = data.index(b"\0\0liby.so.2")
    path.write_bytes(data[:cut])  # the record of liby.so.2 and the trailer are gone
    walks: list[int] = []
    found = index.candidates(["liby.so.2"], [str(ext)], store=store.at(str(cache)),
                             progress=lambda n, repo: walks.append(n))
    assert walks and found == {"liby.so.2": [str(ext / "more" / "liby.so.2")]}


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_a_symlink_to_dev_zero_as_the_index_is_ignored_at_once(
        ext: Path, tmp_path: Path, kind: str) -> None:
    cache = tmp_path / "cache"
    path = cached(ext, cache)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.symlink_to("/dev/zero")
    start = time.monotonic()
    found, walked = lookup(ext, cache)
    assert walked and found == {NAME: [str(ext / "good" / "lib" / NAME)]}
    assert time.monotonic() - start < 10


def test_locate_is_not_steered_by_a_planted_index(ext: Path, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    evil = ext.parent.parent / "attacker"
    lib(evil / NAME)
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    cmd = [sys.executable, "-m", "bazel_ldfix", "locate", "--output-base", str(ext.parent),
           NAME]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert "attacker" not in first.stdout
    path = index_file(xdg / "bazel-ldfix", ext)
    planted_record(path, str(evil).encode())
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert "attacker" not in again.stdout and "good/lib" in again.stdout


# -- the per-user directory ----------------------------------------------------------------

def test_the_directory_policy(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    assert store.of_env({"XDG_CACHE_HOME": str(xdg)}) == store.Store(str(xdg / "bazel-ldfix"))
    assert (xdg / "bazel-ldfix").stat().st_mode & 0o777 == 0o700
    home = tmp_path / "home"
    assert store.of_env({"HOME": str(home)}) == store.Store(str(home / ".cache" / "bazel-ldfix"))


def test_a_directory_someone_else_made_first_is_not_used(tmp_path: Path) -> None:
    theirs = tmp_path / "xdg" / "bazel-ldfix"
    theirs.mkdir(parents=True)
    os.chown(theirs, OTHER, OTHER)
    assert store.of_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) is None
    open_to_all = tmp_path / "open"
    open_to_all.mkdir(mode=0o777)
    open_to_all.chmod(0o777)
    assert store.at(str(open_to_all)) is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "xdg")
    assert store.at(str(link)) is None


# -- the remembered flags ----------------------------------------------------------------------

def memo_of(tmp_path: Path) -> tuple[store.Store, str]:
    runner = Bazel("bazel", str(tmp_path), {}, ())
    kept = store.of_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert kept is not None and kept.root == str(tmp_path / "xdg" / "bazel-ldfix")
    return kept, keptrepair.command_key(runner, ["//..."])


def test_remembered_flags_round_trip(tmp_path: Path) -> None:
    kept, command = memo_of(tmp_path)
    keptrepair.write_flags(kept, command, Given((), ("/a", "/b")))
    assert kept.recall(Record.FLAGS, command) == b"--test_env=LD_LIBRARY_PATH=/a:/b\n"
    assert keptrepair.read_flags(kept, command) == Given((), ("/a", "/b"))


def test_only_the_tools_own_line_is_taken_from_remembered_flags(tmp_path: Path) -> None:
    kept, command = memo_of(tmp_path)
    assert kept.keep(Record.FLAGS, command,
                     b"--workspace_status_command=/tmp/evil.sh\n--run_under=/tmp/evil\n"
                     b"--test_env=LD_LIBRARY_PATH=/a\n")
    assert keptrepair.read_flags(kept, command) == Given((), ("/a",))


def test_remembered_flags_of_another_user_are_ignored(tmp_path: Path) -> None:
    kept, command = memo_of(tmp_path)
    keptrepair.write_flags(kept, command, Given((), ("/a",)))
    path = Path(kept.path(Record.FLAGS, command))
    os.chown(path, OTHER, OTHER)
    assert keptrepair.read_flags(kept, command) is None
    os.chown(path, 0, 0)
    path.unlink()
    path.symlink_to("/dev/zero")
    assert keptrepair.read_flags(kept, command) is None

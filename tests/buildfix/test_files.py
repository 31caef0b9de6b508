"""`fix --write` loses nothing: real files, written as root and as another user.

Each rule: a file is read whole (a size it refuses is refused, never cut); one file reached
through two names is edited once with both edits; owner, group, mode, hard links and line
endings are kept; a change made since the read, or just before the rename, is refused and
the other person's text kept; a restore gives back every byte. "Another user" is a forked
child that drops root (setgid/setuid) before it plans and writes.
"""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bazel_ldfix.buildfix import files
from bazel_ldfix.buildfix.change import Change, Kind
from bazel_ldfix.buildfix.edit import edit_plan, write
from bazel_ldfix.errors import CannotEditError

USER, GROUP, SHARED = 4242, 4242, 4343    # an unprivileged user, its group, a shared group
IMPORT = 'cc_import(\n    name = "x",\n    shared_library = "lib/libx.so",\n)\n'
TEST = 'cc_test(\n    name = "t",\n    deps = [\n        ":x",\n    ],\n)\n'
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (to be another user)")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory another user can reach (pytest's own are root's alone)."""
    top = Path(tempfile.mkdtemp(prefix="bazel-ldfix-users-"))
    os.chmod(top, 0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top)


def set_x() -> Change:
    return Change("//p:x", Kind.SET, "shared_library", "lib/libx.so.1", "test", "lib/libx.so")


def workspace(top: Path, build: str) -> Path:
    top.mkdir(exist_ok=True)
    (top / "WORKSPACE").write_text('workspace(name = "w")\n')
    (top / "p").mkdir(exist_ok=True)
    (top / "p" / "BUILD").write_text(build)
    return top


def plan_and_write(ws: Path, *changes: Change) -> list[files.Written]:
    plan = edit_plan(list(changes), str(ws), None, [], [])
    assert not plan.problems, plan.problems
    return write(plan.files, None)


def as_user(uid: int, gid: int, fn: Callable[[], Any], groups: tuple[int, ...] = ()) -> Any:
    """``fn()`` in a forked child that is user ``uid`` (group ``gid``, plus ``groups``):
    its value, or its exception raised here again."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:        # the child: drop root for good, run, send back what came of it
        os.close(read_end)
        try:
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            result: tuple[str, Any] = ("value", fn())
        except BaseException as exc:
            result = ("error", (type(exc).__name__, str(exc), traceback.format_exc()))
        with os.fdopen(write_end, "wb") as fh:
            pickle.dump(result, fh)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        kind, value = pickle.load(fh)
    os.waitpid(pid, 0)
    if kind == "error":
        name, message, trace = value
        if name == "CannotEditError":
            raise CannotEditError(message)
        raise AssertionError(f"{name} in the child: {message}\n{trace}")
    return value


def test_a_file_larger_than_16_mib_is_read_and_written_whole(tmp_path: Path) -> None:
    padding = "# " + "x" * 1021 + "\n"                          # 1 KiB lines
    build = padding * (17 * 1024) + IMPORT + 'cc_test(name = "after")\n'
    ws = workspace(tmp_path, build)
    plan_and_write(ws, set_x())
    text = (ws / "p" / "BUILD").read_text()
    assert text == build.replace('"lib/libx.so"', '"lib/libx.so.1"')
    assert text.endswith('cc_test(name = "after")\n')


def test_a_file_larger_than_the_limit_is_refused_not_cut(tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT)
    build = ws / "p" / "BUILD"
    os.truncate(build, files.MAX_SOURCE + 1)    # sparse: a real file of that size
    before = build.read_bytes()
    plan = edit_plan([set_x()], str(ws), None, [], [])
    assert not plan.files
    assert plan.problems == (f"{build} is {files.MAX_SOURCE + 1} bytes, more than the "
                             f"{files.MAX_SOURCE} bytes `fix` reads; change it by hand; "
                             "nothing changed",)
    assert build.read_bytes() == before


def test_one_file_reached_through_two_names_is_edited_once_with_both_edits(
        tmp_path: Path) -> None:
    shared = ('cc_import(name = "x", shared_library = "lib/libx.so")\n'
              'cc_import(name = "y", shared_library = "lib/liby.so")\n')
    (tmp_path / "third_party").mkdir()
    (tmp_path / "third_party" / "shared.BUILD").write_text(shared)
    (tmp_path / "third_party" / "alias.BUILD").symlink_to("shared.BUILD")
    (tmp_path / "third_party" / "BUILD").write_text("")
    (tmp_path / "WORKSPACE").write_text(
        'new_local_repository(name = "xsdk", path = "/x", '
        'build_file = "//third_party:shared.BUILD")\n'
        'new_local_repository(name = "ysdk", path = "/y", '
        'build_file = "//third_party:alias.BUILD")\n')
    changes = [Change("@xsdk//:x", Kind.SET, "shared_library", "lib/libx.so.1", "a"),
               Change("@ysdk//:y", Kind.SET, "shared_library", "lib/liby.so.2", "b")]
    plan = edit_plan(changes, str(tmp_path), None, [], [])
    [f] = plan.files
    assert [c.label for c in f.changes] == ["@xsdk//:x", "@ysdk//:y"]
    assert f.names and f.names[0].endswith("alias.BUILD")
    [written] = write(plan.files, None)
    assert (tmp_path / "third_party" / "shared.BUILD").read_text() == shared.replace(
        "libx.so", "libx.so.1").replace("liby.so", "liby.so.2")
    assert (tmp_path / "third_party" / "alias.BUILD").is_symlink()
    assert written.how is files.How.REPLACED


@root_only
def test_root_keeps_the_owner_group_and_mode_of_the_file(tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT)
    build = ws / "p" / "BUILD"
    os.chown(build, USER, GROUP)
    os.chmod(build, 0o640)
    [written] = plan_and_write(ws, set_x())
    st = os.stat(build)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (USER, GROUP, 0o640)
    assert written.how is files.How.REPLACED
    assert "lib/libx.so.1" in build.read_text()


def test_a_hard_linked_file_is_rewritten_in_place_and_every_name_sees_it(
        tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT)
    build = ws / "p" / "BUILD"
    other = tmp_path / "BUILD.copy"
    os.link(build, other)
    inode = os.stat(build).st_ino
    [written] = plan_and_write(ws, set_x())
    assert written.how is files.How.IN_PLACE
    assert os.stat(build).st_ino == inode and os.stat(build).st_nlink == 2
    assert other.read_text() == build.read_text() == IMPORT.replace("libx.so", "libx.so.1")
    assert not list((ws / "p").glob(".bazel-ldfix-*"))        # the backup is gone


def test_a_line_added_to_a_crlf_file_ends_in_crlf(tmp_path: Path) -> None:
    crlf = (IMPORT + TEST).replace("\n", "\r\n")
    ws = workspace(tmp_path, "")
    (ws / "p" / "BUILD").write_bytes(crlf.encode())
    plan_and_write(ws, set_x(), Change("//p:t", Kind.ADD, "deps", "@y//:y", ""),
                   Change("//p:x", Kind.SET, "interface_library", "lib/libx.so", ""))
    data = (ws / "p" / "BUILD").read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") == crlf.count("\n") + 2
    assert b'        "@y//:y",\r\n    ],\r\n' in data
    assert b'    interface_library = "lib/libx.so",\r\n' in data


def test_a_save_made_after_the_read_is_kept_and_nothing_is_written(tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT)
    plan = edit_plan([set_x()], str(ws), None, [], [])
    saved = IMPORT + "# saved by someone while fix ran\n"
    (ws / "p" / "BUILD").write_text(saved)
    with pytest.raises(CannotEditError, match="changed since it was read; nothing written"):
        write(plan.files, None)
    assert (ws / "p" / "BUILD").read_text() == saved


def test_a_save_made_just_before_the_rename_is_kept(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace(tmp_path, IMPORT)
    build = ws / "p" / "BUILD"
    plan = edit_plan([set_x()], str(ws), None, [], [])
    saved = IMPORT + "# saved while the new text was being written\n"
    real_fsync = os.fsync

    def fsync_then_someone_saves(fd: int) -> None:
        real_fsync(fd)
        if build.read_text() == IMPORT:     # the temporary file is written, not renamed
            build.write_text(saved)

    monkeypatch.setattr(files.os, "fsync", fsync_then_someone_saves)
    with pytest.raises(CannotEditError, match="changed since it was read"):
        write(plan.files, None)
    assert build.read_text() == saved
    assert not list((ws / "p").glob(".bazel-ldfix-*"))


def test_a_file_replaced_by_another_since_the_read_is_refused(tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT)
    plan = edit_plan([set_x()], str(ws), None, [], [])
    (ws / "p" / "BUILD.new").write_text(IMPORT)         # the same text, another file
    os.replace(ws / "p" / "BUILD.new", ws / "p" / "BUILD")
    with pytest.raises(CannotEditError, match="changed since it was read"):
        write(plan.files, None)


def test_restore_gives_back_every_byte_and_the_times(tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT + "# ü \xff\n")
    build = ws / "p" / "BUILD"
    os.utime(build, ns=(1_000_000_000, 2_000_000_000))
    before = build.read_bytes()
    written = plan_and_write(ws, set_x())
    assert build.read_bytes() != before
    assert files.restore(written) == []
    assert build.read_bytes() == before
    assert os.stat(build).st_mtime_ns == 2_000_000_000


def test_restore_leaves_a_file_changed_again_since_it_was_written(tmp_path: Path) -> None:
    ws = workspace(tmp_path, IMPORT)
    written = plan_and_write(ws, set_x())
    (ws / "p" / "BUILD").write_text("# edited by hand since\n")
    [problem] = files.restore(written)
    assert "was not restored" in problem and "changed since" in problem
    assert (ws / "p" / "BUILD").read_text() == "# edited by hand since\n"


@root_only
def test_another_user_edits_their_own_file_and_keeps_it_theirs(shared_tmp: Path) -> None:
    top = shared_tmp / "home"
    ws = workspace(top, IMPORT)
    for path in (top, top / "p", top / "WORKSPACE", top / "p" / "BUILD"):
        os.chown(path, USER, GROUP)
    [how] = as_user(USER, GROUP, lambda: [w.how for w in plan_and_write(ws, set_x())])
    st = os.stat(ws / "p" / "BUILD")
    assert (how, st.st_uid, st.st_gid) == (files.How.REPLACED, USER, GROUP)
    assert "lib/libx.so.1" in (ws / "p" / "BUILD").read_text()


@root_only
def test_another_user_edits_a_group_file_in_place_and_root_keeps_it(shared_tmp: Path) -> None:
    # A BUILD file owned by root and writable by a group the user is in, in a directory
    # the group may write: a new file would be the user's; the file is rewritten instead.
    ws = workspace(shared_tmp / "shared", IMPORT)
    for path in (ws, ws / "p"):
        os.chown(path, 0, SHARED)
        os.chmod(path, 0o775)
    os.chown(ws / "p" / "BUILD", 0, SHARED)
    os.chmod(ws / "p" / "BUILD", 0o664)
    [how] = as_user(USER, GROUP, lambda: [w.how for w in plan_and_write(ws, set_x())],
                    groups=(SHARED,))
    st = os.stat(ws / "p" / "BUILD")
    assert (how, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (
        files.How.IN_PLACE, 0, SHARED, 0o664)
    assert "lib/libx.so.1" in (ws / "p" / "BUILD").read_text()


@root_only
def test_another_user_cannot_write_a_file_of_roots_and_nothing_changes(
        shared_tmp: Path) -> None:
    ws = workspace(shared_tmp / "rootws", IMPORT)
    before = (ws / "p" / "BUILD").read_text()

    def attempt() -> tuple[str, ...]:
        return edit_plan([set_x()], str(ws), None, [], []).problems

    [problem] = as_user(USER, GROUP, attempt)
    assert problem == f"{ws / 'p' / 'BUILD'} is read-only (the file or its directory); " \
                      "nothing changed"
    assert (ws / "p" / "BUILD").read_text() == before


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "")
    (ws / "p" / "BUILD").unlink()
    os.mkfifo(ws / "p" / "BUILD")
    with pytest.raises(CannotEditError, match="is not a regular file"):
        files.read(str(ws / "p" / "BUILD"))

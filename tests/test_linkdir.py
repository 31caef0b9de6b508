"""Links directories: exactly the links asked for, in a directory only this user can
write, made anew when anything else stands there, removed after a month unused."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from bazel_ldfix import linkdir
from bazel_ldfix.errors import LinkDirError


def test_a_links_directory_holds_exactly_its_links(tmp_path: Path) -> None:
    links = {"libfoo.so.3": "/x/libfoo.so.3", "lib\nodd:name;.so.1": "/y/odd"}
    path, made = linkdir.make(str(tmp_path), links)
    assert made and os.path.basename(path) == linkdir.digest(links)
    assert {n: os.readlink(os.path.join(path, n)) for n in os.listdir(path)} == links
    assert linkdir.make(str(tmp_path), links) == (path, False)


@pytest.mark.parametrize("tamper", ["extra", "retarget", "group_writable", "file"])
def test_a_links_directory_not_exactly_as_made_is_made_anew(tmp_path: Path,
                                                            tamper: str) -> None:
    links = {"libfoo.so.3": "/x/libfoo.so.3"}
    path, _ = linkdir.make(str(tmp_path), links)
    if tamper == "extra":
        os.symlink("/evil/libz.so.1", os.path.join(path, "libz.so.1"))
    elif tamper == "retarget":
        os.unlink(os.path.join(path, "libfoo.so.3"))
        os.symlink("/evil/libfoo.so.3", os.path.join(path, "libfoo.so.3"))
    elif tamper == "group_writable":
        os.chmod(path, 0o770)
    else:
        os.unlink(os.path.join(path, "libfoo.so.3"))
        os.rmdir(path)
        Path(path).write_text("")
    again, made = linkdir.make(str(tmp_path), links)
    assert (again, made) == (path, True)
    assert linkdir.holds(path, links)
    assert stat.S_IMODE(os.lstat(path).st_mode) & 0o022 == 0


def test_a_name_that_is_no_file_name_is_refused(tmp_path: Path) -> None:
    for name in ("", ".", "..", "a/b"):
        with pytest.raises(LinkDirError):
            linkdir.make(str(tmp_path), {name: "/x"})


def test_links_directories_unused_for_a_month_are_removed(tmp_path: Path) -> None:
    old, _ = linkdir.make(str(tmp_path), {"liba.so.1": "/a"})
    kept, _ = linkdir.make(str(tmp_path), {"libb.so.1": "/b"})
    past = time.time() - linkdir.MAX_AGE - 60
    os.utime(old, (past, past))
    linkdir.make(str(tmp_path), {"libc.so.1": "/c"})
    assert not os.path.exists(old) and os.path.isdir(kept)

"""The mount table as the walk reads it, checked against util-linux's ``findmnt``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from bazel_ldfix.fs.mounts import STAT_EVERY_DIRECTORY, Mounts

UNIFORM = {"ext2", "ext3", "ext4", "xfs", "tmpfs", "ramfs", "f2fs", "jfs"}


def test_mountinfo_is_read_as_proc_5_writes_it() -> None:
    text = textwrap.dedent("""\
        27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
        63 27 0:39 / /tmp/my\\040mount rw,relatime shared:5 - tmpfs t rw
        64 27 0:40 /sub /srv/data rw master:1 - btrfs /dev/vdb rw,subvol=/sub
        65 27 0:41 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=/a
        garbage
        """)
    mounts = Mounts.parse(text)
    assert mounts.uniform == {os.makedev(254, 0), os.makedev(0, 39)}
    assert mounts.names == {"/", "my mount", "data", "merged"}



def _findmnt() -> list[tuple[str, str, int]]:
    """(mount point, filesystem type, device) of every mount, as libmount reads them."""
    out = subprocess.run(["findmnt", "-rn", "-o", "TARGET,FSTYPE,MAJ:MIN"], check=True,
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        target, fstype, majmin = line.split(" ")
        target = re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), target)
        major, minor = (int(x) for x in majmin.split(":"))
        rows.append((target, fstype, os.makedev(major, minor)))
    return rows


@pytest.mark.skipif(shutil.which("findmnt") is None, reason="no findmnt")
def test_this_machines_table_agrees_with_findmnt() -> None:
    mounts = Mounts.read()
    rows = _findmnt()
    assert rows
    assert {os.path.basename(target) or "/" for target, _, _ in rows} <= mounts.names
    for _, fstype, device in rows:
        uniform = [f for _, f, d in rows if d == device]
        if all(f in UNIFORM for f in uniform):
            assert device in mounts.uniform, (fstype, device)
        elif not any(f in UNIFORM for f in uniform):
            assert device not in mounts.uniform, (fstype, device)


def test_without_a_mount_table_no_device_is_uniform(tmp_path: Path) -> None:
    assert Mounts.read(str(tmp_path / "no-mountinfo")) == STAT_EVERY_DIRECTORY
    assert STAT_EVERY_DIRECTORY.uniform == frozenset() == STAT_EVERY_DIRECTORY.names

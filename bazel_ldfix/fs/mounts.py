"""The mount table, as far as a walk of a directory tree needs it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# Filesystems on which readdir's d_ino is the directory's st_ino and every directory below a
# mount has the mount's st_dev, so a directory's identity needs no stat of its own. Not on
# the list: btrfs and bcachefs (a subvolume has a device of its own and is no mount),
# overlayfs (d_ino differs from st_ino unless all layers share a filesystem or xino is on;
# kernel Documentation/filesystems/overlayfs.rst, "Inode properties"), network and FUSE
# filesystems (whatever the server says), and anything unknown.
_UNIFORM_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "tmpfs", "ramfs", "f2fs",
                                  "jfs"})
_MOUNTINFO_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mounts:
    """What the walk needs to know of the mount table.

    ``uniform``: devices (``st_dev``) whose filesystem is in :data:`_UNIFORM_FILESYSTEMS`.
    ``names``: the last component of every mount point. A directory entry with one of
    these names may be a mount point, whose d_ino is that of the directory it covers and
    whose device is another one, so it is stat'ed; so is every directory on a device that
    is not uniform. Mounts made during a walk are not seen.
    """

    uniform: frozenset[int]
    names: frozenset[str]

    @classmethod
    def parse(cls, text: str) -> Mounts:
        """Read ``/proc/self/mountinfo`` (proc(5)): ``ID PARENT MAJ:MIN ROOT POINT ... - TYPE``."""
        uniform: set[int] = set()
        names: set[str] = set()
        for line in text.splitlines():
            fields = line.split(" ")
            try:
                sep = fields.index("-", 6)
                major, minor = (int(x) for x in fields[2].split(":"))
                fstype = fields[sep + 1]
            except (ValueError, IndexError):
                continue
            point = _MOUNTINFO_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
            names.add(os.path.basename(point.rstrip("/")) or "/")
            if fstype in _UNIFORM_FILESYSTEMS:
                uniform.add(os.makedev(major, minor))
        return cls(frozenset(uniform), frozenset(names))

    @classmethod
    def read(cls, path: str = "/proc/self/mountinfo") -> Mounts:
        """The current mount table; without one, every directory is stat'ed."""
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                return cls.parse(f.read())
        except OSError:
            return cls(frozenset(), frozenset())


#: A mount table under which every directory is stat'ed (as a walk without /proc does).
STAT_EVERY_DIRECTORY = Mounts(frozenset(), frozenset())

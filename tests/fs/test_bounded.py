"""A bounded read stops one byte past its bound, whatever the file says of its size."""

from __future__ import annotations

import os
from pathlib import Path

from bazel_ldfix.fs.bounded import read_at_most


def test_a_file_within_the_bound_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_at_most(fd, 10) == b"x" * 10
    finally:
        os.close(fd)


def test_a_stream_longer_than_the_bound_gives_one_byte_more() -> None:
    # A pipe has no size to trust: the read itself stops.
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"y" * 5000)
        os.close(write_end)
        assert read_at_most(read_end, 100) == b"y" * 101
    finally:
        os.close(read_end)

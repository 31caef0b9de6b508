"""Reading an open file, never more than a bound, whatever its size says."""

from __future__ import annotations

import os

_CHUNK = 1 << 20


def read_at_most(fd: int, limit: int) -> bytes:
    """What ``fd`` holds from its offset, up to ``limit + 1`` bytes: a result longer than
    ``limit`` says the file is longer (or grew while it was read)."""
    chunks = []
    left = limit + 1
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)

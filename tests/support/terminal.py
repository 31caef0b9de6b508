"""Running the command as a person at a terminal sees it: its output on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def on_terminal(args: list[str], *, cwd: Path | None = None, env: Mapping[str, str],
                stderr: bool = True) -> tuple[int, str]:
    """(exit code, what ``python -m bazel_ldfix ARGS`` prints on a pty): stdout, and stderr
    too unless ``stderr`` is False (then it is dropped)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd,
                            env=dict(env), stdout=follower,
                            stderr=follower if stderr else subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the follower
            break
        if not data:
            break
        chunks.append(data)
    code = proc.wait()
    os.close(leader)
    return code, b"".join(chunks).decode(errors="replace")

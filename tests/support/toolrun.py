"""The tool run as a user runs it, and the program both ``resolve`` and ``check`` start with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from elfbuild import lib, program


def run(*args: str, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m bazel_ldfix ARGS``, without the caller's LD_LIBRARY_PATH and NO_COLOR."""
    base = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], capture_output=True,
                          text=True, env={**base, **(env or {})}, cwd=cwd)


def missing_app(tmp_path: Path) -> Path:
    """app needs libx.so.1 (in x/, not on any search path) which needs liby.so.2 (in y/)."""
    y = lib(tmp_path / "y" / "liby.so.2")
    x = lib(tmp_path / "x" / "libx.so.1", needs=[y], runpath="$ORIGIN/../y")
    return program(tmp_path / "bin" / "app", needs=[x])

"""Where the user's workspace is, and its output_base."""

from __future__ import annotations

import os

from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.errors import BazelError

WORKSPACE_FILES = ("MODULE.bazel", "REPO.bazel", "WORKSPACE.bazel", "WORKSPACE")


def workspace_of(directory: str) -> str | None:
    """The Bazel workspace ``directory`` is in: the nearest ancestor with a boundary file."""
    current = os.path.abspath(directory)
    while True:
        if any(os.path.isfile(os.path.join(current, f)) for f in WORKSPACE_FILES):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def output_base(bazel: Bazel) -> str:
    """``bazel info output_base`` (depends on startup options only).

    Its last line: a wrapper script may print a line of its own first."""
    out = bazel.capture("info", ["output_base"])
    value = next((line.strip() for line in reversed(out.splitlines()) if line.strip()), "")
    if not value:
        raise BazelError("`bazel info output_base` printed nothing",
                         bazel.argv("info", ["output_base"]))
    return value

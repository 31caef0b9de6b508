"""Where libraries are under output_base/external: one walk, and its cache.

Whether an output_base can be read is decided here, once, for every command."""

from __future__ import annotations

import os

from bazel_ldfix.errors import BadInputError


def checked(path: str) -> str:
    """``path``, when it is a directory to read an output_base from; else BadInputError,
    with the one message every command gives."""
    if not os.path.isdir(path):
        raise BadInputError(f"output_base {path} does not exist")
    return path

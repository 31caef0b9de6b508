"""The one BUILD parser reads calls and string attributes, and never more than its bound."""

from __future__ import annotations

import os
from pathlib import Path

from bazel_ldfix.bazel import buildfile


def test_top_level_calls_and_their_string_attributes(tmp_path: Path) -> None:
    build = tmp_path / "BUILD"
    build.write_text('load("@rules_cc//cc:defs.bzl", "cc_import")\n'
                     'native.cc_import(name = "a", shared_library = r"lib/liba.so")\n'
                     "cc_import(name = 'b', shared_library = select({}))\n")
    calls = buildfile.read_calls(str(build))
    assert calls is not None
    assert [buildfile.function_name(c) for c in calls] == ["load", "cc_import", "cc_import"]
    assert buildfile.string_attr(calls[1], "shared_library") == "lib/liba.so"
    assert buildfile.string_attr(calls[2], "name") == "b"
    assert buildfile.string_attr(calls[2], "shared_library") is None   # not a literal


def test_what_cannot_be_read_whole_or_parsed_gives_no_calls(tmp_path: Path) -> None:
    large = tmp_path / "large"
    large.write_bytes(b"#" * (buildfile.MAX_BUILD + 1))
    broken = tmp_path / "broken"
    broken.write_text("cc_import(name = \n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)          # never waited on: no writer ever comes
    for path in (large, broken, fifo, tmp_path / "absent", tmp_path):
        assert buildfile.read_calls(str(path)) is None

"""What every rendering shares: the JSON encoder and envelope, wrapped prose, escaped names
with colours kept, and the output_base written once."""

from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from bazel_ldfix.render.common import (
    LINE_WIDTH,
    OUTPUT_BASE,
    RED,
    RESET,
    abbreviate,
    dumps,
    error_json,
    json_text,
    text_of,
    to_jsonable,
    wrap,
)


class Colour(str, enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    where: Path
    colour: Colour


@dataclass(frozen=True)
class Outer:
    name: str
    items: tuple[Inner, ...]
    by_name: dict[int, Inner]
    hidden: str = field(default="x", repr=False)   # not for people, not for JSON


def test_to_jsonable_encodes_dataclasses_enums_paths_and_tuples() -> None:
    value = Outer("a", (Inner(Path("/p"), Colour.RED),), {1: Inner(Path("q"), Colour.RED)})
    assert to_jsonable(value) == {
        "name": "a", "items": [{"where": "/p", "colour": "red"}],
        "by_name": {"1": {"where": "q", "colour": "red"}}}
    assert json.loads(json.dumps(to_jsonable(value))) == to_jsonable(value)


def test_every_document_carries_version_1() -> None:
    assert json.loads(dumps({"file": "/x"})) == {"version": 1, "file": "/x"}
    assert json.loads(error_json("no such file", 2)) == {
        "version": 1, "error": {"message": "no such file", "exit_code": 2}}


def test_a_name_that_is_not_utf8_survives_json_losslessly() -> None:
    name = os.fsdecode(b"/lib/lib\xff.so")
    doc = json.loads(json_text({"path": name}))
    assert doc["path"] == {"base64": "L2xpYi9saWL/LnNv"}


def test_text_of_escapes_names_but_keeps_the_colours() -> None:
    text = text_of([f"{RED}lib\x1b[2Jx.so not found{RESET}", "ok"])
    assert text == "\x1b[31mlib\\e[2Jx.so not found\x1b[0m\nok"


def test_wrap_fills_lines_and_keeps_a_command_in_backticks_whole() -> None:
    command = "`bazel test --test_env=LD_LIBRARY_PATH=/a/very/long/path " + "x" * 80 + "`"
    text = "run this first, then look again: " + command + " and then the rest " * 8
    lines = wrap(text, "bazel-ldfix: ", "bazel-ldfix:   ")
    assert lines[0].startswith("bazel-ldfix: run this")
    assert all(line.startswith("bazel-ldfix:   ") for line in lines[1:])
    assert any(command in line for line in lines)
    assert all(len(line) <= LINE_WIDTH for line in lines if command not in line)
    assert " ".join(line.split(":", 1)[1].strip() for line in lines).split() == text.split()


def test_abbreviate_writes_the_output_base_once_named() -> None:
    ob = "/home/u/.cache/bazel/_bazel_u/0123abcd"
    assert abbreviate(f"{ob}/external/r/libx.so", ob + "/") == f"{OUTPUT_BASE}/external/r/libx.so"
    assert abbreviate("/short/x", "/s") == "/short/x"    # not shorter written as a name
    assert abbreviate("/x", None) == "/x"

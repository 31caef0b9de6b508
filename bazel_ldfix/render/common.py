"""What every rendering shares: JSON documents (``"version": 1``), text lines with colour
stand-ins, and the output_base written once."""

from __future__ import annotations

import dataclasses
import enum
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bazel_ldfix import quoting

if TYPE_CHECKING:
    pass


JSON_VERSION = 1


def to_jsonable(value: Any) -> Any:
    """One encoder for the project's dataclasses, enums, paths and tuples."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.repr}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def dumps(document: dict[str, Any]) -> str:
    return json_text({"version": JSON_VERSION, **document})


def json_text(document: object) -> str:
    """JSON text; a string that is not UTF-8 becomes ``{"base64": ...}`` (lossless)."""
    # Here: +13 ms CPU on `resolve` at the top (benchmarks/START.md).
    import json

    return json.dumps(quoting.json_safe(document), indent=2)


def text_of(lines: Sequence[str]) -> str:
    """Lines for a terminal: names escaped (:func:`quoting.printable`), then the colours
    (written as stand-in characters so that escaping cannot touch them) put in."""
    text = "\n".join(quoting.printable(line) for line in lines)
    for stand_in, code in _COLOURS.items():
        text = text.replace(stand_in, code)
    return text


def error_json(message: str, exit_code: int) -> str:
    """What a command asked for JSON prints on stdout when it fails (stderr has the line)."""
    return dumps({"error": {"message": message, "exit_code": exit_code}})


LINE_WIDTH = 100
"""The columns a line of the tool's own prose fills at most, its ``bazel-ldfix: `` included."""

# A word: what lies between blanks, where a span in backticks (a command) counts as one.
_WORD = re.compile(r"(?:[^\s`]|`[^`]*`)+|\S+")


def wrap(text: str, first: str, rest: str, width: int = LINE_WIDTH) -> list[str]:
    """``text`` as lines of at most ``width`` columns, the first after ``first``, the others
    after ``rest`` (``"bazel-ldfix:   "``). Lines break between words only: a path, a flag
    or a command in backticks longer than a line stays whole, on a line of its own."""
    lines: list[str] = []
    line = first
    for word in _WORD.findall(text):
        start = line in (first, rest)
        if not start and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = rest
            start = True
        line += word if start else " " + word
    lines.append(line)
    return lines


OUTPUT_BASE = "$OUTPUT_BASE"


def abbreviate(text: str, output_base: str | None) -> str:
    """``text`` with the output_base written ``$OUTPUT_BASE`` (the first line says what it
    is; a shell with ``OUTPUT_BASE=$(bazel info output_base)`` reads the paths as they are)."""
    if not output_base or len(output_base) <= len(OUTPUT_BASE):
        return text
    return text.replace(output_base.rstrip("/"), OUTPUT_BASE)


# Stand-ins in the lines, replaced by the escape sequences after names are escaped.
RED, DIM, RESET = "\ue000", "\ue001", "\ue002"


_COLOURS = {RED: "\x1b[31m", DIM: "\x1b[2m", RESET: "\x1b[0m"}

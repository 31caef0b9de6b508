"""Text and JSON (``"version": 1``) for ``inspect``, ``assert-linkage`` and ``dupes``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bazel_ldfix.linkage.kinds import Inspection, Kind
from bazel_ldfix.report import dumps, to_jsonable

# -- inspect ------------------------------------------------------------------------------

def inspection_document(item: Inspection, required: Kind | None,
                        error: str | None = None) -> dict[str, Any]:
    problem = item.mismatch(required) if required is not None and error is None else None
    return {
        "path": item.path,
        "kind": item.kind.value if error is None else None,
        "description": item.describe() if error is None else None,
        "elf": to_jsonable(item.elf),
        "members": item.members,
        "script_inputs": list(item.script_inputs),
        "rule": item.reason,
        "required": required.value if required is not None else None,
        "ok": None if required is None else (error is None and problem is None),
        "problem": problem,
        "error": error,
    }


def inspections_json(docs: Sequence[dict[str, Any]]) -> str:
    return dumps({"files": list(docs)})


def printable(text: str) -> str:
    """``text`` as is when it prints as itself; else Python's quoted, escaped form (a file
    name with a newline must not forge a second line of output)."""
    return text if text.isprintable() else ascii(text)


def inspection_text(item: Inspection) -> str:
    lines = [f"{printable(item.path)}: {item.describe()}"]
    facts = item.elf
    if facts is not None:
        if item.reason:
            lines.append(f"  decided by: {item.reason}")
        if facts.soname is not None:
            lines.append(f"  soname: {printable(facts.soname)}")
        lines += [f"  needed: {printable(name)}" for name in facts.needed]
        if facts.rpath is not None:
            lines.append(f"  rpath: {printable(facts.rpath)}")
        if facts.runpath is not None:
            lines.append(f"  runpath: {printable(facts.runpath)}")
        if facts.interp is not None:
            lines.append(f"  interpreter: {printable(facts.interp)}")
    lines += [f"  input: {printable(name)}" for name in item.script_inputs]
    return "\n".join(lines)

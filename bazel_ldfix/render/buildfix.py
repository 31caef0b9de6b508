"""A plan for people (diffs, then what is only described) and for scripts (JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bazel_ldfix.buildfix.change import Change, FileChange, Kind, Plan, shown


def to_text(result: Plan, workspace: str, refused: str | None = None) -> str:
    """Diffs of the files it edits, then what it only describes, then the notes.

    No diff is shown when some change cannot be made (``result.problems``), nor when the
    change was ``refused`` (why: Bazel rejects it, a file changed while it was written): a
    diff is only offered once Bazel has analysed it.
    """
    out: list[str] = []
    diffs = not result.problems and refused is None
    for f in result.files:
        if not f.editable:
            out.append(f"# not edited: {f.place.describe(workspace)}."
                       + ("\n# The change it needs, shown on the file the rule wrote:"
                          if diffs else ""))
        elif not diffs:
            continue
        elif f.names:
            out.append(f"# {shown(f.path, workspace)} is also named "
                       + ", ".join(shown(n, workspace) for n in f.names)
                       + ": one file, edited once")
        if diffs:
            out.append(f.diff(workspace).rstrip("\n"))
    for place, changes in result.described:
        out.append(f"# not edited: {place.describe(workspace)}. The change it needs:")
        out += [f"#   {c.label}: {c.words}" for c in changes]
    for u in result.unwritten:
        out.append(f"# not written: {u.reason}. The change: {u.change.label}: "
                   f"{u.change.words} ({u.change.why})")
    out += [f"# cannot fix: {p}" for p in result.problems]
    out += [f"# cannot fix: {refused}"] if refused is not None else []
    out += [f"# still missing: {u}" for u in result.unprovided]
    out += [f"# not fetched yet: {u}" for u in result.unfetched]
    out += [f"# note: {n}" for n in result.notes]
    return "\n".join(out)


def to_jsonable(result: Plan, workspace: str, written: Sequence[str] = (), *,
                rejected: bool = False) -> dict[str, Any]:
    """The plan as a JSON object: every edit with its file, old and new value and why;
    ``written``: the files written (by path); ``rejected``: Bazel rejected the edits of
    the files it analysed."""
    edits: list[dict[str, Any]] = []
    done = set(written)
    for f in result.files:
        for c in f.changes:
            edits.append(_edit(c, f.path, "written" if f.path in done else (
                "described" if not f.editable else "rejected" if rejected else "planned")))
    for place, changes in result.described:
        edits += [_edit(c, place.file, "described") for c in changes]
    for u in result.unwritten:
        edits.append({**_edit(u.change, None, "not written"), "reason": u.reason})
    return {
        "edits": edits,
        "files": [_file(f, workspace, f.path in done) for f in result.files],
        "problems": list(result.problems),
        "unprovided": list(result.unprovided),
        "unfetched": list(result.unfetched),
        "notes": list(result.notes),
    }


def _edit(change: Change, path: str | None, state: str) -> dict[str, Any]:
    return {"file": path, "label": change.label, "kind": change.kind.value,
            "attribute": change.attribute,
            "old": change.old if change.kind in (Kind.SET, Kind.SYSTEM) else None,
            "new": change.value, "why": change.why, "state": state}


def _file(f: FileChange, workspace: str, written: bool) -> dict[str, Any]:
    return {"file": f.path, "names": list(f.names), "layout": f.place.layout.name.lower(),
            "editable": f.editable, "written": written, "diff": f.diff(workspace)}

"""Rendering results for people (text) and for scripts (JSON, ``"version": 1``)."""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import shlex
from typing import Any

from bazel_ldfix.repair import VARIABLE, Repair

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
    return json.dumps({"version": JSON_VERSION, **document}, indent=2)


# -- env / test ---------------------------------------------------------------------------

def repair_json(repair: Repair) -> str:
    return dumps({
        "output_base": repair.output_base,
        "base": list(repair.base),
        "base_source": repair.base_source,
        "tests": to_jsonable(repair.tests),
        "missing": [
            {"soname": m.soname, "needed_by": list(m.needed_by), "dir": m.dir,
             "passed_over": [{"path": p.path, "reason": p.reason} for p in m.passed_over]}
            for m in repair.missing],
        "unresolved": list(repair.unresolved),
        "ld_library_path": repair.ld_library_path,
        "flags": list(repair.flags),
    })


def repair_flags(repair: Repair) -> str:
    return "\n".join(shlex.quote(f) for f in repair.flags)


def repair_shell(repair: Repair) -> str:
    if repair.ld_library_path is None:
        return ""
    return f"export {VARIABLE}={shlex.quote(repair.ld_library_path)}"


def repair_bazelrc(repair: Repair) -> str:
    if repair.ld_library_path is None:
        return ""
    return f"test --test_env={VARIABLE}={repair.ld_library_path}"


def repair_summary(repair: Repair) -> str:
    """What was missing and what is added, for stderr before ``bazel test`` runs."""
    lines = []
    for test in repair.tests:
        if test.missing_before:
            lines.append(f"{test.label} cannot load {', '.join(test.missing_before)}")
        if test.error:
            lines.append(f"{test.label}: the loader stops: {test.error}")
    for m in repair.missing:
        if m.dir:
            lines.append(f"  {m.soname} is in {m.dir}")
        else:
            lines.append(f"  {m.soname} exists nowhere under {repair.output_base}/external "
                         f"(needed by {', '.join(m.needed_by)})")
        lines += [f"    passed over {p.path}: {p.reason}" for p in m.passed_over]
    for test in repair.tests:
        if test.missing_after and repair.ld_library_path is not None:
            lines.append(f"{test.label} will still miss {', '.join(test.missing_after)}")
    if repair.ld_library_path is not None:
        lines.append(f"adding --test_env={VARIABLE}={repair.ld_library_path}")
        if repair.base:
            lines.append(f"  (keeps {repair.base_source})")
    elif not repair.missing:
        lines.append("every test loads; nothing to add")
    return "\n".join(f"bazel-ldfix: {line}" for line in lines)

"""``locate`` for people and scripts: each SONAME's copies under output_base/external, best
first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bazel_ldfix.outputbase.index import Copy
from bazel_ldfix.render.common import json_text, text_of


def locate_json(found: Mapping[str, Sequence[Copy]]) -> str:
    """``{soname: [{dir, machine, class, path, reason}...]}``, best first."""
    return json_text({name: [{"dir": c.dir, "machine": c.machine_name, "class": c.class_name,
                          "path": c.path, "reason": c.reason, "passed": c.passed}
                         for c in copies]
                  for name, copies in found.items()})


def locate_text(found: Mapping[str, Sequence[Copy]], root: str) -> str:
    lines = []
    for name, copies in found.items():
        if not copies:
            lines.append(f"{name}: nowhere under {root}")
            continue
        lines.append(f"{name}:")
        for c in copies:
            what = f"{c.class_name}, {c.machine_name}" if c.class_name else "not ELF"
            if c.reason is not None and c.class_name:
                what += f"; {c.reason}"
            elif c.passed is not None:
                what += f"; not the one: {c.passed}"
            elif c.reason is not None:
                what = c.reason
            lines.append(f"  {c.dir}  ({what})")
    return text_of(lines)

"""``bazel-ldfix fix``: the hermetic BUILD change, made in the file a person edits.

- ``starlark``: reading BUILD and WORKSPACE text, and editing one attribute in place;
- ``locate``: which file (or which string in WORKSPACE) defines a ``cc_import``;
- ``plan``: what to change for each library a test cannot load, checked before it is
  proposed; ``change``: the changes themselves;
- ``edit``: the new text of each file, and writing it; ``files``: reading and writing a
  file with nothing lost;
- ``analysis``: whether Bazel accepts what was written; ``render``: text and JSON.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bazel_ldfix import pathlist
from bazel_ldfix.buildfix import analysis, files
from bazel_ldfix.buildfix.change import Plan
from bazel_ldfix.buildfix.edit import write
from bazel_ldfix.buildfix.locate import defines_repository
from bazel_ldfix.buildfix.plan import Shape, TestMissing, plan
from bazel_ldfix.buildfix.render import to_jsonable, to_text

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.repair.plan import Repair

__all__ = ["Applied", "Plan", "Shape", "TestMissing", "apply", "plan", "plan_for",
           "to_jsonable", "to_text", "write"]


def plan_for(repair: Repair, workspace: str, *, interface: bool = False) -> Plan:
    """The plan for what the repair found missing, test by test.

    A test's own list names what it misses first, with what it finds only through files
    Bazel does not declare for it (leftovers of an earlier build in bazel-out,
    :mod:`bazel_ldfix.bazel.declared`); what those libraries need in turn comes from the
    loader model run for that test alone (as ``diagnose`` runs it).
    """
    from bazel_ldfix.bazel import declared
    from bazel_ldfix.diagnosis import model as diagnosis_model

    base = pathlist.join(repair.base) if repair.base else None
    found = {m.soname: m.dir for m in repair.missing if m.dir}
    needed_by = {m.soname: m.needed_by for m in repair.missing}
    tests = []
    listed: dict[str, tuple[str, list[str]]] = {}
    for t in repair.tests:
        names = list(t.missing_before)
        names += [f.soname for f in declared.leftovers(t.executable, base, listed)
                  if f.soname not in names]
        if not names:
            continue
        if any(m.soname not in names for m in repair.missing):
            # Some name is needed by a library, not by the tests: whose is it?
            model = diagnosis_model.model_missing(t.label, t.executable, repair.output_base, base)
            names += [n for n in model if n not in names]
        tests.append(TestMissing(t.label, t.executable, tuple(names), needed_by))

    def candidates(soname: str) -> list[str]:
        directory = found.get(soname)
        return [os.path.join(directory, soname)] if directory else []

    shape = Shape.INTERFACE if interface else Shape.VERSIONED
    skylib = any(o.name == "override_repository" and o.value.startswith("bazel_skylib=")
                 for o in repair.options) or defines_repository(
        "bazel_skylib", workspace, repair.output_base)
    return plan(tests, workspace, repair.output_base, shape, candidates, base,
                skylib=skylib)


@dataclasses.dataclass(frozen=True)
class Applied:
    """What ``--write`` did: the files written, Bazel's verdict, and whether they were put
    back (every file restored byte for byte when Bazel rejects the change)."""

    written: tuple[files.Written, ...]
    verdict: analysis.Verdict | None    # None: not asked (nothing was written)
    restored: bool = False
    not_restored: tuple[str, ...] = ()  # files changed again since they were written


def apply(result: Plan, bazel: Bazel, bazel_args: Sequence[str], output_base: str | None,
          timeout: float = analysis.TIMEOUT) -> Applied:
    """Write the plan's editable files, have Bazel analyse the tests and the rules
    changed, and restore every file when Bazel rejects what was written."""
    written = tuple(write(result.files, output_base))
    if not written:
        return Applied((), None)
    labels = list(dict.fromkeys(c.label for f in result.files if f.editable
                                for c in f.changes))
    try:
        verdict = analysis.analyse(bazel, bazel_args, labels, timeout)
    except BaseException:
        files.restore(written)      # Ctrl-C, or no Bazel: leave nothing unchecked behind
        raise
    if verdict.accepted:
        return Applied(written, verdict)
    return Applied(written, verdict, True, tuple(files.restore(written)))

"""``bazel-ldfix fix``: the hermetic BUILD change, made in the file a person edits.

- ``starlark``: reading BUILD and WORKSPACE text, and editing one attribute in place;
- ``locate``: which file (or which string in WORKSPACE) defines a ``cc_import``;
- ``plan``: what to change for each library a test cannot load, checked, as diffs, written.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bazel_ldfix import pathlist
from bazel_ldfix.buildfix.plan import Plan, Shape, TestMissing, plan, to_text, write

if TYPE_CHECKING:
    from bazel_ldfix.repair.plan import Repair

__all__ = ["Plan", "Shape", "TestMissing", "plan", "plan_for", "to_text", "write"]


def plan_for(repair: Repair, workspace: str, *, interface: bool = False) -> Plan:
    """The plan for what the repair found missing, test by test.

    A test's own list names what it misses first; what those libraries need in turn comes
    from the loader model run for that test alone (as ``diagnose`` runs it).
    """
    from bazel_ldfix.diagnosis import model as diagnosis_model

    base = pathlist.join(repair.base) if repair.base else None
    found = {m.soname: m.dir for m in repair.missing if m.dir}
    tests = []
    for t in repair.tests:
        if not t.missing_before:
            continue
        names = list(t.missing_before)
        if any(m.soname not in names for m in repair.missing):
            # Some name is needed by a library, not by the tests: whose is it?
            model = diagnosis_model.model_missing(t.label, t.executable, repair.output_base, base)
            names += [n for n in model if n not in names]
        tests.append(TestMissing(t.label, t.executable, tuple(names)))

    def candidates(soname: str) -> list[str]:
        directory = found.get(soname)
        return [os.path.join(directory, soname)] if directory else []

    shape = Shape.INTERFACE if interface else Shape.VERSIONED
    return plan(tests, workspace, repair.output_base, shape, candidates, base)

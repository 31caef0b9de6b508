"""The tests of a repair that load here only what an earlier build left in ``bazel-out``.

Such a test passes on this machine by accident: a clean checkout, or CI, misses the file
(docs/leftovers.md). The summary warns of each; ``--github`` annotates them.
"""

from __future__ import annotations

import functools

from bazel_ldfix.bazel import declaredinputs
from bazel_ldfix.bazel.declaredinputs import Leftover
from bazel_ldfix.repair import fallback
from bazel_ldfix.repair.results import Repair


def leftovers(repair: Repair) -> list[tuple[str, tuple[Leftover, ...]]]:
    """Each test that loads here only what an earlier build left in bazel-out, with those
    files. A test that fails anyway is left to the diagnosis; one whose files cannot be
    read is left out."""
    listed: dict[str, tuple[str, list[str]]] = {}   # each directory listed once
    out = []
    for t in repair.tests:
        if t.missing_after:
            continue    # it fails anyway: the diagnosis says why
        base = ":".join(repair.base_of(t.label)) or None   # the value it had
        found = fallback.attempt(functools.partial(declaredinputs.leftovers, t.executable, base,
                                                   listed))
        if isinstance(found, tuple) and found:
            out.append((t.label, found))
    return out

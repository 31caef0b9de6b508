"""GitHub Actions annotations of a run: one ``::error`` per test the loader stopped, one
``::notice`` per test the repair let load (whether it then passed or failed for another
reason), one ``::warning`` per test that loads what an earlier build left, so that the CI
page shows them.

They are workflow commands, one line each (``::error title=T,file=F,line=N::message``),
escaped as the runner reads them back (``ActionCommand.TryParseV2`` of actions/runner): in
the message ``%``, CR and LF; in a property also ``:`` and ``,``, which separate them. The
runner reads commands from stdout and stderr alike.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from bazel_ldfix import PROG
from bazel_ldfix.bazel.workspace import workspace_of

# Only the standard library here (and the package's root): `test` imports this before
# Bazel starts.
if TYPE_CHECKING:
    from bazel_ldfix.bazel.declaredinputs import Leftover
    from bazel_ldfix.diagnosis.explain import Finding
    from bazel_ldfix.given import Given
    from bazel_ldfix.repair.results import Missing, Repair

_MAX_BUILD = 4 << 20


def enabled(flag: bool | None, env: Mapping[str, str]) -> bool:
    """``--github``/``--no-github``, else whether the runner says this is a GitHub job."""
    return flag if flag is not None else env.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """A message as the runner reads it back (``%`` first, so no escape is read twice)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value: the message's escapes, and ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, properties: Mapping[str, str]) -> str:
    """One workflow command: ``::kind key=value,...::message``.

    The runner trims the properties' text and drops an empty value, so a value is written
    without the blanks around it, and not at all when nothing is left.
    """
    props = ",".join(f"{key}={escape_property(value.strip())}"
                     for key, value in properties.items() if value.strip())
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}"


class Places:
    """Where each test is declared (its BUILD file, relative to the repository the CI job
    checked out, and the line of its ``name``), for the annotation to point at."""

    def __init__(self, workspace: str | None, checkout: str | None) -> None:
        self.workspace = workspace
        self.checkout = checkout or workspace

    def of(self, label: str | None) -> dict[str, str]:
        if not label or self.workspace is None or not label.startswith("//"):
            return {}
        package, _, name = label[2:].partition(":")
        for build in ("BUILD.bazel", "BUILD"):
            path = os.path.join(self.workspace, package, build)
            if os.path.isfile(path):
                break
        else:
            return {}
        rel = os.path.relpath(path, self.checkout) if self.checkout else path
        if rel.startswith(".."):
            return {}     # outside the checkout: the page could not show it
        where = {"file": rel}
        line = _line_of(path, name or package.rsplit("/", 1)[-1])
        if line is not None:
            where["line"] = str(line)
        return where


def _line_of(path: str, name: str) -> int | None:
    """The line of ``name = "NAME"`` in a BUILD file (bounded read; None: not found)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(_MAX_BUILD).decode("utf-8", "replace")
    except OSError:
        return None
    match = re.search(r"""\bname\s*=\s*["']""" + re.escape(name) + """["']""", text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def errors(findings: Sequence[Finding], places: Places, prog: str = PROG) -> list[str]:
    """One ``::error`` per test the loader stopped: what it misses, and what to run (the
    tool run as ``prog``)."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.render import brief

    by_test: dict[str, list[Finding]] = {}
    for f in findings:
        by_test.setdefault(f.test or f.log, []).append(f)
    out = []
    for test, served in by_test.items():
        rows = "; ".join(f"{name} ({where})" for name, where in
                         dict.fromkeys(brief.row(f) for f in served))
        run = next((f.fix.command for f in served if f.fix.command), None)
        message = f"{test} was stopped by the dynamic loader: {rows}" + (
            f". Run: {run}" if run else "") + f". Details: {prog} diagnose -v"
        out.append(command("error", message, {"title": f"{test}: cannot load",
                                              **places.of(served[0].test)}))
    return out


def notices(repair: Repair, failing: Iterable[str], places: Places,
            prog: str = PROG, otherwise: Iterable[str] = ()) -> list[str]:
    """One ``::notice`` per test the repair let load (it missed something, and the run did
    not stop it in the loader). A test in ``otherwise`` loaded and failed for another
    reason: its notice says so, and does not call it repaired."""
    stopped = set(failing)
    failed = set(otherwise)
    by_group = {g.labels: _given_in(g.missing, g.links_dir, g.given) for g in repair.groups}
    whole = _given_in(repair.missing, repair.links_dir, repair.given)
    out = []
    for test in repair.tests:
        if not test.missing_before or test.missing_after or test.label in stopped:
            continue
        given = next((v for labels, v in by_group.items() if test.label in labels), whole)
        added = list(dict.fromkeys(d for s in test.missing_before if (d := given.get(s))))
        message = (f"{test.label} could not load {', '.join(test.missing_before)}; "
                   f"bazel-ldfix test added {', '.join(added) or 'their directories'} to its "
                   "LD_LIBRARY_PATH")
        if test.label in failed:
            message += (", and it loads now. It failed for another reason: its test.log "
                        "says why")
            title = f"{test.label}: loads, failed otherwise"
        else:
            title = f"{test.label}: repaired"
        message += f". For good: {prog} fix {shlex.quote(test.label)}"
        out.append(command("notice", message, {"title": title, **places.of(test.label)}))
    return out


def _given_in(missing: Iterable[Missing], links_dir: str | None, given: Given
              ) -> dict[str, str]:
    """The entry of LD_LIBRARY_PATH each missing soname is given by in one value: its own
    directory, or the links directory. A soname withheld, or not found, has none."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.repair.exposure import Exposure

    if not given.changes:
        return {}       # nothing was added (held back under remote execution)
    out = {}
    for m in missing:
        entry = links_dir if m.exposure is Exposure.LINK else \
            m.dir if m.exposure is Exposure.DIRECTORY else None
        if entry is not None and entry in given.added:
            out[m.soname] = entry
    return out


def leftovers(found: Sequence[tuple[str, Sequence[Leftover]]], places: Places,
              prog: str = PROG) -> list[str]:
    """One ``::warning`` per test that loads a library only from a file an earlier build
    left in bazel-out (see render/repair.py ``leftover_lines``)."""
    out = []
    for label, files in found:
        where = ", ".join(f"{f.soname} from {f.path}" for f in files)
        message = (f"{label} loads {where}, which no rule declares for it now: an earlier "
                   "build left it in bazel-out. The test passes here by accident, and fails "
                   f"under remote execution and after bazel clean. For good: {prog} fix "
                   f"{shlex.quote(label)}")
        out.append(command("warning", message, {"title": f"{label}: loads a leftover",
                                                **places.of(label)}))
    return out


def revealed(labels: Sequence[str], added: Sequence[tuple[str, str]],
             places: Places) -> list[str]:
    """One ``::notice`` per test a rerun let load, with what the run revealed."""
    found = ", ".join(f"{soname} in {directory}" for soname, directory in added)
    return [command("notice", f"{label} loaded when run again with what the first run "
                    f"revealed: {found}", {"title": f"{label}: repaired by a rerun",
                                           **places.of(label)})
            for label in labels]


def run_annotations(cwd: str, checkout: str | None, stopped: Sequence[Finding],
                repair: Repair | None = None, rerun_ok: Sequence[str] = (),
                added: Sequence[tuple[str, str]] = (), *, otherwise: Sequence[str] = (),
                left: Sequence[tuple[str, Sequence[Leftover]]] = (),
                prog: str = PROG) -> list[str]:
    """A run's annotations, in order: an ``::error`` per test the loader stopped, the
    repair's notices, what a rerun revealed, the tests that load leftovers. ``cwd``: where
    the user is (its workspace places the files); ``checkout``: $GITHUB_WORKSPACE;
    ``added``: the (soname, directory) a rerun revealed; ``otherwise``: the tests that
    failed for another reason than the loader."""
    places = Places(workspace_of(cwd), checkout)
    lines = errors(stopped, places, prog)
    if repair is not None:
        failing = [f.test for f in stopped if f.test]
        lines += notices(repair, [*failing, *rerun_ok], places, prog, otherwise)
    lines += revealed(rerun_ok, added, places)
    lines += leftovers(left, places, prog)
    return lines

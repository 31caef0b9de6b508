"""``diagnose`` on one screen: the command to run first, then one line per missing library
under the ``cc_import`` (or the loaded file) that causes it.

Each failure in full, the ``.bazelrc`` line and the BUILD changes are ``diagnose -v``
(:mod:`.diagnosis`) and ``--json``. The output_base is written once, as in every output.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bazel_ldfix import PROG
from bazel_ldfix.diagnosis import cause
from bazel_ldfix.diagnosis.cause import Cause, CauseKind
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.loader.resolution import PassReason
from bazel_ldfix.render.common import OUTPUT_BASE, abbreviate
from bazel_ldfix.render.diagnosis import (
    BOLD,
    RED,
    RESET,
    YELLOW,
    assumed,
    paint,
    summary,
    unknown_environment,
)

if TYPE_CHECKING:
    from bazel_ldfix.diagnosis.explain import Finding
    from bazel_ldfix.diagnosis.report import Diagnosis

SHOWN_LABELS = 3        # a row names this many tests, then how many more
# What `bazel-ldfix fix` edits: a cc_import of the unversioned file. The other BUILD
# changes (a dependency to add, a cc_import to write) are described, with -v.
_FIXED_BY_FIX = (CauseKind.IMPORTS_UNVERSIONED,)


def to_text(diagnosis: Diagnosis, prefix: str = "", *, color: bool = False,
            after_run: bool = False, prog: str = PROG) -> str:
    """For people, on one screen. ``after_run``: printed by ``bazel-ldfix test`` after its
    own run, which is not suggested again. The commands it suggests start with ``prog``."""
    marks = (RED, YELLOW, BOLD, RESET) if color else ("", "", "", "")
    base = diagnosis.output_base
    first = [f"{marks[2]}{line}{marks[3]}" for line in _run_first(diagnosis.findings,
                                                                   after_run, prog)]
    plain = _lines(diagnosis, None, marks, prog)
    if base and sum(line.count(base) for line in plain) > 1:
        # The command to paste keeps the real path; the rest says $OUTPUT_BASE.
        body = [*first, f"{OUTPUT_BASE} is {base}", *_lines(diagnosis, base, marks, prog)]
    else:
        body = [*first, *plain]
    return paint(body, prefix)


def _lines(d: Diagnosis, base: str | None, marks: tuple[str, str, str, str],
           prog: str) -> list[str]:
    red, yellow, _, reset = marks

    def short(text: str) -> str:
        return abbreviate(text, base)

    notes = [f"note: {short(note)}" for note in d.notes]
    if not d.findings:
        return [*notes, short(summary(d))]
    out = []
    tests = sorted({f.test or f.log for f in d.findings})
    out.append(f"{len(tests)} failed test{'s were' if len(tests) != 1 else ' was'} stopped "
               f"by the dynamic loader, from {short(d.source)}"
               + (f"; {_others(d.other_failures)}" if d.other_failures else "") + ":")
    groups: dict[tuple[str, str | None], tuple[Cause, list[Finding]]] = {}
    for f in d.findings:
        why = f.cause or cause.other()
        groups.setdefault(why.key, (why, []))[1].append(f)
    rows = [(why, _rows(served)) for why, served in groups.values()]
    width = min(40, max(len(name) for _, group in rows for name, _, _ in group))
    for why, group in rows:
        out.append(f"  {short(why.words)}:")
        for name, where, seen_in in group:
            colour = red if seen_in else yellow
            out.append(f"    {colour}{name:<{width}}{reset}  {short(where)}  {seen_in}")
    out += notes
    if assumed(d):
        out.append(unknown_environment(prog))
    # What `fix` changes: the cc_imports of libraries the loader did not find.
    labels = sorted({f.test for f in d.findings if f.test and f.fix.build and f.cause
                     and f.cause.kind in _FIXED_BY_FIX})
    if labels:
        out.append(f"for good: `{prog} fix {_targets(labels)}` shows the BUILD change, "
                   "--write makes it")
    by_hand = any(f.fix.build and not (f.cause and f.cause.kind in _FIXED_BY_FIX)
                  for f in d.findings)
    out.append(f"details: `{prog} diagnose -v`"
               + (" (with the changes to make by hand)" if by_hand else "")
               + "; for scripts: --json")
    return out


def _run_first(findings: Sequence[Finding], after_run: bool, prog: str) -> list[str]:
    """The command (or commands, each for its tests) that let the tests load now."""
    ldfix: set[str] = set()
    by_flag: dict[str | None, list[Finding]] = {}
    for f in findings:
        if f.fix.command and f.fix.command.startswith(f"{prog} test "):
            ldfix.add(f.test or "")
        elif f.fix.command:
            by_flag.setdefault(f.fix.flag, []).append(f)
    commands = []
    if ldfix and not after_run:     # (after its run: what was just run)
        commands.append(f"{prog} test {_targets(sorted(ldfix - {''})) or '<tests>'}")
    for flag, served in by_flag.items():
        labels = sorted({f.test for f in served if f.test})
        if flag is not None and labels:
            commands.append(f"bazel test {_targets(labels)} {shlex.quote(flag)}")
        else:
            commands.append(served[0].fix.command or "")
    if len(commands) <= 1:
        return [f"run first: {c}" for c in commands]
    return ["run first (each for its tests):", *(f"  {c}" for c in commands)]


def _rows(served: Sequence[Finding]) -> list[tuple[str, str, str]]:
    """``(name, where, tests)`` per library of one cause, in the order first met."""
    by_name: dict[tuple[str, str], list[Finding]] = {}
    for f in served:
        by_name.setdefault((_name(f), _where(f)), []).append(f)
    out = []
    for (name, where), same in by_name.items():
        seen = sorted({f.test or f.log for f in same if f.seen_in_log})
        next_ = sorted({f.test or f.log for f in same if not f.seen_in_log} - set(seen))
        parts = ([f"for {_some(seen)}"] if seen else []) + \
            ([f"next for {_some(next_)}"] if next_ else [])
        out.append((name, where, ", ".join(parts)))
    return out


def row(f: Finding) -> tuple[str, str]:
    """What a finding's line says: the library (or version, or symbol), and where it is."""
    return _name(f), _where(f)


def _name(f: Finding) -> str:
    if f.error_kind is ErrorKind.VERSION_NOT_FOUND:
        return f"{f.soname} {f.version}"
    if f.error_kind is ErrorKind.UNDEFINED_SYMBOL:
        return f"{f.symbol}" + (f"@{f.version}" if f.version else "")
    return f.soname or "?"


def _where(f: Finding) -> str:
    """Where a usable copy is, in a few words."""
    kind = f.error_kind
    if kind in (ErrorKind.VERSION_NOT_FOUND, ErrorKind.UNDEFINED_SYMBOL):
        needer = f"needed by {os.path.basename(f.needed_by[0])}; " if f.needed_by else ""
        if (f.version or "").startswith("GLIBC_"):
            return needer + "glibc's own: no library path brings it (build for an older glibc)"
        return needer + (f"defined by {f.found[0]}" if f.found else "no copy found defines it")
    if kind is ErrorKind.OTHER:
        return f.message.rsplit(": ", 1)[-1] if f.message else "see -v"
    skipped = ""
    if kind is ErrorKind.WRONG_CLASS:
        # What the loader tried, and why it went on: the copies of the other class.
        other = [p for p in f.passed_over if p.kind is PassReason.NOT_LOADABLE]
        needer = f"needed by {os.path.basename(f.needed_by[0])}; " if f.needed_by else ""
        skipped = needer + (f"skipped {other[0].path} ({other[0].reason}); "
                            if other else "")
    if not f.found:
        return skipped + "no usable copy anywhere searched"
    where = os.path.dirname(f.found[0])
    if kind in (ErrorKind.FILE_TOO_SHORT, ErrorKind.INVALID_ELF_HEADER):
        return f"a good copy is in {where}"
    return f"{skipped}in {where}"


def _some(labels: Sequence[str]) -> str:
    if len(labels) <= SHOWN_LABELS:
        return ", ".join(labels)
    return ", ".join(labels[:SHOWN_LABELS]) + f" and {len(labels) - SHOWN_LABELS} more"


MAX_TARGETS = 8         # more labels than this are written as their packages' :all


def _targets(labels: Sequence[str]) -> str:
    """Target patterns for a command: the labels, or for many, ``//pkg:all`` for each
    package with several (the command then runs the package's other tests too)."""
    if len(labels) > MAX_TARGETS:
        packages: dict[str, list[str]] = {}
        for label in labels:
            packages.setdefault(label.rsplit(":", 1)[0], []).append(label)
        labels = [f"{package}:all" if len(named) > 1 else named[0]
                  for package, named in packages.items()]
    return " ".join(shlex.quote(label) for label in labels)


def _others(others: Sequence[str]) -> str:
    return (f"{len(others)} other{'s' if len(others) != 1 else ''} failed for another "
            f"reason: {_some(list(others))}")

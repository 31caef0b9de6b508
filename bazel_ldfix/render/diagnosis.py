"""``diagnose``'s output: JSON for programs, and text for people, where each failure is
printed once and each fix once for every test it serves.

Two tests that miss libraries from one directory get one fix, naming both tests; a BUILD
change that serves several failures is printed once. The output_base is written once, then
``$OUTPUT_BASE`` (lines meant to be pasted keep the real path). Colour follows the same rule
as every command: only on a terminal, and never with ``NO_COLOR``.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bazel_ldfix import PROG
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.given import TRY_IMPORT, USER_BAZELRC
from bazel_ldfix.quoting import printable
from bazel_ldfix.render.common import OUTPUT_BASE, abbreviate, dumps

if TYPE_CHECKING:
    from bazel_ldfix.diagnosis.explain import Finding
    from bazel_ldfix.diagnosis.report import Diagnosis

# Colours are written as stand-in characters, put in after the names were escaped
# (quoting.printable), so that escaping cannot touch them.
RED, YELLOW, BOLD, RESET = "\ue010", "\ue011", "\ue012", "\ue013"
_COLOURS = {RED: "\x1b[31m", YELLOW: "\x1b[33m", BOLD: "\x1b[1m", RESET: "\x1b[0m"}


def unknown_environment(prog: str = PROG) -> str:
    """The note of a diagnosis whose prediction rests on an environment not known."""
    return ("note: a plain `bazel test` records its options nowhere, so the model assumed "
            "the tests had no LD_LIBRARY_PATH; an rc file's --test_env may provide what is "
            f"predicted (run `{prog} test`, or pass --bep FILE, for what they had)")


def assumed(diagnosis: Diagnosis) -> bool:
    """The environment is not known and a prediction rests on it: a library predicted
    missing that is nowhere found (the kind an rc file's --test_env provides)."""
    return diagnosis.environment is None and any(
        not f.seen_in_log and not f.found for f in diagnosis.findings)


def flag_caveat(prog: str = PROG) -> str:
    """The note of a --test_env fix: it replaces, where the tool's own run merges."""
    return ("the flag replaces any LD_LIBRARY_PATH the test had (an env attribute, an rc "
            f"file's --test_env); `{prog} test` merges instead")


def to_json(diagnosis: Diagnosis) -> str:
    """``{"version": 1, "failures": [{test, log, error_kind, soname, needed_by, found,
    fix: {command, flag, bazelrc, build}, ...}], ...}``."""
    return dumps({
        "source": diagnosis.source,
        "output_base": diagnosis.output_base,
        "failures": [_finding_json(f) for f in diagnosis.findings],
        "other_failures": list(diagnosis.other_failures),
        "logs_read": diagnosis.logs_read,
        "unread": list(diagnosis.unread),
        "passed": diagnosis.passed,
        "notes": list(diagnosis.notes),
        "environment": diagnosis.environment,
    })


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "test": f.test, "log": f.log, "error_kind": f.error_kind.value, "soname": f.soname,
        "needed_by": list(f.needed_by), "found": list(f.found),
        "fix": {"command": f.fix.command, "flag": f.fix.flag, "bazelrc": f.fix.bazelrc,
                "build": f.fix.build},
        "message": f.message, "seen_in_log": f.seen_in_log,
        "needed_by_source": f.needed_by_source, "version": f.version, "symbol": f.symbol,
        "passed_over": [{"path": p.path, "reason": p.reason} for p in f.passed_over],
        "notes": list(f.notes),
        "cause": None if f.cause is None else {"kind": f.cause.kind.value,
                                                "subject": f.cause.subject},
    }


_WHAT = {
    ErrorKind.CANNOT_OPEN: "cannot load {soname}: not found",
    ErrorKind.WRONG_CLASS: "cannot load {soname}: wrong ELF class",
    ErrorKind.VERSION_NOT_FOUND: "needs version {version} of {soname}",
    ErrorKind.UNDEFINED_SYMBOL: "needs symbol {symbol}, defined nowhere loaded",
    ErrorKind.FILE_TOO_SHORT: "cannot load {soname}: the file found is too short",
    ErrorKind.INVALID_ELF_HEADER: "cannot load {soname}: the file found is not ELF",
    ErrorKind.OTHER: "cannot load {soname}",
}


def to_text(diagnosis: Diagnosis, prefix: str = "", *, color: bool = False,
            prog: str = PROG) -> str:
    """For people (``diagnose -v``): one block per finding, each fix once, then one
    summary line. The commands it suggests start with ``prog``."""
    text = summary(diagnosis)
    plain = _render(diagnosis, text, color, None, prog)
    base = diagnosis.output_base
    if base and sum(line.count(base) for line in plain) > 1:
        # Written once, then $OUTPUT_BASE (a path printed once stays as it is).
        body = _render(diagnosis, text, color, base, prog)
        body.insert(0, f"{OUTPUT_BASE} is {base}")
    else:
        body = plain
    return paint(body, prefix)


def paint(body: list[str], prefix: str) -> str:
    """The lines, escaped, prefixed, and with their colour stand-ins made escape codes."""
    while body and not body[0]:
        body.pop(0)

    # Names come from logs and files: escaped, so that none can forge a line or drive the
    # terminal, nor start a line a CI runner reads as its command (GitHub's `::name::`,
    # Azure's `##[`; a line is one when it starts so, blanks aside).
    text = "\n".join(f"{prefix}{_not_a_command(printable(line))}" if line
                     else prefix.rstrip() for line in body)
    for stand_in, code in _COLOURS.items():
        text = text.replace(stand_in, code)
    return text


def _render(diagnosis: Diagnosis, summary: str, color: bool, base: str | None,
            prog: str) -> list[str]:
    red, yellow, bold, reset = (RED, YELLOW, BOLD, RESET) if color else ("", "", "", "")

    def short(text: str) -> str:
        return abbreviate(text, base)

    now_fixes: dict[tuple[str | None, str | None], list[Finding]] = {}
    build_fixes: dict[str, list[Finding]] = {}
    for f in diagnosis.findings:
        if f.fix.command or f.fix.flag:
            now_fixes.setdefault((f.fix.flag, f.fix.bazelrc), []).append(f)
        if f.fix.build:
            build_fixes.setdefault(f.fix.build, []).append(f)
    names = iter(string.ascii_uppercase)
    now_name = {key: next(names, "?") for key in now_fixes}
    build_name = {key: next(names, "?") for key in build_fixes}

    body: list[str] = []
    for note in diagnosis.notes:
        body.append(f"note: {short(note)}")
    if assumed(diagnosis):
        body.append(unknown_environment(prog))
    for f in diagnosis.findings:
        words = _WHAT[f.error_kind].format(soname=f.soname, version=f.version, symbol=f.symbol)
        if f.seen_in_log:
            body += ["", f"{red}{f.test or f.log} {words}{reset}"]
        else:
            body += ["", f"{yellow}{f.test or f.log} will next fail: "
                         f"{words.split(': ', 1)[0]}{reset}"]
        if f.message:
            body.append(f"  log:        {short(f.log)}")
            body.append(f"  says:       {short(_shorten(f.message))}")
        if f.needed_by:
            source = {"message": "the message", "loader model": "the loader model"}.get(
                f.needed_by_source, "")
            body.append(f"  needed by:  {short(', '.join(f.needed_by))}"
                        + (f"  ({source})" if source else ""))
        for i, path in enumerate(f.found):
            body.append(f"  {'found:' if i == 0 else '':<11} {short(path)}"
                        + ("  (best)" if i == 0 and len(f.found) > 1 else ""))
        if not f.found and f.soname and f.error_kind is not ErrorKind.UNDEFINED_SYMBOL:
            body.append("  found:      no usable copy")
        for p in f.passed_over:
            body.append(f"  passed over {short(p.path)}: {p.reason}")
        for note in f.notes:
            body.append(f"  note:       {short(note)}")
        refs = []
        if f.fix.command or f.fix.flag:
            refs.append(now_name[(f.fix.flag, f.fix.bazelrc)])
        if f.fix.build:
            refs.append(build_name[f.fix.build])
        if refs:
            body.append(f"  fix:        {', '.join(refs)} below")

    for key, served in now_fixes.items():
        labels = _labels(served)
        first = served[0].fix
        body += ["", f"{bold}fix {now_name[key]}, for {', '.join(labels) or 'the test'}: "
                     f"now, or on this machine{reset}"]
        command = _command(labels, first.command, first.flag, prog)
        if command:
            body.append(f"  now:        {command}")
            if not command.startswith("bazel test") and first.flag:
                body.append(f"              or add {shlex.quote(first.flag)} to bazel test")
        if first.bazelrc:
            # The lines for this machine alone go to a file that is not committed.
            body.append(f"  .bazelrc:   {TRY_IMPORT}")
            body.append(f"  {USER_BAZELRC}, this machine only (do not commit it):")
            body += [f"              {line}" for line in first.bazelrc.splitlines()]
        if first.flag:
            body.append(f"  note:       {flag_caveat(prog)}")
    for text, served in build_fixes.items():
        labels = _labels(served)
        body += ["", f"{bold}BUILD fix {build_name[text]}, for {', '.join(labels) or 'the test'}"
                     f" (hermetic: also under remote execution, no output_base path){reset}"]
        body += [f"  {short(line)}" if line else "" for line in text.rstrip("\n").splitlines()]

    body += ["", short(summary)]
    return body


def _not_a_command(line: str) -> str:
    start = len(line) - len(line.lstrip())
    if line.startswith(("::", "##["), start):
        return line[:start] + ("\\x3a" if line[start] == ":" else "\\x23") + line[start + 1:]
    return line


def _labels(served: Sequence[Finding]) -> list[str]:
    return sorted({f.test for f in served if f.test})


def _command(labels: Sequence[str], command: str | None, flag: str | None,
             prog: str) -> str | None:
    """The "now" command for every test a fix serves (one test: the finding's own)."""
    if command is None or len(labels) < 2:
        return command
    targets = " ".join(shlex.quote(label) for label in labels)
    if command.startswith(f"{prog} test "):
        return f"{prog} test {targets}"
    if flag is not None:
        return f"bazel test {targets} {shlex.quote(flag)}"
    return command


def summary(d: Diagnosis) -> str:
    tests = {f.test or f.log for f in d.findings}
    if not d.logs_read:
        return (f"nothing to diagnose: no failed test in {d.source}"
                + (f" ({d.passed} passed)" if d.passed else ""))
    parts = []
    if tests:
        parts.append(f"{len(tests)} failed test{'s' if len(tests) != 1 else ''} "
                     f"{'were' if len(tests) != 1 else 'was'} stopped by the dynamic loader")
    if d.other_failures:
        parts.append(f"{len(d.other_failures)} failed for another reason: "
                     + ", ".join(d.other_failures))
    if d.unread:
        parts.append(f"{len(d.unread)} failed with a log that cannot be read: "
                     + ", ".join(d.unread))
    if not parts:
        return f"nothing to diagnose in {d.source}: no log could be read"
    return f"from {d.source}: " + "; ".join(parts)


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

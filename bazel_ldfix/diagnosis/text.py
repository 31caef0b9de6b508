"""``diagnose`` for people: each failure once, each fix once for every test it serves.

Two tests that miss libraries from one directory get one fix, naming both tests; a BUILD
change that serves several failures is printed once. The output_base is written once, then
``$OUTPUT_BASE`` (lines meant to be pasted keep the real path). Colour follows the same rule
as every command: only on a terminal, and never with ``NO_COLOR``.
"""

from __future__ import annotations

import shlex
import string
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from bazel_ldfix.report import OUTPUT_BASE, abbreviate

if TYPE_CHECKING:
    from bazel_ldfix.diagnosis.diagnose import Diagnosis, ErrorKind, Finding

# Colours are written as stand-in characters, put in after the names were escaped
# (quoting.printable), so that escaping cannot touch them.
RED, YELLOW, BOLD, RESET = "\ue010", "\ue011", "\ue012", "\ue013"
_COLOURS = {RED: "\x1b[31m", YELLOW: "\x1b[33m", BOLD: "\x1b[1m", RESET: "\x1b[0m"}
FLAG_CAVEAT = ("the flag replaces any LD_LIBRARY_PATH the test had (an env attribute, an "
               "rc file's --test_env); `bazel-ldfix test` merges instead")


def render(diagnosis: Diagnosis, *, what: Mapping[ErrorKind, str], summary: str,
           shorten: Callable[[str], str], prefix: str = "", color: bool = False) -> str:
    """The text of a diagnosis. ``what`` words each error kind; ``summary`` ends it."""
    plain = _render(diagnosis, what, summary, shorten, color, None)
    base = diagnosis.output_base
    if base and sum(line.count(base) for line in plain) > 1:
        # Written once, then $OUTPUT_BASE (a path printed once stays as it is).
        body = _render(diagnosis, what, summary, shorten, color, base)
        body.insert(0, f"{OUTPUT_BASE} is {base}")
    else:
        body = plain
    while body and not body[0]:
        body.pop(0)
    from bazel_ldfix.quoting import printable

    # Names come from logs and files: escaped, so that none can forge a line or drive the
    # terminal.
    text = "\n".join(f"{prefix}{printable(line)}" if line else prefix.rstrip()
                     for line in body)
    for stand_in, code in _COLOURS.items():
        text = text.replace(stand_in, code)
    return text


def _render(diagnosis: Diagnosis, what: Mapping[ErrorKind, str], summary: str,
            shorten: Callable[[str], str], color: bool, base: str | None) -> list[str]:
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
    for f in diagnosis.findings:
        words = what[f.error_kind].format(soname=f.soname, version=f.version, symbol=f.symbol)
        if f.seen_in_log:
            body += ["", f"{red}{f.test or f.log} {words}{reset}"]
        else:
            body += ["", f"{yellow}{f.test or f.log} will next fail: "
                         f"{words.split(': ', 1)[0]}{reset}"]
        if f.message:
            body.append(f"  log:        {short(f.log)}")
            body.append(f"  says:       {short(shorten(f.message))}")
        if f.needed_by:
            source = {"message": "the message", "loader model": "the loader model"}.get(
                f.needed_by_source, "")
            body.append(f"  needed by:  {short(', '.join(f.needed_by))}"
                        + (f"  ({source})" if source else ""))
        for i, path in enumerate(f.found):
            body.append(f"  {'found:' if i == 0 else '':<11} {short(path)}"
                        + ("  (best)" if i == 0 and len(f.found) > 1 else ""))
        if not f.found and f.soname and f.error_kind.value != "undefined_symbol":
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
        command = _command(labels, first.command, first.flag)
        if command:
            body.append(f"  now:        {command}")
            if not command.startswith("bazel test") and first.flag:
                body.append(f"              or add {shlex.quote(first.flag)} to bazel test")
        if first.bazelrc:
            rc = first.bazelrc.splitlines()
            body.append(f"  .bazelrc:   {rc[0]}")
            body += [f"              {line}" for line in rc[1:]]
        if first.flag:
            body.append(f"  note:       {FLAG_CAVEAT}")
    for text, served in build_fixes.items():
        labels = _labels(served)
        body += ["", f"{bold}BUILD fix {build_name[text]}, for {', '.join(labels) or 'the test'}"
                     f" (hermetic: also under remote execution, no output_base path){reset}"]
        body += [f"  {short(line)}" if line else "" for line in text.rstrip("\n").splitlines()]

    body += ["", short(summary)]
    return body


def _labels(served: Sequence[Finding]) -> list[str]:
    return sorted({f.test for f in served if f.test})


def _command(labels: Sequence[str], command: str | None, flag: str | None) -> str | None:
    """The "now" command for every test a fix serves (one test: the finding's own)."""
    if command is None or len(labels) < 2:
        return command
    targets = " ".join(shlex.quote(label) for label in labels)
    if command.startswith("bazel-ldfix test "):
        return f"bazel-ldfix test {targets}"
    if flag is not None:
        return f"bazel test {targets} {shlex.quote(flag)}"
    return command

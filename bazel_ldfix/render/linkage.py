"""Text and JSON (``"version": 1``) for ``inspect``, ``assert-linkage``, ``dupes`` and
``assert-package``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bazel_ldfix.linkage.kinds import Inspection, Kind
from bazel_ldfix.render.common import dumps, to_jsonable

if TYPE_CHECKING:
    from bazel_ldfix.linkage.duplicates import DupesReport
    from bazel_ldfix.linkage.gate import GateReport
    from bazel_ldfix.linkage.package import Finding, PackageReport

# -- inspect ------------------------------------------------------------------------------

def inspection_document(item: Inspection, required: Kind | None,
                        error: str | None = None) -> dict[str, Any]:
    problem = item.mismatch(required) if required is not None and error is None else None
    return {
        "path": item.path,
        "kind": item.kind.value if error is None else None,
        "description": item.describe() if error is None else None,
        "elf": to_jsonable(item.elf),
        "members": item.members,
        "script_inputs": list(item.script_inputs),
        "rule": item.reason,
        "cuda": item.cuda.value if item.cuda is not None else None,
        "required": required.value if required is not None else None,
        "ok": None if required is None else (error is None and problem is None),
        "problem": problem,
        "error": error,
    }


def inspections_json(docs: Sequence[dict[str, Any]]) -> str:
    return dumps({"files": list(docs)})


def printable(text: str) -> str:
    """``text`` as is when it prints as itself; else Python's quoted, escaped form (a file
    name with a newline must not forge a second line of output)."""
    return text if text.isprintable() else ascii(text)


def inspection_text(item: Inspection) -> str:
    lines = [f"{printable(item.path)}: {item.describe()}"]
    facts = item.elf
    if facts is not None:
        if item.reason:
            lines.append(f"  decided by: {item.reason}")
        if facts.soname is not None:
            lines.append(f"  soname: {printable(facts.soname)}")
        lines += [f"  needed: {printable(name)}" for name in facts.needed]
        if facts.rpath is not None:
            lines.append(f"  rpath: {printable(facts.rpath)}")
        if facts.runpath is not None:
            lines.append(f"  runpath: {printable(facts.runpath)}")
        if facts.interp is not None:
            lines.append(f"  interpreter: {printable(facts.interp)}")
    lines += [f"  input: {printable(name)}" for name in item.script_inputs]
    return "\n".join(lines)


# -- assert-linkage -----------------------------------------------------------------------

def gate_json(report: GateReport) -> str:
    return dumps({
        "file": report.file,
        "kind": report.kind.value,
        "stripped": report.stripped,
        "ok": report.ok,
        "checks": [{"check": o.check.value, "subject": o.subject, "ok": o.ok,
                    "detail": o.detail, "symbols": list(o.symbols)} for o in report.outcomes],
    })


def gate_text(report: GateReport) -> str:
    stripped = ", stripped" if report.stripped else ""
    lines = [f"{printable(report.file)} ({report.kind.words}{stripped}):"]
    for o in report.outcomes:
        mark = "ok  " if o.ok else "FAIL"
        lines.append(f"  {mark} --{o.check.value} {printable(o.subject)}: {printable(o.detail)}")
    failed = sum(not o.ok for o in report.outcomes)
    total = len(report.outcomes)
    if failed:
        lines.append(f"{failed} of {total} assertion{'s' if total != 1 else ''} failed")
    else:
        lines.append("the assertion holds" if total == 1 else f"all {total} assertions hold")
    return "\n".join(lines)


# -- dupes --------------------------------------------------------------------------------

def dupes_json(report: DupesReport, demangled: Mapping[str, str]) -> str:
    return dumps({
        "file": report.file,
        "scope": list(report.objects),
        "missing": list(report.missing),
        "split": [d.name for d in report.split],
        "duplicates": [
            {"name": d.name, "demangled": demangled.get(d.name), "type": d.type.value,
             "split": d.split,
             "definitions": [{"object": x.object, "path": x.path, "type": x.type.value,
                              "visibility": x.visibility.value, "binding": x.binding.value,
                              "binds_to": x.binds_to} for x in d.definitions],
             "imported_by": list(d.importers)}
            for d in report.duplicates],
    })


def dupes_text(report: DupesReport, demangled: Mapping[str, str]) -> str:
    lines = [f"{printable(report.file)}: {len(report.objects)} objects in lookup order: "
             + ", ".join(printable(o) for o in report.objects)]
    if report.missing:
        lines.append(f"  not found (left out): {', '.join(report.missing)}")
    if not report.duplicates:
        lines.append("no dynamic symbol is defined by more than one object")
        return "\n".join(lines)
    for d in report.duplicates:
        shown = demangled.get(d.name)
        name = printable(d.name) + (f" ({printable(shown)})" if shown else "")
        lines.append(f"{'SPLIT ' if d.split else ''}{d.type.value} {name}:")
        for x in d.definitions:
            lines.append(f"  {printable(x.object)}: {x.binding.words}"
                         + (f" ({printable(x.binds_to)})"
                            if x.binding.value == "interposed" else ""))
        if d.importers:
            lines.append(f"  imported by {', '.join(printable(i) for i in d.importers)}: "
                         f"binds to {printable(d.definitions[0].object)}")
    split = [printable(demangled.get(d.name, d.name)) for d in report.split]
    lines.append(f"{len(report.duplicates)} duplicate name(s); "
                 + (f"{len(split)} split state: {', '.join(split)}" if split
                    else "none splits state (interposition unifies them)"))
    return "\n".join(lines)


# -- assert-package -----------------------------------------------------------------------

def package_json(report: PackageReport, demangled: Mapping[str, str]) -> str:
    return dumps({
        "package": report.package,
        "format": report.format.value,
        "entries": report.entries,
        "objects": report.objects,
        "ok": report.ok,
        "libraries": [{"name": lib.name, "file": lib.file, "soname": lib.soname,
                       "exports": lib.exports,
                       "ok": not any(f.subject == lib.name and f.problem.value != "one-soname"
                                     for f in report.findings)}
                      for lib in report.libraries],
        "findings": [{"problem": f.problem.value, "subject": f.subject, "files": list(f.files),
                      "links": list(f.links), "detail": f.detail, "symbols": list(f.symbols),
                      "demangled": [demangled.get(s, s) for s in f.symbols]}
                     for f in report.findings],
        "links_not_followed": [{"name": link.name, "target": link.target,
                                "problem": link.problem.value if link.problem else None}
                               for link in report.links],
        "unread": [{"file": u.file, "reason": u.reason} for u in report.unread],
    })


def _files(finding: Finding) -> str:
    text = ", ".join(printable(f) for f in finding.files)
    if finding.links:
        text += f" (also as {', '.join(printable(x) for x in finding.links)})"
    return text


def _names(found: Sequence[str], demangled: Mapping[str, str], limit: int = 4) -> str:
    # A constructor's C1 and C2 names demangle alike: each text once.
    shown = list(dict.fromkeys(printable(demangled.get(n, n)) for n in found))
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more


def package_text(report: PackageReport, demangled: Mapping[str, str]) -> str:
    lines = [f"{printable(report.package)} ({report.format.words}, {report.entries} "
             f"entr{'ies' if report.entries != 1 else 'y'}, {report.objects} ELF "
             f"object{'s' if report.objects != 1 else ''}):"]
    for lib in report.libraries:
        mine = [f for f in report.findings
                if f.subject == lib.name and f.problem.value != "one-soname"]
        if not mine and lib.file is not None:
            lines.append(f"  ok   {printable(lib.name)}: one shared object, "
                         f"{printable(lib.file)} (SONAME {printable(lib.soname or '')}); "
                         f"no other file defines its {lib.exports} exported names")
        for f in mine:
            where = f" {_files(f)}" if f.files else ""
            text = f"  FAIL {printable(lib.name)}: {f.problem.words}:{where}: {printable(f.detail)}"
            if f.symbols:
                text += f": {_names(f.symbols, demangled)}"
            lines.append(text)
    for f in report.findings:
        if f.problem.value == "one-soname":
            lines.append(f"  FAIL SONAME {printable(f.subject)}: {_files(f)}: "
                         f"{printable(f.detail)}")
    for link in report.links:
        words = link.problem.words if link.problem else ""
        lines.append(f"  link {printable(link.name)} -> {printable(link.target)}: {words}")
    for u in report.unread:
        lines.append(f"  not read: {printable(u.file)}: {printable(u.reason)}")
    count = len(report.findings)
    if count:
        lines.append(f"{count} problem{'s' if count != 1 else ''} found")
    else:
        names = ", ".join(printable(lib.name) for lib in report.libraries)
        each = " each" if len(report.libraries) > 1 else ""
        lines.append(f"the package holds {names} once{each}, as a shared object, and no "
                     "private copy")
    return "\n".join(lines)

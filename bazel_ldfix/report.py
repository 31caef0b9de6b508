"""Rendering results for people (text) and for scripts (JSON, ``"version": 1``)."""

from __future__ import annotations

import dataclasses
import enum
import os
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bazel_ldfix.loader.search import PassReason

if TYPE_CHECKING:
    from bazel_ldfix.loader.check import CheckResult, Matrix
    from bazel_ldfix.loader.resolve import Unversioned
    from bazel_ldfix.loader.search import Library, Resolution
    from bazel_ldfix.outputbase.index import Copy
    from bazel_ldfix.repair.exposure import Shadowed
    from bazel_ldfix.repair.plan import Repair

JSON_VERSION = 1
TESTS_FAILED = 3  # Bazel's exit code when the tests ran and some failed
VARIABLE = "LD_LIBRARY_PATH"  # what the repair sets (kept here so that resolve need not
                              # import the Bazel side)


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
    return _json({"version": JSON_VERSION, **document})


def _json(document: object) -> str:
    """JSON text; a string that is not UTF-8 becomes ``{"base64": ...}`` (lossless)."""
    import json

    from bazel_ldfix import quoting

    return json.dumps(quoting.json_safe(document), indent=2)


def _text(lines: Sequence[str]) -> str:
    """Lines for a terminal: names escaped (:func:`quoting.printable`), then the colours
    (written as stand-in characters so that escaping cannot touch them) put in."""
    from bazel_ldfix import quoting

    text = "\n".join(quoting.printable(line) for line in lines)
    for stand_in, code in _COLOURS.items():
        text = text.replace(stand_in, code)
    return text


def error_json(message: str, exit_code: int) -> str:
    """What a command asked for JSON prints on stdout when it fails (stderr has the line)."""
    return dumps({"error": {"message": message, "exit_code": exit_code}})


# -- env / test ---------------------------------------------------------------------------

def repair_json(repair: Repair) -> str:
    return dumps({
        "output_base": repair.output_base,
        "base": list(repair.base),
        "base_source": repair.base_source,
        "tests": to_jsonable(repair.tests),
        "missing": [
            {"soname": m.soname, "needed_by": list(m.needed_by), "dir": m.dir,
             "path": m.path, "exposure": m.exposure.value if m.exposure else None,
             "why": m.why,
             "passed_over": [{"path": p.path, "reason": p.reason} for p in m.passed_over]}
            for m in repair.missing],
        "unresolved": list(repair.unresolved),
        "withheld": list(repair.withheld),
        "links_dir": repair.links_dir,
        "links": [{"soname": link.soname, "target": link.target} for link in repair.links],
        "shadowed": to_jsonable(repair.shadowed),
        "ld_library_path": repair.ld_library_path,
        "flags": list(repair.flags),
        "skipped": [{"path": k.path, "kind": k.kind.value, "reason": k.reason}
                    for k in repair.skipped],
        "notes": list(repair.notes),
        "given_again": repair.given_again,
    })


def repair_flags(repair: Repair) -> str:
    return "\n".join(shlex.quote(f) for f in repair.flags)


SHELL_CAVEAT = ("this export is for running a test binary by hand; do not export it in the "
                "shell that runs Bazel: without --incompatible_strict_action_env (the default "
                "before Bazel 9) the client's PATH and LD_LIBRARY_PATH are part of every "
                "action's environment, so changing either rebuilds everything; give Bazel "
                "--test_env instead (--format flags or bazelrc)")


LINKS_CAVEAT = ("this value names a links directory of bazel-ldfix's own (removed once "
                "unused for 30 days, see `links/` in the README's Security section); the "
                "BUILD change (`bazel-ldfix fix --write`) is the form that lasts")


def repair_shell(repair: Repair) -> str:
    if repair.ld_library_path is None:
        return ""
    return f"export {VARIABLE}={shlex.quote(repair.ld_library_path)}"


def repair_bazelrc(repair: Repair) -> str:
    if repair.ld_library_path is None:
        return ""
    from bazel_ldfix import quoting

    # Quoted for Bazel's rc tokenizer; a value it cannot carry raises UnquotableError.
    return "test " + quoting.bazelrc_word(f"--test_env={VARIABLE}={repair.ld_library_path}")


OUTPUT_BASE = "$OUTPUT_BASE"


def abbreviate(text: str, output_base: str | None) -> str:
    """``text`` with the output_base written ``$OUTPUT_BASE`` (the first line says what it
    is; a shell with ``OUTPUT_BASE=$(bazel info output_base)`` reads the paths as they are)."""
    if not output_base or len(output_base) <= len(OUTPUT_BASE):
        return text
    return text.replace(output_base.rstrip("/"), OUTPUT_BASE)


def _indirect(repair: Repair) -> frozenset[str]:
    """The missing names that only found libraries need (``libvendor_core.so.3``, which
    the ``libvendor.so.3`` under ``external/`` needs), each looked at once for all tests."""
    external = os.path.join(repair.output_base, "external") + "/"

    def found_library(path: str) -> bool:
        return "/_solib_" in path or path.startswith(external) or \
            os.path.realpath(path).startswith(external)

    by_name = {m.soname: m for m in repair.missing}
    return frozenset(name for name, m in by_name.items()
                     if m.needed_by and all(map(found_library, m.needed_by)))


def _direct_first(names: Sequence[str], indirect: frozenset[str]) -> list[str]:
    """A test's missing names, those its own files need before those only a found library
    needs (``libvendor.so.3`` before the ``libvendor_core.so.3`` it needs)."""
    return sorted(names, key=indirect.__contains__)


def repair_summary(repair: Repair) -> str:
    """What was missing and what is added, for stderr before ``bazel test`` runs.

    The output_base is written once, then ``$OUTPUT_BASE``; a candidate passed over only
    because it is the same file as the one chosen (a local repository's symlink) is not
    listed.
    """
    from bazel_ldfix.repair.exposure import Exposure

    lines = [f"note: {skip.note()}" for skip in repair.skipped]
    indirect = _indirect(repair)
    for test in repair.tests:
        if test.missing_before:
            names = _direct_first(test.missing_before, indirect)
            lines.append(f"{test.label} cannot load {', '.join(names)}")
        if test.error:
            lines.append(f"{test.label}: the loader stops: {test.error}")
    for m in repair.missing:
        if m.dir and m.exposure is Exposure.LINK:
            lines.append(f"  {m.soname} is in {m.dir}, given by a link: {m.why}")
        elif m.dir and m.exposure is Exposure.WITHHELD:
            lines.append(f"  {m.soname} is in {m.dir}, not given: {m.why}")
        elif m.dir:
            lines.append(f"  {m.soname} is in {m.dir}")
        else:
            lines.append(f"  {m.soname} exists nowhere under {repair.output_base}/external "
                         f"(needed by {', '.join(m.needed_by)})")
        lines += [f"    passed over {p.path}: {p.reason}" for p in m.passed_over
                  if p.kind is not PassReason.SAME_FILE]
    for test in repair.tests:
        if test.missing_after and repair.ld_library_path is not None:
            lines.append(f"{test.label} will still miss {', '.join(test.missing_after)}")
        lines += _reach_lines(test)
    lines += [f"note: {note}" for note in repair.notes]
    if repair.given_again:
        lines.append("note: nothing this repair read has changed since the last run of the "
                     "same command: its repair is given again (--no-cache makes it anew)")
    lines += [_shadowed_line(shadow) for shadow in repair.shadowed]
    if repair.ld_library_path is not None:
        lines.append(f"adding --test_env={VARIABLE}={repair.ld_library_path}")
        if repair.base:
            lines.append(f"  (keeps {repair.base_source})")
        if repair.links_dir:
            lines += [f"  {repair.links_dir}/{link.soname} -> {link.target}"
                      for link in repair.links]
    elif not repair.tests and repair.notes:
        lines.append("no test could be examined; nothing to add")
    elif not repair.missing:
        lines.append("every test examined loads; nothing to add" if repair.notes
                     else "every test loads; nothing to add")
    # A rule's env to paste keeps the real path; the rest is read, not pasted.
    pasted = {f"  fix its rule instead: {t.rule_fix}" for t in repair.tests
              if t.rule_fix}
    if sum(line.count(repair.output_base) for line in lines if line not in pasted) > 1:
        lines = [f"{OUTPUT_BASE} is {repair.output_base}"] + [
            line if line in pasted else abbreviate(line, repair.output_base) for line in lines]
    # Each line escaped as it is: a name holding a newline stays on its own line.
    return _text([f"bazel-ldfix: {line}" for line in lines])


def _shadowed_line(shadow: Shadowed) -> str:
    """One line: a test loads another copy of a name than it would otherwise."""
    from bazel_ldfix.repair.exposure import ShadowCause

    instead = f" instead of {shadow.before}" if shadow.before else ""
    if shadow.cause is ShadowCause.CALLER:
        return (f"note: {shadow.test} loads {shadow.soname} from {shadow.after}{instead}: "
                f"its own {VARIABLE} entry {shadow.directory} offers it first, and is kept")
    now = f"loads {shadow.soname} from {shadow.after}" if shadow.after \
        else f"no longer loads {shadow.soname}"
    return (f"note: {shadow.test} now {now}{instead}: a library the repair gives looks it "
            "up itself")


def repaired_line(repair: Repair, bazel_args: Sequence[str], exit_code: int) -> str | None:
    """One line after Bazel's summary: how many tests the repair let load, and how to make
    that permanent (None when nothing was added)."""
    if repair.ld_library_path is None or exit_code not in (0, TESTS_FAILED):
        return None     # the tests did not run (a build error, an interruption, a kill)
    repaired = [t.label for t in repair.tests if t.missing_before and not t.missing_after]
    if not repaired:
        return None
    count = f"{len(repaired)} test{'s' if len(repaired) != 1 else ''}"
    args = shlex.join(bazel_args)
    outcome = "repaired" if exit_code == 0 else "given their libraries"
    return _text([f"bazel-ldfix: {count} {outcome}; make it permanent on this machine with "
                  f"`bazel-ldfix env --format bazelrc {args} >> .bazelrc`, or on every "
                  f"machine with the BUILD change `bazel-ldfix fix --write {args}`"])


def _reach_lines(test: Any) -> list[str]:
    """Why the flag may not reach a test, and the change to its rule that does."""
    from bazel_ldfix.bazel.testenv import Reach

    if test.rule_fix is None:
        return []
    if test.reach is Reach.NO:
        why = (f"the added --test_env cannot reach {test.label}: its rule sets {VARIABLE} "
               "(env or env_inherit), which wins over --test_env since Bazel 7.2")
    else:
        why = (f"the added --test_env may not reach {test.label}: its rule sets {VARIABLE} "
               "(env or env_inherit), which wins over --test_env if this Bazel (version "
               "unknown) is 7.2 or later")
    return [why, f"  fix its rule instead: {test.rule_fix}",
            "  or import the versioned files (`bazel-ldfix diagnose` prints the BUILD change)"]


# -- resolve ------------------------------------------------------------------------------

# Stand-ins in the lines, replaced by the escape sequences after names are escaped.
RED, DIM, RESET = "\ue000", "\ue001", "\ue002"
_COLOURS = {RED: "\x1b[31m", DIM: "\x1b[2m", RESET: "\x1b[0m"}


def resolution_document(res: Resolution) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "file": res.file,
        "error": res.error,
        "libraries": [
            {"soname": lib.name, "path": lib.path,
             "via": lib.via.value if lib.via else None,
             "needed_by": list(lib.needed_by), "error": lib.error,
             "tried": [] if lib.path else [
                 {"via": s.via.value, "dirs": list(s.dirs), "skipped": s.skipped}
                 for s in lib.steps],
             "rejected": [{"path": r.path, "reason": r.reason} for r in lib.rejected]}
            for lib in res.libraries],
        "missing": list(res.missing),
        "versions": [{"object": v.object, "required_by": v.required_by, "version": v.version,
                      "weak": v.weak, "fatal": v.fatal, "message": v.message}
                     for v in res.versions],
        "notes": list(res.notes),
    }


def resolutions_json(results: Sequence[Resolution]) -> str:
    docs = [resolution_document(r) for r in results]
    return _json(docs[0] if len(docs) == 1 else docs)


_SYSTEM_VIA = ("ld.so.cache", "default", "interpreter", "vdso")


def resolution_tree(res: Resolution, *, color: bool, verbose: bool = True,
                    unversioned: Mapping[str, Sequence[Unversioned]] | None = None) -> str:
    """A tree like libtree's: under each object, what it needs; each object is expanded
    where it first appears, later references say "see above".

    Without ``verbose``, libraries of the system (found through ld.so.cache or the default
    directories, the interpreter, the vDSO) are folded, as libtree folds them, unless
    something under them is missing. ``unversioned`` says, for a missing name, which
    searched directory holds its unversioned file and where the versioned one is.
    """
    red, dim, reset = (RED, DIM, RESET) if color else ("", "", "")
    children: dict[str, list[Library]] = {}
    unneeded: list[Library] = []
    for lib in res.libraries:
        for requester in lib.needed_by:
            children.setdefault(requester, []).append(lib)
        if not lib.needed_by:
            unneeded.append(lib)
    folded: dict[str, bool] = {}

    def system(lib: Library, trail: frozenset[str] = frozenset()) -> bool:
        if verbose or lib.path is None or lib.via is None or lib.via.value not in _SYSTEM_VIA:
            return False
        if lib.path in folded:
            return folded[lib.path]
        below = [k for k in children.get(lib.path, []) if k.path not in trail]
        folded[lib.path] = all(system(k, trail | {lib.path}) for k in below)
        return folded[lib.path]

    lines = [res.file]
    if res.info.has_dynamic and not res.info.needed:
        lines.append("  (no DT_NEEDED: needs no shared object)")
    elif not res.info.has_dynamic:
        lines.append("  statically linked")
    shown: set[int] = set()
    hidden: set[str] = set()

    def walk(parent: str, prefix: str) -> None:
        kids = []
        for lib in children.get(parent, []):
            if system(lib):
                hidden.add(lib.name)
            else:
                kids.append(lib)
        for i, lib in enumerate(kids):
            last = i == len(kids) - 1
            branch, more = ("└── ", "    ") if last else ("├── ", "│   ")
            if lib.path is None:
                problem = lib.error or "not found"
                lines.append(f"{prefix}{branch}{red}{lib.name} {problem}{reset}")
                for twin in (unversioned or {}).get(lib.name, ()):
                    lines.append(f"{prefix}{more}┊ {twin.dir} holds {twin.file}, whose SONAME "
                                 f"is {twin.soname}; no file there is named {twin.soname}")
                    lines.append(f"{prefix}{more}┊ " + (
                        f"the versioned file is at {twin.versioned}" if twin.versioned else
                        f"no {twin.soname} beside what {twin.file} leads to"))
                lines.extend(f"{prefix}{more}{dim}┊ {text}{reset}" for text in _explain(lib))
                continue
            via = f"[{lib.via.value}]" if lib.via else ""
            again = id(lib) in shown
            shown.add(id(lib))
            lines.append(f"{prefix}{branch}{lib.name} {via} {lib.path}"
                         + (f" {dim}(see above){reset}" if again else ""))
            if not again and lib.path != parent:
                walk(lib.path, prefix + more)

    walk(res.file, "  ")
    for lib in unneeded:
        if system(lib):
            hidden.add(lib.name)
        else:
            lines.append(f"  {dim}{lib.name} [{lib.via.value if lib.via else ''}]{reset}")
    hidden |= {lib.name for lib in res.libraries if system(lib)}
    if hidden:
        lines.append(f"  {dim}{len(hidden)} system librar{'ies' if len(hidden) != 1 else 'y'} "
                     f"not shown ({', '.join(sorted(hidden))}); -v shows them{reset}")
    for v in res.versions:
        colour = red if v.fatal else ""
        lines.append(f"  {colour}{v.message}{reset if colour else ''}"
                     + (" (a real start stops here)" if v.fatal else ""))
    if res.error:
        lines.append(f"{red}the load stops: {res.error}{reset}")
    lines += [f"  note: {note}" for note in res.notes]
    return _text(lines)


def _explain(lib: Library) -> list[str]:
    """Every search step in order, and why each candidate that exists was passed over."""
    out = ["searched, in this order:"]
    for n, step in enumerate(lib.steps, 1):
        if step.skipped:
            out.append(f"{n}. {step.via.value}: {step.skipped}")
        else:
            dirs = ", ".join(d or "(current directory)" for d in step.dirs)
            out.append(f"{n}. {step.via.value}: {dirs}")
    out += [f"rejected {r.path}: {r.reason}" for r in lib.rejected]
    if lib.needed_by:
        out.append(f"needed by {', '.join(lib.needed_by)}")
    return out


# -- check --------------------------------------------------------------------------------

def check_document(result: CheckResult) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "file": result.file,
        "interpreter": result.interp,
        "loads": result.loads,
        "objects": [{"soname": o.name, "path": o.path} for o in result.trace.objects],
        "missing": list(result.missing),
        "error": result.trace.error,
        "versions": list(result.trace.versions),
        "notes": [{"soname": n.soname, "note": n.what} for n in result.notes],
        "interpreter_note": result.interp_note,
        "loader_note": result.loader_note,
        "crash": result.crash,
        "disagreements": [{"soname": d.name, "model": d.model, "loader": d.loader,
                           "what": d.what} for d in result.disagreements],
    }


def checks_json(results: Sequence[CheckResult]) -> str:
    docs = [check_document(r) for r in results]
    return _json(docs[0] if len(docs) == 1 else docs)


def check_text(result: CheckResult, *, color: bool) -> str:
    red, reset = (RED, RESET) if color else ("", "")
    lines = [f"{result.file} (the real loader, {result.interp}):"]
    for obj in result.trace.objects:
        if obj.path is None:
            lines.append(f"  {red}{obj.name} => not found{reset}")
        elif obj.path == obj.name:
            lines.append(f"  {obj.name}")
        else:
            lines.append(f"  {obj.name} => {obj.path}")
    if result.trace.static:
        lines.append("  statically linked")
    if result.trace.error:
        lines.append(f"  {red}error while loading shared libraries: {result.trace.error}{reset}")
    for message in result.trace.versions:
        fatal = message in result.version_errors
        lines.append(f"  {red if fatal else ''}{message}{reset if fatal else ''}"
                     + (" (a real start stops here)" if fatal else ""))
    lines += [f"  note: {n.soname}: {n.what}" for n in result.notes]
    if result.interp_note:
        lines.append(f"  note: {result.interp_note}")
    if result.loader_note:
        lines.append(f"  note: {result.loader_note}")
    if result.crash:
        lines.append(f"{red}{result.crash}{reset}")
    elif result.disagreements:
        lines.append(f"{red}the model disagrees with the loader (a bug in bazel-ldfix, please "
                     f"report it):{reset}")
        lines += [f"  {d}" for d in result.disagreements]
    else:
        lines.append("the model agrees with the loader")
    return _text(lines)


def matrix_text(m: Matrix) -> str:
    width = max(len(r.label) for r in m.rows)
    lines = [f"{m.file}:"]
    for row in m.rows:
        if row.error:
            outcome = f"stops: {row.error}"
        elif row.missing:
            outcome = ", ".join(row.missing) + " missing"
        else:
            outcome = "all loaded"
        lines.append(f"  {row.label.ljust(width)} -> {outcome}")
    if m.smallest is None:
        lines.append("  no set of these directories loads everything")
    elif not m.smallest:
        lines.append("  smallest set: none needed")
    else:
        lines.append(f"  smallest set: {':'.join(m.smallest)}")
    return _text(lines)


def matrix_json(matrices: Sequence[Matrix]) -> str:
    docs = [{"version": JSON_VERSION, "file": m.file,
             "rows": [{"label": r.label, "dirs": list(r.dirs), "missing": list(r.missing),
                       "error": r.error} for r in m.rows],
             "smallest": list(m.smallest) if m.smallest is not None else None}
            for m in matrices]
    return _json(docs[0] if len(docs) == 1 else docs)


# -- locate -------------------------------------------------------------------------------

def locate_json(found: Mapping[str, Sequence[Copy]]) -> str:
    """``{soname: [{dir, machine, class, path, reason}...]}``, best first."""
    return _json({name: [{"dir": c.dir, "machine": c.machine_name, "class": c.class_name,
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
    return _text(lines)

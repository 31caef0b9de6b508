"""The repair of ``env`` and ``test`` for people and scripts: the flag, shell and .bazelrc
lines, JSON, the summary and the line after the run."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bazel_ldfix import PROG
from bazel_ldfix.bazel.exitcodes import TESTS_FAILED
from bazel_ldfix.given import TRY_IMPORT, USER_BAZELRC
from bazel_ldfix.loader.resolution import PassReason
from bazel_ldfix.pathlist import VARIABLE
from bazel_ldfix.repair.exposure import Exposure, ShadowCause
from bazel_ldfix.store import WAY_OUT

if TYPE_CHECKING:
    from bazel_ldfix.bazel.declaredinputs import Leftover
    from bazel_ldfix.repair.exposure import Shadowed
    from bazel_ldfix.repair.results import Repair, Stray
from bazel_ldfix.bazel import execution
from bazel_ldfix.bazel.testenv import Reach
from bazel_ldfix.render.common import (
    OUTPUT_BASE,
    abbreviate,
    dumps,
    text_of,
    to_jsonable,
    wrap,
)

SAID = "bazel-ldfix: "          # what the tool's own lines on stderr begin with
MORE = "bazel-ldfix:   "        # ... and the lines that go on with what one says


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
        "unlinked": {"cause": repair.unlinked_cause, "sonames": list(repair.unlinked),
                     "tests": list(repair.unlinked_tests),
                     "fix": WAY_OUT} if repair.unlinked else None,
        "links_dir": repair.links_dir,
        "links": [{"soname": link.soname, "target": link.target} for link in repair.links],
        "shadowed": to_jsonable(repair.shadowed),
        "ld_library_path": repair.ld_library_path,
        "flags": list(repair.flags),
        "skipped": [{"path": k.path, "kind": k.kind.value, "reason": k.reason}
                    for k in repair.skipped],
        "notes": list(repair.notes),
        "given_again": repair.given_again,
        "conflicts": to_jsonable(repair.conflicts),
        "groups": [{"labels": list(g.labels), "ld_library_path":
                    g.given.ld_library_path if g.given.changes else None,
                    "flags": list(g.flags), "links_dir": g.links_dir,
                    "links": [{"soname": link.soname, "target": link.target}
                              for link in g.links]} for g in repair.groups],
        "held_back": repair.held_back,
    })


def unlinked_line(repair: Repair) -> str | None:
    """One line: why tests that need a links directory are not repaired, and the way out
    (None: none is left so)."""
    tests = repair.unlinked_tests
    if not repair.unlinked or not tests:
        return None
    one = len(tests) == 1
    return (f"{repair.unlinked_cause}: the {len(tests)} test{'' if one else 's'} that "
            f"need{'s' if one else ''} a links directory {'is' if one else 'are'} not "
            f"repaired; {WAY_OUT}")


def repair_flags(repair: Repair) -> str:
    return "\n".join(shlex.quote(f) for f in repair.flags)


SHELL_CAVEAT = ("this export is for running a test binary by hand; do not export it in the "
                "shell that runs Bazel: without --incompatible_strict_action_env (the default "
                "before Bazel 9) the client's PATH and LD_LIBRARY_PATH are part of every "
                "action's environment, so changing either rebuilds everything; give Bazel "
                "--test_env instead (--format flags or bazelrc)")


def caveat_lines(caveat: str) -> str:
    """A caveat on stderr, wrapped to lines that fit."""
    return text_of(wrap(caveat, SAID, MORE))


def links_caveat(prog: str = PROG) -> str:
    """Why a value that names a links directory does not last; ``prog`` runs the tool."""
    return ("this value names a links directory of bazel-ldfix's own (removed once unused "
            "for 30 days, see `links/` in docs/security.md); the BUILD change "
            f"(`{prog} fix --write`) is the form that lasts")


def repair_shell(repair: Repair) -> str:
    return repair.given.export_line() if repair.given.changes else ""


def repair_bazelrc(repair: Repair) -> str:
    # Quoted for Bazel's rc tokenizer; a value it cannot carry raises UnquotableError.
    return repair.given.bazelrc_line() if repair.given.changes else ""


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


# A group of tests that miss the same names gets one line, naming this many of them, once
# it has more than this many: a thousand tests that miss one library are one line.
NAMED = 3


def _missing_lines(tests: Sequence[Any], verb: str,
                   names_of: Callable[[Any], tuple[str, ...]],
                   after: Callable[[Any], list[str]]) -> list[str]:
    """``LABEL VERB NAMES`` for each test that misses names, in the tests' order, with
    ``after(test)`` following each; the tests of a group of more than :data:`NAMED` that
    miss the same names share one line, where the group's first test is (``env --format
    json`` lists every test)."""
    groups: dict[frozenset[str], list[str]] = {}   # the same names, in any order
    for test in tests:
        names = names_of(test)
        if names:
            groups.setdefault(frozenset(names), []).append(test.label)
    lines: list[str] = []
    told: set[frozenset[str]] = set()
    for test in tests:
        names = names_of(test)
        key = frozenset(names)
        labels = groups.get(key, []) if names else []
        if 0 < len(labels) <= NAMED:
            lines.append(f"{test.label} {verb} {', '.join(names)}")
        elif labels and key not in told:
            told.add(key)   # in the order the group's first test has them
            lines.append(f"{len(labels)} tests {verb} {', '.join(names)}: "
                         f"{', '.join(labels[:NAMED])} and {len(labels) - NAMED} more")
        lines += after(test)
    return lines


def repair_summary(repair: Repair, prog: str = PROG,
                   leftovers: Sequence[tuple[str, Sequence[Leftover]]] = ()) -> str:
    """What was missing and what is added, for stderr before ``bazel test`` runs, then a
    warning per test that loads here only what an earlier build left (``leftovers``: the
    label and those files); the commands it suggests start with ``prog``.

    The output_base is written once, then ``$OUTPUT_BASE``; a candidate passed over only
    because it is the same file as the one chosen (a local repository's symlink) is not
    listed.
    """
    lines = [f"note: {skip.note()}" for skip in repair.skipped]
    indirect = _indirect(repair)
    lines += _missing_lines(
        repair.tests, "cannot load",
        lambda t: tuple(_direct_first(t.missing_before, indirect)),
        lambda t: [f"{t.label}: the loader stops: {t.error}"] if t.error else [])
    for m in () if repair.groups else repair.missing:
        if m.dir and m.exposure is Exposure.LINK:
            lines.append(f"  {m.soname} is in {m.dir}, given by a link: {m.why}")
        elif m.dir and m.exposure in (Exposure.WITHHELD, Exposure.UNLINKED):
            lines.append(f"  {m.soname} is in {m.dir}, not given: {m.why}")
        elif m.dir:
            lines.append(f"  {m.soname} is in {m.dir}")
        else:
            lines.append(f"  {m.soname} exists nowhere under {repair.output_base}/external "
                         f"(needed by {', '.join(m.needed_by)})")
        lines += [f"    passed over {p.path}: {p.reason}" for p in m.passed_over
                  if p.kind is not PassReason.SAME_FILE]
    # (Where nothing is added at all, the lines above say what is missing and why.)
    lines += _missing_lines(repair.tests, "will still miss",
                            lambda t: tuple(t.missing_after)
                            if repair.groups or repair.given.changes else (),
                            lambda t: _reach_lines(t, prog))
    # (A stray the exposure told of already, a library given looking a name up itself,
    # is said once, by its note below.)
    # (Nor is a library left out for want of a links directory: its own line says why.)
    told = {(s.test, s.soname) for s in repair.shadowed}
    unlinked = set(repair.unlinked)
    lines += [_stray_line(t.label, s) for t in repair.tests for s in t.strays
              if (t.label, s.soname) not in told and s.soname not in unlinked]
    lines += [f"note: {note}" for note in repair.notes]
    unlinked_said = unlinked_line(repair)
    if unlinked_said:
        lines += [line.removeprefix(SAID) for line in wrap(unlinked_said, SAID, MORE)]
    if repair.given_again:
        lines += [line.removeprefix(SAID) for line in wrap(
            "note: its repair is given again: nothing it read has changed since the last run "
            "of the same command (--no-cache makes it anew)", SAID, MORE)]
    lines += [_shadowed_line(shadow) for shadow in repair.shadowed]
    if repair.groups:
        lines += _group_lines(repair)
    elif repair.given.changes:
        lines.append(f"adding {repair.given.flag}")
        if repair.base:
            lines.append(f"  (keeps {repair.base_source})")
        if repair.links_dir:
            lines += [f"  {repair.links_dir}/{link.soname} -> {link.target}"
                      for link in repair.links]
    elif not repair.tests and repair.notes:
        lines.append("no test could be examined; nothing to add")
    elif not repair.missing:
        # What the tests link is all that is read: a library a test opens at run time by
        # name (dlopen, ctypes) is in no ELF file, and only its run can tell.
        lines.append(f"nothing to add for what the {'examined ' if repair.notes else ''}"
                     "tests link; libraries opened at run time are not seen")
    for label, found in leftovers:
        lines += leftover_lines(label, found, prog)
    # A rule's env to paste keeps the real path; the rest is read, not pasted.
    pasted = {f"  fix its rule instead: {t.rule_fix}" for t in repair.tests
              if t.rule_fix}
    if sum(line.count(repair.output_base) for line in lines if line not in pasted) > 1:
        lines = [f"{OUTPUT_BASE} is {repair.output_base}"] + [
            line if line in pasted else abbreviate(line, repair.output_base) for line in lines]
    # Each line escaped as it is: a name holding a newline stays on its own line.
    return text_of([f"bazel-ldfix: {line}" for line in lines])


def leftover_lines(label: str, found: Sequence[Leftover], prog: str = PROG) -> list[str]:
    """The warning for a test that passes here only through files Bazel does not declare:
    which files, one a line, then why that matters, wrapped."""
    names = ", ".join(f.soname for f in found)
    files = "a file" if len(found) == 1 else "files"
    lines = [f"warning: {label} loads {names} from {files} no rule declares for it now:"]
    lines += [f"  {f.path}" if len(found) == 1 else f"  {f.soname}: {f.path}" for f in found]
    why = ("an earlier build left it in bazel-out: the test passes here by accident, and "
           "fails under remote execution and after `bazel clean`; "
           f"`{prog} fix` makes the BUILD change")
    return lines + [line.removeprefix(SAID) for line in wrap(why, MORE, MORE)]


def leftover_warnings(leftovers: Sequence[tuple[str, Sequence[Leftover]]],
                      prog: str = PROG) -> str:
    """The warnings of :func:`leftover_lines` alone, for stderr (under ``--quiet``)."""
    return text_of([f"{SAID}{line}" for label, found in leftovers
                    for line in leftover_lines(label, found, prog)])


def _group_lines(repair: Repair) -> list[str]:
    """Why the run is split, then each group: its tests, where its files are, its flag."""
    lines = [f"{c.label} needs {c.soname} from {os.path.dirname(c.own)}, not from "
             f"{os.path.dirname(c.chosen)}" if c.chosen else
             f"{c.label} needs {c.soname} from {os.path.dirname(c.own)}, which a value "
             "shared with the other tests cannot give it" for c in repair.conflicts]
    if not repair.conflicts:
        lines.append(f"a test's own {VARIABLE} (its rule's env) is never given to another "
                     "test")
    lines.append(f"one {VARIABLE} cannot serve every test: the run is split into "
                 f"{len(repair.groups)} `bazel test` runs")
    for number, group in enumerate(repair.groups, 1):
        shown = ", ".join(group.labels[:3]) + (
            f" and {len(group.labels) - 3} more" if len(group.labels) > 3 else "")
        lines.append(f"run {number}: {shown}")
        lines += [f"  {m.soname} is in {m.dir}" if m.dir else
                  f"  {m.soname} exists nowhere under {repair.output_base}/external"
                  for m in group.missing
                  if m.exposure not in (Exposure.WITHHELD, Exposure.UNLINKED)]
        lines.append(f"  adding {group.given.flag}" if group.given.changes
                     else "  adding nothing: each test keeps the value it has")
        if group.given.changes and group.links_dir:
            lines += [f"  {group.links_dir}/{link.soname} -> {link.target}"
                      for link in group.links]
    return lines


def group_flags(repair: Repair) -> str:
    """One line per group: its flag, ``--``, its tests (shell words)."""
    return "\n".join(shlex.join([*g.flags, "--", *g.labels]) for g in repair.groups)


def conflict_error(repair: Repair, prog: str = PROG) -> str:
    """Why no one value (a .bazelrc line, an export) serves the run."""
    if not repair.conflicts:
        return (f"the tests of this run need {len(repair.groups)} values of {VARIABLE}: "
                "a test keeps its own value (its rule's env), which no other test may be "
                f"given; `{prog} test` runs each group on its own (`--format flags` or "
                "`json` lists the groups)")
    c = repair.conflicts[0]
    more = f" (and {len(repair.conflicts) - 1} more)" if len(repair.conflicts) > 1 else ""
    return (f"{c.label} needs {c.soname} from {os.path.dirname(c.own)}, while another "
            f"test of the run needs it from {os.path.dirname(c.chosen or '')}{more}: one "
            f"{VARIABLE} cannot serve both; `{prog} test` runs each group on its own "
            "(`--format flags` or `json` lists the groups)")


def _stray_line(label: str, stray: Stray) -> str:
    """One line: a test that, even planned alone, would not load exactly its own file."""
    loads = f"loads {stray.soname} from {stray.loads}" if stray.loads \
        else f"no longer loads {stray.soname}"
    return (f"warning: {label} {loads}, not from {stray.own}, the file chosen for it: "
            f"no {VARIABLE} gives it exactly its own libraries")


def _shadowed_line(shadow: Shadowed) -> str:
    """One line: a test loads another copy of a name than it would otherwise."""
    instead = f" instead of {shadow.before}" if shadow.before else ""
    if shadow.cause is ShadowCause.CALLER:
        return (f"note: {shadow.test} loads {shadow.soname} from {shadow.after}{instead}: "
                f"its own {VARIABLE} entry {shadow.directory} offers it first, and is kept")
    now = f"loads {shadow.soname} from {shadow.after}" if shadow.after \
        else f"no longer loads {shadow.soname}"
    return (f"note: {shadow.test} now {now}{instead}: a library the repair gives looks it "
            "up itself")


def repaired_line(repair: Repair, bazel_args: Sequence[str], exit_code: int,
                  rerun_ok: Sequence[str] = (), revealed: Sequence[str] = (),
                  prog: str = PROG) -> str | None:
    """The lines after Bazel's summary: how many tests the repair and the rerun let load,
    what they were given, and the commands that make it permanent, each whole on a line
    (None when nothing was added). ``rerun_ok`` are the tests the rerun let load,
    ``revealed`` the sonames they were given; ``exit_code`` is that of the two runs
    together."""
    if exit_code not in (0, TESTS_FAILED):
        return None     # the tests did not run (a build error, an interruption, a kill)
    def given(t: Any) -> bool:
        # Proved to load its own files in the value its run gives (repair/plan.py).
        return repair.given_to(t.label).changes and not t.strays

    repaired = [*(t.label for t in repair.tests
                  if given(t) and t.missing_before and not t.missing_after), *rerun_ok]
    repaired = list(dict.fromkeys(repaired))
    if not repaired:
        return None
    linked = [s for t in repair.tests if given(t) and t.label in repaired
              and not t.missing_after for s in t.missing_before]
    opened = [s for s in dict.fromkeys(revealed) if s not in linked]
    names = ", ".join(dict.fromkeys((*linked, *opened)))
    count = f"{len(repaired)} test{'s' if len(repaired) != 1 else ''}"
    args = shlex.join(bazel_args)
    outcome = "repaired" if exit_code == 0 else \
        f"given {'its' if len(repaired) == 1 else 'their'} libraries"
    it = "it" if len(opened) == 1 else "them"
    if not linked:
        return text_of(wrap(f"{count} {outcome} by the rerun ({names}); `env` and `fix` do "
                            f"not see {it}, opened at run time: the rerun's --test_env gave "
                            f"{it}", SAID, MORE))
    lines = wrap(f"{count} {outcome} ({names}); to make it permanent:", SAID, MORE)
    if not repair.groups:   # (one .bazelrc line cannot give a split run's values)
        lines += wrap(f"on this machine only: `{prog} env --format bazelrc {args} >> "
                      f"{USER_BAZELRC}` (a file not committed; .bazelrc reads it with the line "
                      f"`{TRY_IMPORT}`)", MORE, MORE + "  ")
    lines += wrap(f"on every machine: the BUILD change `{prog} fix {args}` shows "
                  "(--write makes it)", MORE, MORE + "  ")
    if opened:
        lines += wrap(f"`env` and `fix` do not see {', '.join(opened)}, opened at run time: "
                      f"the rerun's --test_env gave {it}", MORE, MORE + "  ")
    return text_of(lines)


def _reach_lines(test: Any, prog: str) -> list[str]:
    """Why the flag may not reach a test, and the change to its rule that does."""
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
            f"  or import the versioned files (`{prog} diagnose` prints the BUILD change)"]


def held_back_line(repair: Repair, prog: str = PROG) -> str | None:
    """Under remote execution the repair gives no path of this machine: the line why
    (None: it gives them)."""
    return f"{SAID}{execution.remote_refusal(prog)}" if repair.held_back else None

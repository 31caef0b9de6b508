"""The plan of a run: each test's files chosen for it alone, then the run's values proved.

Bazel runs a set of tests, and one ``--test_env`` reaches every test of a ``bazel test``.
So the plan works in three steps:

1. The tests are grouped by the value each must keep, its base
   (:meth:`~bazel_ldfix.bazel.testenv.TestEnvironment.base_of`): a test whose own rule
   ``env`` the flag replaces keeps that value, and no other test is given it.
2. Each group's rounds (:mod:`bazel_ldfix.repair.rounds`) find what its tests miss and
   the value that gives it.
3. The proof: for every test, the model, given the exact value of its group (every level
   of DT_NEEDED, the runfiles' objects), must load exactly the files chosen for the test
   alone: each library it loaded before from the same file, each one it missed from the
   file its own libraries lead to (:func:`own_file`). A test the proof refuses leaves its
   group, and both parts are planned again, until the proof holds for every test of every
   group (or a test is alone, when what remains is said in its ``strays``).

Each group is one ``bazel test`` of its own (``Repair.groups``). The words "repaired",
"given its libraries" and "will still miss" come from the proved result. The result is
made here, once: the run's options and notes, and the rule for remote execution (no
path of this machine is given to a remote executor) are part of it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Hashable, Iterable, Sequence

from bazel_ldfix import elf
from bazel_ldfix.bazel import execution
from bazel_ldfix.bazel.testenv import Reach, TestEnvironment
from bazel_ldfix.given import Given
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.outputbase import index
from bazel_ldfix.repair.exposure import Exposure
from bazel_ldfix.repair.fallback import Skipped
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import (
    Conflict,
    Group,
    Missing,
    Part,
    Repair,
    Stray,
    TestInput,
)
from bazel_ldfix.repair.rounds import plan_rounds
from bazel_ldfix.repair.scanresult import Outcome
from bazel_ldfix.repair.setting import PlanContext
from bazel_ldfix.repair.testread import Subject


def plan_repair(tests: Sequence[TestInput], env: TestEnvironment, context: PlanContext,
                *, search: bool = True, given: Sequence[index.Choice] = ()) -> Repair:
    """The repair of a run of ``tests``: what each cannot load, the value (or, where one
    value cannot serve them all, the values of groups) that gives each exactly its own
    files, proved for every test. ``search`` and ``given`` are those of
    :func:`~bazel_ldfix.repair.rounds.plan_rounds`."""
    # One set of models and one host for every group's rounds and for the proof.
    if context.models is None or context.host is None:
        context = dataclasses.replace(context, models=context.models or Models(),
                                      host=context.host or host_header())
    assert context.models is not None and context.host is not None
    prover = _Prover(context)
    parts: list[tuple[list[TestInput], Part]] = []
    conflicts: dict[tuple[str, str], Conflict] = {}
    for base, members in _by_base(tests, env).items():
        pending = [members]
        while pending:
            work = pending.pop(0)
            part, refused = _proved(work, env, context, base, prover, search, given)
            if not refused or len(work) == 1:
                parts.append((work, part))
                continue
            for t in part.tests:
                for s in t.strays if t.label in refused else ():
                    conflicts.setdefault((t.label, s.soname),
                                         Conflict(t.label, s.soname, s.loads, s.own))
            kept = [t for t in work if t.label not in refused]
            if kept:
                # The tests kept are planned again without the others (their value may
                # then be smaller), and those refused together, apart from them.
                pending[:0] = [kept, [t for t in work if t.label in refused]]
                continue
            # Every test refused: the first planned alone. Proved so, it leaves; still
            # refused, the split does not help (what it loads comes with its own
            # libraries), and the tests stay together, their strays said.
            alone, still = _proved(work[:1], env, context, base, prover, search, given)
            if still:
                parts.append((work, part))
            else:
                parts.append((work[:1], alone))
                pending.insert(0, work[1:])
    return result(tests, env, context, _joined(parts, env), tuple(conflicts.values()))


def _proved(work: Sequence[TestInput], env: TestEnvironment, context: PlanContext,
            base: tuple[str, ...], prover: _Prover, search: bool,
            given: Sequence[index.Choice]) -> tuple[Part, set[str]]:
    """One group's rounds, with each test's strays; the tests the proof refuses."""
    part = plan_rounds(work, env, context, base, search=search, given=given)
    if not search:
        return part, set()  # nothing looked for, nothing given: what is missing, as it is
    strays, refused = prover.strays(work, part)
    if any(strays.values()):
        part = dataclasses.replace(part, tests=tuple(
            dataclasses.replace(t, strays=strays.get(t.label, ())) for t in part.tests))
    return part, refused


def _by_base(tests: Sequence[TestInput], env: TestEnvironment
             ) -> dict[tuple[str, ...], list[TestInput]]:
    """The tests by the value a flag must keep for them, in the order they come. A test
    the flag does not reach (its rule's value wins) goes with the flags' own base."""
    out: dict[tuple[str, ...], list[TestInput]] = {}
    for t in tests:
        key = env.base if env.reaches(t.label) is Reach.NO else env.base_of(t.label)
        out.setdefault(key, []).append(t)
    return out


def _joined(parts: list[tuple[list[TestInput], Part]], env: TestEnvironment
            ) -> list[tuple[list[TestInput], Part]]:
    """The groups, those of one value as one: each test's proof holds in its value
    whoever shares it. Those that add nothing are one group too: without a flag, each of
    their tests keeps its own value (of several bases, the group's value says the flags'
    base)."""
    by_value: dict[Given | None, list[tuple[list[TestInput], Part]]] = {}
    for members, part in parts:
        by_value.setdefault(part.given if part.given.changes else None, []).append(
            (members, part))
    out = []
    for value, same in by_value.items():
        first = same[0][1]
        # Tests of other bases that add nothing: the flags' base speaks for none of them.
        one = len({p.given.base for _, p in same}) == 1
        out.append(([t for m, _ in same for t in m], dataclasses.replace(
            first, given=value or (first.given if one else Given(env.base)),
            tests=tuple(r for _, p in same for r in p.tests),
            missing=tuple(m for _, p in same for m in p.missing),
            notes=tuple(n for _, p in same for n in p.notes),
            skipped=tuple(s for _, p in same for s in p.skipped),
            links=tuple(link for _, p in same for link in p.links),
            shadowed=tuple(s for _, p in same for s in p.shadowed))))
    # The groups that add something first: the user's command less the others runs first.
    return sorted(out, key=lambda group: not group[1].given.changes)


class _Prover:
    """Whether a group's value gives each of its tests exactly the files chosen for it
    alone, by the model (the outcomes the rounds computed, in that value)."""

    def __init__(self, context: PlanContext) -> None:
        assert context.models is not None
        self.context = context
        self.session: Models = context.models
        self.host = context.host
        self._proved: set[Hashable] = set()   # families of twins proved exact

    def strays(self, tests: Sequence[TestInput], part: Part
               ) -> tuple[dict[str, tuple[Stray, ...]], set[str]]:
        """Each test's strays in the group's value (no entry: none), and the tests they
        refuse: those with a stray another test's choice can cause (a library missed
        before, loaded from another file or not at all). A library loaded before that a
        given library now looks up elsewhere is a stray too, but the test's own: the
        rounds keep every other load the same (:mod:`exposure`), and it stays whoever
        shares the value."""
        out: dict[str, tuple[Stray, ...]] = {}
        refused: set[str] = set()
        host = self.host
        assert host is not None     # plan_repair settles it
        for test in tests:
            subject = self.session.subject(test, host)
            before, after = part.before.get(test.label), part.after.get(test.label)
            missed = tuple(n for p, n, _ in before.entries if p is None) if before else ()
            if before is None or after is None or (after is before and not missed):
                continue    # not modelled, or nothing changed for it and nothing missed
            # A twin's load is the other's, moved to its own tree: in the same value,
            # with the same names missed, its proof is the other's.
            twin = self.session.twin_key(subject)
            family = None if twin is None else (twin, part.given, missed)
            if family is not None and family in self._proved:
                continue
            kept, new = self._strays_of(subject, before, after, part)
            if kept or new:
                out[test.label] = (*kept, *new)
            if new:
                refused.add(test.label)
            elif family is not None and not kept:
                self._proved.add(family)
        return out, refused

    def _strays_of(self, subject: Subject, before: Outcome, after: Outcome, part: Part
                   ) -> tuple[tuple[Stray, ...], tuple[Stray, ...]]:
        """The strays of libraries loaded before, and of those missed before."""
        same = self.session.same_file
        had = {name: path for path, name, _ in before.entries if path is not None}
        now: dict[str, str | None] = {}
        for path, name, _ in after.entries:
            now.setdefault(name, path)
        kept = tuple(Stray(name, now[name], path) for name, path in had.items()
                     if name in now and (now[name] is None or not same(now[name] or "", path)))
        # Each name missed before, in the order the loader meets it: the file the test's
        # own libraries lead to, those it loaded before and those of its own found so far.
        mine = [path for path in had.values()]
        new: list[Stray] = []
        for name, loads in now.items():
            if name in had:
                continue
            own = own_file(subject, mine, name, after.header or part.expect, self.context)
            if own is None:
                continue    # no usable copy: it misses it alone too
            if loads is not None and same(loads, own):
                mine.append(loads)
            else:
                new.append(Stray(name, loads, own))
        return kept, tuple(new)


def own_file(subject: Subject, loaded: Sequence[str], name: str,
             expect: elf.ElfHeader | None, context: PlanContext) -> str | None:
    """The file of ``name`` that a test's own libraries lead to (``loaded``: those it
    loads that are its own), as the rounds choose for a test alone
    (:func:`index.locate` beside them, then the whole index; a file that carries the name
    under another one, given by a link). None: no usable copy."""
    models = context.models
    assert models is not None
    if expect is None:
        return None
    dirs = models.dirs_of(subject, loaded)
    roots = [os.path.join(context.output_base, "external")]
    choice = index.locate([name], roots, expect, dirs, context.told,
                          store=context.store, memo=models.memo,
                          cuda=context.cuda)[name]
    if choice.path is not None:
        return choice.path
    other = index.renamed(name, dirs, expect, models.memo, context.cuda)
    return other.path if other is not None else None


def result(tests: Sequence[TestInput], env: TestEnvironment, context: PlanContext,
            parts: list[tuple[list[TestInput], Part]], conflicts: tuple[Conflict, ...]
            ) -> Repair:
    """The run's result, made once: one value, or one per group; held back under remote
    execution (one plain run, as Bazel's own)."""
    run = context.run
    remote = execution.of(run.options) is execution.Execution.REMOTE \
        and not context.setting.force_local_path
    order = {t.label: at for at, t in enumerate(tests)}
    results = sorted((r for _, p in parts for r in p.tests),
                     key=lambda r: order.get(r.label, len(order)))
    missing: dict[tuple[str, str | None], Missing] = {}
    for _, p in parts:
        for m in p.missing:
            was = missing.setdefault((m.soname, m.path), m)
            if was is not m:    # found for tests of two groups: needed by both
                missing[(m.soname, m.path)] = dataclasses.replace(
                    was, needed_by=tuple(dict.fromkeys((*was.needed_by, *m.needed_by))))
    skipped: dict[str, Skipped] = {}
    for _, p in parts:
        for s in p.skipped:
            skipped.setdefault(s.path, s)
    split = len(parts) > 1 and not remote
    groups = tuple(Group(tuple(t.label for t in members), p.given, p.tests, p.missing,
                         p.links_dir, p.links)
                   for members, p in parts) if split else ()
    # One value for the run, or (split, or held back) none: each group says its own, and
    # no test's own base stands for another's.
    only = parts[0][1] if len(parts) == 1 and not remote else None
    given = only.given if only is not None else Given(env.base)
    # (A base other than the flags' is a test's own, which its rule's env gave it.)
    source = env.source if given.base == env.base else "the env attribute of its test rule"
    return Repair(
        context.output_base, source, tuple(results), tuple(missing.values()), given,
        options=tuple(run.options),
        notes=tuple(dict.fromkeys((*run.notes, *(n for _, p in parts for n in p.notes)))),
        skipped=tuple(skipped.values()), patterns=tuple(run.patterns),
        links=only.links if only is not None else (),
        links_dir=only.links_dir if only is not None else None,
        shadowed=tuple(s for _, p in parts for s in p.shadowed),
        conflicts=conflicts if split else (), groups=groups,
        held_back=remote and any(p.given.changes for _, p in parts),
        unlinked_cause=_unlinked_cause(missing.values(), context))


def _unlinked_cause(missing: Iterable[Missing], context: PlanContext) -> str | None:
    """Why the libraries that need a link are not given: the per-user directory cannot be
    made, or the links directory failed (None: none is left out so)."""
    unlinked = [m for m in missing if m.exposure is Exposure.UNLINKED]
    if not unlinked:
        return None
    return context.links_problem or unlinked[0].why

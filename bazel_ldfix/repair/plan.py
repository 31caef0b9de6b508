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
   file its own libraries lead to (:func:`own_files`). A test the proof refuses leaves its
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
from collections.abc import Hashable, Mapping, Sequence

from bazel_ldfix import elf
from bazel_ldfix.bazel import execution
from bazel_ldfix.bazel.testenv import Reach, TestEnvironment
from bazel_ldfix.given import Given
from bazel_ldfix.outputbase import index
from bazel_ldfix.repair.context import PlanContext
from bazel_ldfix.repair.failopen import Skipped
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.outcome import Outcome
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
from bazel_ldfix.repair.subject import Subject


def plan_repair(tests: Sequence[TestInput], env: TestEnvironment, context: PlanContext,
                *, search: bool = True, given: Sequence[index.Choice] = ()) -> Repair:
    """The repair of a run of ``tests``: what each cannot load, the value (or, where one
    value cannot serve them all, the values of groups) that gives each exactly its own
    files, proved for every test. ``search`` and ``given`` are those of
    :func:`~bazel_ldfix.repair.rounds.plan_rounds`."""
    if context.session is None:
        context = dataclasses.replace(context, session=Models())
    assert context.session is not None
    prover = _Prover(context)
    parts: list[tuple[list[TestInput], Part]] = []
    conflicts: list[Conflict] = []
    for base, members in _by_base(tests, env).items():
        pending = [members]
        while pending:
            work = pending.pop(0)
            part = plan_rounds(work, env, context, base, search=search, given=given)
            strays = prover.strays(work, part)
            part = _with_strays(part, strays)
            refused = [t for t in work if strays.get(t.label)]
            if not refused or len(work) == 1:
                parts.append((work, part))
                continue
            conflicts += [Conflict(t.label, s.soname, s.loads, s.own)
                          for t in refused for s in strays[t.label]]
            kept = [t for t in work if not strays.get(t.label)]
            # The tests kept are planned again without the others (their value may then
            # be smaller), and those refused together, apart from them. When every test
            # is refused, the first is planned alone, which always ends.
            pending[:0] = [kept, refused] if kept else [refused[:1], refused[1:]]
    return result(tests, env, context, _joined(parts), tuple(conflicts))


def _by_base(tests: Sequence[TestInput], env: TestEnvironment
             ) -> dict[tuple[str, ...], list[TestInput]]:
    """The tests by the value a flag must keep for them, in the order they come. A test
    the flag does not reach (its rule's value wins) goes with the flags' own base."""
    out: dict[tuple[str, ...], list[TestInput]] = {}
    for t in tests:
        key = env.base if env.reaches(t.label) is Reach.NO else env.base_of(t.label)
        out.setdefault(key, []).append(t)
    return out


def _with_strays(part: Part, strays: Mapping[str, tuple[Stray, ...]]) -> Part:
    if not any(strays.values()):
        return part
    tests = tuple(dataclasses.replace(t, strays=strays.get(t.label, ())) for t in part.tests)
    return dataclasses.replace(part, tests=tests)


def _joined(parts: list[tuple[list[TestInput], Part]]) -> list[tuple[list[TestInput], Part]]:
    """The groups, those that add nothing as one: without a flag, each test of theirs
    keeps its own value, so one ``bazel test`` serves them all."""
    changing = [(m, p) for m, p in parts if p.given.changes]
    plain = [(m, p) for m, p in parts if not p.given.changes]
    if len(plain) <= 1:
        return parts
    members = [t for m, _ in plain for t in m]
    first = plain[0][1]
    merged = dataclasses.replace(
        first, tests=tuple(r for _, p in plain for r in p.tests),
        missing=tuple(m for _, p in plain for m in p.missing),
        notes=tuple(n for _, p in plain for n in p.notes),
        skipped=tuple(s for _, p in plain for s in p.skipped),
        shadowed=tuple(s for _, p in plain for s in p.shadowed))
    return [*changing, (members, merged)] if changing else [(members, merged)]


class _Prover:
    """Whether a group's value gives each of its tests exactly the files chosen for it
    alone, by the model (the outcomes the rounds computed, in that value)."""

    def __init__(self, context: PlanContext) -> None:
        assert context.session is not None
        self.context = context
        self.session: Models = context.session
        self.host = context.host
        self._proved: set[Hashable] = set()   # families of twins proved exact

    def strays(self, tests: Sequence[TestInput], part: Part) -> dict[str, tuple[Stray, ...]]:
        """Each test's strays in the group's value (no entry: none)."""
        out: dict[str, tuple[Stray, ...]] = {}
        host = self.host or _host()
        for test in tests:
            subject = self.session.subject(test, host)
            before, after = part.before.get(test.label), part.after.get(test.label)
            if before is None or after is None or after is before:
                continue    # not modelled, or nothing changed for it
            # A twin's load is the other's, moved to its own tree: in the same value,
            # with the same names missed, its proof is the other's.
            twin = self.session.twin_key(subject)
            missed = tuple(n for p, n, _ in before.entries if p is None)
            family = None if twin is None else (twin, part.given, missed)
            if family is not None and family in self._proved:
                continue
            found = self._strays_of(subject, before, after, part)
            if found:
                out[test.label] = found
            elif family is not None:
                self._proved.add(family)
        return out

    def _strays_of(self, subject: Subject, before: Outcome, after: Outcome, part: Part
                   ) -> tuple[Stray, ...]:
        same = self.session.same_file
        had = {name: path for path, name, _ in before.entries if path is not None}
        now = {name: path for path, name, _ in after.entries}
        strays: list[Stray] = []
        for name, path in had.items():
            if name in now and (now[name] is None or not same(now[name] or "", path)):
                strays.append(Stray(name, now[name], path))
        new = [name for name, path in now.items() if path is not None and name not in had]
        if new:
            own = own_files(subject, after, new, part.expect, self.context)
            for name in new:
                loads, mine = now[name], own.get(name)
                if loads is not None and mine is not None and not same(loads, mine):
                    strays.append(Stray(name, loads, mine))
        return tuple(strays)


def own_files(subject: Subject, outcome: Outcome, names: Sequence[str],
              expect: elf.ElfHeader | None, context: PlanContext) -> dict[str, str | None]:
    """The file of each name that the test's own libraries lead to, as the rounds choose
    for a test alone (:func:`index.locate` beside them, then the whole index; a file
    that carries the name under another one, given by a link). None: no usable copy."""
    session = context.session
    assert session is not None
    setting = context.setting
    header = outcome.header or expect
    if header is None:
        return {}
    dirs = session.test_dirs(subject, outcome)
    roots = [os.path.join(context.output_base, "external")]
    located = index.locate(names, roots, header, dirs, setting.on_error,
                           cache_dir=setting.cache_dir, memo=session.memo, cuda=setting.cuda)
    out: dict[str, str | None] = {}
    for name, choice in located.items():
        if choice.path is None:
            other = index.renamed(name, dirs, header, session.memo, setting.cuda)
            out[name] = other.path if other is not None else None
        else:
            out[name] = choice.path
    return out


def _host() -> elf.ElfHeader:
    from bazel_ldfix.loader.resolve import host_header

    return host_header()


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
            missing.setdefault((m.soname, m.path), m)
    skipped: dict[str, Skipped] = {}
    for _, p in parts:
        for s in p.skipped:
            skipped.setdefault(s.path, s)
    first = parts[0][1] if parts else None
    split = len(parts) > 1 and not remote
    groups = tuple(Group(tuple(t.label for t in members), p.given, p.tests, p.missing)
                   for members, p in parts) if split else ()
    given = first.given if first is not None else Given(env.base)
    if remote and given.changes:
        given = Given(env.base)
    links = [link for _, p in parts for link in p.links]
    # (A base other than the flags' is a test's own, which its rule's env gave it.)
    source = env.source if given.base == env.base else "the env attribute of its test rule"
    return Repair(
        context.output_base, source, tuple(results), tuple(missing.values()), given,
        options=tuple(run.options),
        notes=tuple(dict.fromkeys((*run.notes, *(n for _, p in parts for n in p.notes)))),
        skipped=tuple(skipped.values()), patterns=tuple(run.patterns),
        links=tuple(links),
        links_dir=next((p.links_dir for _, p in parts if p.links_dir), None),
        shadowed=tuple(s for _, p in parts for s in p.shadowed),
        conflicts=conflicts if split else (), groups=groups,
        held_back=remote and any(p.given.changes for _, p in parts))

"""The rounds of one group's repair: what its tests cannot load, where those files are,
and the value that gives them.

The tests of a group share one base, the value each would otherwise see, and it is kept
whole (:class:`~bazel_ldfix.given.Given`). Whether that value serves each test exactly is
proved afterwards, by :mod:`bazel_ldfix.repair.plan`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence

from bazel_ldfix import elf, pathlist
from bazel_ldfix.bazel import buildtext, testenv
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.errors import CannotEditError
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.given import Given
from bazel_ldfix.loader.search import LoaderSource
from bazel_ldfix.outputbase import index
from bazel_ldfix.pathlist import VARIABLE
from bazel_ldfix.repair import exposure
from bazel_ldfix.repair.fallback import Skipped
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import Missing, Part, TestInput, TestResult
from bazel_ldfix.repair.runfilesobjects import PER_FILE_ERRORS
from bazel_ldfix.repair.scanresult import Outcome
from bazel_ldfix.repair.setting import PlanContext
from bazel_ldfix.repair.testread import Subject

_MAX_ROUNDS = 8  # each round can only reveal the dependencies of newly found libraries


# Each settling gives one more directory as links, or withholds one more link.
_MAX_SETTLES = 16


def plan_rounds(tests: Sequence[TestInput], env: TestEnvironment, context: PlanContext,
                base: Sequence[str], *, search: bool = True,
                given: Sequence[index.Choice] = ()) -> Part:
    """Find what the tests cannot load and how to give them exactly that, on ``base``,
    the value every test of the group the flag reaches keeps.

    Each round resolves every test in the environment it would get with what was found so
    far; a library found in one round can reveal its own missing dependencies in the next.
    Each test's missing names are looked for first where its own libraries lead
    (:func:`index.test_dirs`). The executables' closures go first, so that a dependency is
    reported as needed by the library that really needs it; the other shared objects of
    the runfiles (which a test may dlopen) follow. Without ``search``, only what is missing
    is found (each test's ``missing_before``); nothing is looked for.

    Then every test's whole load is compared with its load before the repair: a name it
    loaded must load the same file (:mod:`exposure`). A directory that would change one is
    given as links in a directory under ``links_root`` instead (None: no such directory can
    be trusted), and the rounds run again through them, until nothing that loaded before
    changes; what cannot be kept so is withheld, or (when a library given looks the name up
    itself) reported in ``shadowed``.

    ``given`` are libraries known to be needed that no DT_NEEDED names (opened by name at
    run time, as a test's log shows): they are given as the others are, and what the tests
    load is kept the same in the same way.

    A file the model cannot take (see :mod:`fallback`) is skipped and listed in
    ``skipped``; it never stops the plan.

    A test is resolved once per environment (the context's ``models``, shared by the
    plans of one command): the first round, the rounds with and without the runfiles'
    objects and the final check read the same resolution when they ask about the same
    environment.
    """
    output_base, loaders, prepend = context.output_base, context.loaders, \
        context.setting.prepend
    store, links_root = context.store, context.links_root
    cuda, on_error, progress = context.cuda, context.told, context.progress
    host, session = context.host, context.models
    assert host is not None and session is not None   # plan_repair settles both
    memo = session.memo
    subjects = [session.subject(t, host) for t in tests]
    roots = [os.path.join(output_base, "external")]
    scan = _Scan(subjects, loaders, session)
    # Not recorded, so that "needed by" comes from the rounds below (closures first).
    before = {s.label: o for s, o in scan.run(env.current, extras=True, record=False)}
    if links_root is not None and (":" in links_root or ";" in links_root):
        links_root = None   # LD_LIBRARY_PATH could not carry its directories
    exposer = exposure.Exposer(links_root, lambda d: memo.listing(d).names or frozenset(),
                               memo.realpath, _system_lookup(subjects, loaders, memo))
    for choice in given:
        exposer.choose(choice)
    value = Given(tuple(base), exposer.added() if given else (), prepend)

    def current(rule_wins: bool = False) -> dict[str, str | None]:
        """Each test's value with the flag; ``rule_wins``: as if an unknown Bazel were 7.2+."""
        flag = value.ld_library_path if value.changes else None
        out = {}
        for s in subjects:
            reach = env.reaches(s.label)
            if reach is testenv.Reach.NO or (rule_wins and reach is testenv.Reach.UNKNOWN):
                out[s.label] = env.rule.get(s.label, env.current.get(s.label))
            else:
                out[s.label] = flag if flag is not None else env.current.get(s.label)
        return out

    def locate_round(outcomes: Sequence[tuple[Subject, Outcome]]) -> bool:
        """Look for what the tests miss, each test where its own libraries lead (the first
        test that misses a name decides where it is taken from); whether anything new was
        found to give them."""
        found = False
        for subject, outcome in outcomes:
            new = [n for n in outcome.missing if n not in exposer.choices]
            header = outcome.header or scan.expect
            if not new or header is None:
                continue
            dirs = session.test_dirs(subject, outcome)
            located = index.locate(new, roots, header, dirs, on_error, store=store,
                                   progress=progress, memo=memo, cuda=cuda)
            for name, choice in located.items():
                other = index.renamed(name, dirs, header, memo, cuda) if choice.dir is None \
                    else None
                if other is not None:
                    passed = (*choice.passed_over, *other.passed_over)
                    found |= exposer.choose(dataclasses.replace(other, passed_over=passed),
                                            renamed=True)
                else:
                    found |= exposer.choose(choice)
        return found

    after: dict[str, Outcome] = {}
    final: dict[str, str | None] = {}
    for _ in range(_MAX_SETTLES):
        for extras in (False, True) if search else ():
            for _ in range(_MAX_ROUNDS):
                if not locate_round(scan.run(current(), extras=extras)):
                    break
                value = Given(value.base, exposer.added(), prepend)
        final = current()
        after = {s.label: o for s, o in scan.run(final, extras=True)}
        changed = [(label, change) for label, outcome in after.items()
                   if outcome is not before[label]
                   for change in exposure.changes(before[label].entries, outcome.entries,
                                                  session.same_file,
                                                  stopped=outcome.error is not None)]
        settled = [exposer.settle(label, change) for label, change in changed]
        if not any(settled):
            break
        value = Given(value.base, exposer.added(), prepend)
    exposer.discard_unused()
    if store is not None and scan.expect is not None:
        # Every other copy, from the cached index if there is one (never a walk for this),
        # for what was found beside the tests' libraries: a wrong version elsewhere is
        # named too.
        chosen = [name for name, c in exposer.choices.items() if c.path is not None]
        elsewhere = index.candidates(chosen, roots, store=store, memo=memo,
                                     cached_only=True)
        for name in chosen:
            exposer.choices[name] = index.with_others(exposer.choices[name], elsewhere[name],
                                                      scan.expect, memo)
    # What stays changed: a library given looks the name up itself (its own RUNPATH).
    shadowed = [exposure.Shadowed(label, change.soname, change.before, change.after,
                                  os.path.dirname(change.after) if change.after else None,
                                  exposure.ShadowCause.REPAIR)
                for label, change in changed]
    if any(r is testenv.Reach.UNKNOWN for r in env.reach.values()):
        # Fixed only if fixed in both orders: the other one gives the rule's value.
        other = {s.label: o for s, o in scan.run(current(rule_wins=True), extras=True)}
        missing_after = {k: (tuple(dict.fromkeys((*a.missing, *other[k].missing))),
                             a.error or other[k].error) for k, a in after.items()}
    else:
        missing_after = {k: (a.missing, a.error) for k, a in after.items()}
    missing_out = tuple(
        Missing(name, tuple(scan.needed_by.get(name, ())), c.dir, c.passed_over, c.path,
                exposer.exposure.get(name), exposer.why.get(name))
        for name, c in exposer.choices.items())
    results = []
    for s in subjects:
        reach = env.reaches(s.label)
        still, error = missing_after[s.label]
        rule_fix = _rule_fix(env.rule.get(s.label), value) \
            if reach is not testenv.Reach.YES and still else None
        was = before[s.label]
        results.append(TestResult(s.label, s.executable, was.missing, still,
                                  error, reach, rule_fix, final[s.label],
                                  programs=s.programs))
        if was.missing and env.current.get(s.label):
            # What the test's own value already makes it load instead (kept as it is).
            plain = session.outcomes([s], {s.label: None}, loaders,
                                     extras=True)[0]
            shadowed += exposure.caller_shadows(s.label, plain.entries, was,
                                                pathlist.split(env.current.get(s.label)),
                                                session.same_file)
    notes = tuple(note for s in subjects for note in s.notes)
    skipped: dict[str, Skipped] = {}
    for s in subjects:
        for skip in s.skipped:
            skipped.setdefault(memo.realpath(skip.path), skip)
    for skip in scan.skipped.values():
        skipped.setdefault(memo.realpath(skip.path), skip)
    return Part(value, tuple(results), missing_out, notes=notes,
                skipped=tuple(skipped.values()),
                links=exposer.links if exposer.links_dir else (),
                links_dir=exposer.links_dir, shadowed=tuple(shadowed),
                before=before, after=after, expect=scan.expect)


def _system_lookup(subjects: Sequence[Subject], loaders: LoaderSource,
                   memo: Memo) -> Callable[[str], str | None] | None:
    """The loader cache's answer for the tests' kind of program (a script's: that of the
    programs and libraries in its runfiles); None when there is no cache or no ELF file
    to ask for."""
    for subject in subjects:
        for path in (*subject.programs, *subject.extras)[:1] if subject.info is None else ():
            with contextlib.suppress(*PER_FILE_ERRORS):
                return loaders.cache_for(memo.read_elf(path))
        if subject.info is not None:
            with contextlib.suppress(*PER_FILE_ERRORS):
                return loaders.cache_for(subject.info)
    return None


def _rule_fix(rule: str | None, value: Given) -> str | None:
    """The ``env`` of a test rule whose own LD_LIBRARY_PATH wins over any flag, with the
    found directories (absolute paths of this machine: the BUILD fix of ``diagnose``, a
    ``cc_import`` of the versioned file, is the one that travels)."""
    if not value.changes:
        return None
    merged = value.on(pathlist.split(rule)).ld_library_path
    try:
        return f"env = {{{buildtext.string(VARIABLE)}: {buildtext.string(merged)}}}"
    except CannotEditError:
        return None     # a directory whose name is not UTF-8: the flag alone can carry it


class _Scan:
    """Resolves every test, collecting missing names (and who needs them) across runs."""

    def __init__(self, subjects: Sequence[Subject], loaders: LoaderSource,
                 session: Models) -> None:
        self.subjects = subjects
        self.loaders = loaders
        self.session = session
        self.needed_by: dict[str, dict[str, None]] = {}   # name -> requesters, in order
        self.expect: elf.ElfHeader | None = None
        self.skipped: dict[str, Skipped] = {}
        self._absorbed: dict[int, Outcome] = {}

    def run(self, values: Mapping[str, str | None], *, extras: bool, record: bool = True
            ) -> list[tuple[Subject, Outcome]]:
        """Each test's outcome in the value ``values`` gives it; with ``record``, what it
        found and who needs what it missed are added to the scan's (each outcome once:
        adding one again would change nothing, as every table keeps its first entries in
        order)."""
        out = []
        needed_by, absorbed = self.needed_by, self._absorbed
        outcomes = self.session.outcomes(self.subjects, values, self.loaders, extras=extras)
        for subject, outcome in zip(self.subjects, outcomes, strict=True):
            out.append((subject, outcome))
            if not record or id(outcome) in absorbed:
                continue
            absorbed[id(outcome)] = outcome   # kept: its id stays its own
            for skip in outcome.skipped:
                self.skipped.setdefault(skip.path, skip)
            self.expect = self.expect or outcome.header
            for path, name, requesters in outcome.entries:
                if path is None:
                    bucket = needed_by.setdefault(name, {})
                    for requester in requesters:
                        bucket.setdefault(requester, None)
        return out

"""The repair: what each test cannot load, where those files are, and the merged value.

The value a test would otherwise see is the base, and it is kept whole: entries are only
ever added (after the base, or before it with ``prepend``), never dropped or replaced.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import struct
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from bazel_ldfix import elf, pathlist
from bazel_ldfix.bazel import runfiles, testenv
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.options import flag_value, major_version
from bazel_ldfix.errors import (
    BadInputError,
    LdfixError,
)
from bazel_ldfix.loader.memo import Memo
from bazel_ldfix.loader.search import Environment, Loader, PassedOver, Resolution, Via
from bazel_ldfix.outputbase import index
from bazel_ldfix.pathlist import VARIABLE
from bazel_ldfix.repair import exposure, failopen, twins
from bazel_ldfix.repair.failopen import Skipped

_MAX_ROUNDS = 8  # each round can only reveal the dependencies of newly found libraries
# Each settling gives one more directory as links, or withholds one more link.
_MAX_SETTLES = 16


@dataclass(frozen=True)
class TestEnvironment:
    """LD_LIBRARY_PATH as Bazel would hand it to the tests, before any repair."""

    base: tuple[str, ...]               # entries every test keeps, in order
    source: str                         # where the base comes from, in words
    current: Mapping[str, str | None]   # label -> the value that test gets today
    # label -> whether a --test_env added last reaches it (missing: it does)
    reach: Mapping[str, testenv.Reach] = field(default_factory=dict)
    order: testenv.Order = testenv.Order.FLAGS_WIN
    version: str | None = None          # Bazel's own word for its version
    rule: Mapping[str, str | None] = field(default_factory=dict)  # the rules' own values


def test_environment(options: Sequence[Option], client_env: Mapping[str, str],
                     rule_envs: Mapping[str, Mapping[str, str]], labels: Sequence[str],
                     version: str | None,
                     rule_inherits: Mapping[str, Sequence[str]] | None = None
                     ) -> TestEnvironment:
    """Apply Bazel's rules for a test's LD_LIBRARY_PATH (:mod:`bazel_ldfix.bazel.testenv`).

    ``--action_env`` (the client's value with ``--incompatible_strict_action_env`` off, the
    default before Bazel 9), then ``--test_env``, then, by version, the rule's ``env`` and
    ``env_inherit`` below them (before 7.2) or over them (7.2 and later). The repair is a
    ``--test_env`` added last: it replaces the flags' value, and the rule's where the flags
    win, so those entries are kept in the base; a test whose rule's value wins keeps it.
    """
    major = major_version(version)
    strict = flag_value(options, "incompatible_strict_action_env",
                              default=major is not None and major >= 9)
    order = testenv.order_of(version)
    flags = testenv.flag_value(options, client_env, VARIABLE, strict=strict)
    inherits = rule_inherits or {}
    rule_values = {label: testenv.rule_value(rule_envs.get(label, {}),
                                             inherits.get(label, ()), client_env, VARIABLE)
                   for label in labels}
    current = {label: testenv.test_value(flags, rule_values[label], order)
               for label in labels}
    reach = {label: testenv.reach(rule_values[label], order) for label in labels}
    entries: list[str] = list(pathlist.split(flags.value))
    source = flags.source
    replaced = [rule_values[label] for label in labels
                if rule_values[label] is not None and reach[label] is not testenv.Reach.NO]
    for rv in replaced:
        entries += pathlist.split(rv)
    if replaced:
        source += ", plus the env attribute of the test rules"
    return TestEnvironment(pathlist.merge(entries, ()), source, current, reach, order,
                           version, rule_values)


@dataclass(frozen=True)
class Missing:
    soname: str
    needed_by: tuple[str, ...]
    dir: str | None                     # where the chosen file is (None: nowhere)
    passed_over: tuple[PassedOver, ...]
    path: str | None = None             # the chosen file
    exposure: exposure.Exposure | None = None   # how it is given (None: not found)
    why: str | None = None              # why not by its directory, in words


@dataclass(frozen=True)
class TestResult:
    label: str
    executable: str
    missing_before: tuple[str, ...]
    missing_after: tuple[str, ...]
    error: str | None
    # Whether the added --test_env reaches this test (no: its rule's env wins, Bazel 7.2+;
    # unknown: it would if Bazel's version were known), and for a test it may not reach,
    # the change to its rule that works in every version.
    reach: testenv.Reach = testenv.Reach.YES
    rule_fix: str | None = None
    # The LD_LIBRARY_PATH the test gets with the repair's flag (without one: the value it
    # had), as Bazel lays the options, the rc files' included, and the rule's env.
    library_path: str | None = None


@dataclass(frozen=True)
class Repair:
    output_base: str
    base: tuple[str, ...]
    base_source: str
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]
    added: tuple[str, ...]
    ld_library_path: str | None    # the merged value; None when nothing needs adding
    options: tuple[Option, ...] = ()  # the build step's canonical options
    notes: tuple[str, ...] = ()    # what could not be read, in words (the rest was)
    skipped: tuple[Skipped, ...] = ()   # files left out of the model, once each
    patterns: tuple[str, ...] = ()      # the command's target patterns, as Bazel read them
    # Kept from the last run of the same command, nothing it read having changed since
    # (repair/replay.py).
    given_again: bool = False
    links: tuple[exposure.Link, ...] = ()    # what the links directory holds
    links_dir: str | None = None             # one of ``added``, when there are links
    shadowed: tuple[exposure.Shadowed, ...] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        if self.ld_library_path is None:
            return ()
        return (f"--test_env={VARIABLE}={self.ld_library_path}",)

    @property
    def unresolved(self) -> tuple[str, ...]:
        return tuple(m.soname for m in self.missing if m.dir is None)

    @property
    def withheld(self) -> tuple[str, ...]:
        """Found, and not given: giving them would change what another test loads."""
        return tuple(m.soname for m in self.missing
                     if m.exposure is exposure.Exposure.WITHHELD)


@dataclass(frozen=True)
class TestInput:
    label: str
    executable: str


def plan(tests: Sequence[TestInput], env: TestEnvironment, output_base: str,
         make_loader: Callable[[elf.ElfInfo, Environment], Loader],
         cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
         *, prepend: bool = False,
         on_error: Callable[[str, OSError], None] | None = None,
         cache_dir: str | None = None, progress: index.ProgressFn | None = None,
         search: bool = True, host: elf.ElfHeader | None = None,
         session: Session | None = None, links_root: str | None = None,
         given: Sequence[index.Choice] = ()) -> Repair:
    """Find what the tests cannot load and how to give them exactly that.

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

    A file the model cannot take (see :mod:`failopen`) is skipped and listed in
    ``skipped``; it never stops the plan. ``host`` is the class and machine a test that is
    a script (sh_test, py_test) runs as: this machine's, unless given.

    A test is resolved once per environment (``session``, shared by the plans of one
    command): the first round, the rounds with and without the runfiles' objects and the
    final check read the same resolution when they ask about the same environment.
    """
    if host is None:
        from bazel_ldfix.loader.resolve import host_header

        host = host_header()
    session = session or Session()
    memo = session.memo
    subjects = [session.subject(t, host) for t in tests]
    roots = [os.path.join(output_base, "external")]
    scan = _Scan(subjects, make_loader, cache_for, session)
    # Not recorded, so that "needed by" comes from the rounds below (closures first).
    before = {s.label: o for s, o in scan.run(env.current, extras=True, record=False)}
    if links_root is not None and (":" in links_root or ";" in links_root):
        links_root = None   # LD_LIBRARY_PATH could not carry its directories
    exposer = exposure.Exposer(links_root, lambda d: memo.listing(d).names or frozenset(),
                               memo.realpath, _system_lookup(subjects, cache_for, memo))
    for choice in given:
        exposer.choose(choice)
    added: tuple[str, ...] = exposer.added() if given else ()

    def current(rule_wins: bool = False) -> dict[str, str | None]:
        """Each test's value with the flag; ``rule_wins``: as if an unknown Bazel were 7.2+."""
        value = pathlist.join(pathlist.merge(env.base, added, prepend=prepend)) \
            if added else None
        out = {}
        for s in subjects:
            reach = env.reach.get(s.label, testenv.Reach.YES)
            if reach is testenv.Reach.NO or (rule_wins and reach is testenv.Reach.UNKNOWN):
                out[s.label] = env.rule.get(s.label, env.current.get(s.label))
            else:
                out[s.label] = value if added else env.current.get(s.label)
        return out

    def locate_round(outcomes: Sequence[tuple[_Subject, _Outcome]]) -> bool:
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
            located = index.locate(new, roots, header, dirs, on_error, cache_dir=cache_dir,
                                   progress=progress, memo=memo)
            for name, choice in located.items():
                other = index.renamed(name, dirs, header, memo) if choice.dir is None \
                    else None
                if other is not None:
                    passed = (*choice.passed_over, *other.passed_over)
                    found |= exposer.choose(dataclasses.replace(other, passed_over=passed),
                                            renamed=True)
                else:
                    found |= exposer.choose(choice)
        return found

    after: dict[str, _Outcome] = {}
    final: dict[str, str | None] = {}
    for _ in range(_MAX_SETTLES):
        for extras in (False, True) if search else ():
            for _ in range(_MAX_ROUNDS):
                if not locate_round(scan.run(current(), extras=extras)):
                    break
                added = exposer.added()
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
        added = exposer.added()
    exposer.discard_unused()
    if cache_dir is not None and scan.expect is not None:
        # Every other copy, from the cached index if there is one (never a walk for this),
        # for what was found beside the tests' libraries: a wrong version elsewhere is
        # named too.
        chosen = [name for name, c in exposer.choices.items() if c.path is not None]
        elsewhere = index.candidates(chosen, roots, cache_dir=cache_dir, memo=memo,
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
    merged = pathlist.join(pathlist.merge(env.base, added, prepend=prepend)) if added else None
    missing_out = tuple(
        Missing(name, tuple(scan.needed_by.get(name, ())), c.dir, c.passed_over, c.path,
                exposer.exposure.get(name), exposer.why.get(name))
        for name, c in exposer.choices.items())
    results = []
    for s in subjects:
        reach = env.reach.get(s.label, testenv.Reach.YES)
        still, error = missing_after[s.label]
        rule_fix = _rule_fix(env.rule.get(s.label), added, prepend) \
            if reach is not testenv.Reach.YES and still else None
        was = before[s.label]
        results.append(TestResult(s.label, s.executable, was.missing, still,
                                  error, reach, rule_fix, final[s.label]))
        if was.missing and env.current.get(s.label):
            # What the test's own value already makes it load instead (kept as it is).
            plain = session.outcomes([s], {s.label: None}, make_loader, cache_for,
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
    return Repair(output_base, env.base, env.source, tuple(results), missing_out, added,
                  merged, notes=notes, skipped=tuple(skipped.values()),
                  links=exposer.links if exposer.links_dir else (),
                  links_dir=exposer.links_dir, shadowed=tuple(shadowed))


def _system_lookup(subjects: Sequence[_Subject],
                   cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                   memo: Memo) -> Callable[[str], str | None] | None:
    """The loader cache's answer for the tests' kind of program (a script's: that of the
    libraries in its runfiles); None when there is no cache or no ELF file to ask for."""
    for subject in subjects:
        for path in subject.extras[:1] if subject.info is None else ():
            with contextlib.suppress(*_PER_FILE_ERRORS):
                return cache_for(memo.read_elf(path))
        if subject.info is not None:
            with contextlib.suppress(*_PER_FILE_ERRORS):
                return cache_for(subject.info)
    return None


def _rule_fix(value: str | None, added: Sequence[str], prepend: bool) -> str | None:
    """The ``env`` of a test rule whose own LD_LIBRARY_PATH wins over any flag, with the
    found directories (absolute paths of this machine: the BUILD fix of ``diagnose``, a
    ``cc_import`` of the versioned file, is the one that travels)."""
    if not added:
        return None
    merged = pathlist.join(pathlist.merge(pathlist.split(value), added, prepend=prepend))
    return f"env = {{{testenv.starlark_string(VARIABLE)}: {testenv.starlark_string(merged)}}}"


class _Scan:
    """Resolves every test, collecting missing names (and who needs them) across runs."""

    def __init__(self, subjects: Sequence[_Subject],
                 make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                 cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                 session: Session) -> None:
        self.subjects = subjects
        self.make_loader = make_loader
        self.cache_for = cache_for
        self.session = session
        self.needed_by: dict[str, dict[str, None]] = {}   # name -> requesters, in order
        self.linked: dict[str, None] = {}
        self.expect: elf.ElfHeader | None = None
        self.skipped: dict[str, Skipped] = {}
        self._absorbed: dict[int, _Outcome] = {}

    def run(self, values: Mapping[str, str | None], *, extras: bool, record: bool = True
            ) -> list[tuple[_Subject, _Outcome]]:
        """Each test's outcome in the value ``values`` gives it; with ``record``, what it
        found and who needs what it missed are added to the scan's (each outcome once:
        adding one again would change nothing, as every table keeps its first entries in
        order)."""
        out = []
        needed_by, linked, absorbed = self.needed_by, self.linked, self._absorbed
        outcomes = self.session.outcomes(self.subjects, values, self.make_loader,
                                         self.cache_for, extras=extras)
        for subject, outcome in zip(self.subjects, outcomes, strict=True):
            out.append((subject, outcome))
            if not record or id(outcome) in absorbed:
                continue
            absorbed[id(outcome)] = outcome   # kept: its id stays its own
            for skip in outcome.skipped:
                self.skipped.setdefault(skip.path, skip)
            self.expect = self.expect or outcome.header
            for path, name, requesters in outcome.entries:
                if path is not None:
                    linked.setdefault(path, None)
                else:
                    bucket = needed_by.setdefault(name, {})
                    for requester in requesters:
                        bucket.setdefault(requester, None)
        return out


# (path, name, needed_by) of one listed object: path None when it was not found.
_Entry = tuple["str | None", str, tuple[str, ...]]


@dataclass(frozen=True)
class _Outcome:
    """What a scan keeps of a test's resolution in one environment."""

    header: elf.ElfHeader | None     # the first resolved object's, the kind of program
    entries: tuple[_Entry, ...]      # found and missing objects, in listing order
    error: str | None
    skipped: tuple[Skipped, ...] = ()
    # entries[:program] are the executable's own closure, which is what a resolution
    # without the runfiles' objects lists; None: not known (resolve without them).
    program: int | None = None

    @functools.cached_property
    def missing(self) -> tuple[str, ...]:
        """The names not found, each once, in listing order."""
        return tuple(dict.fromkeys(name for path, name, _ in self.entries if path is None))


# How a found object's path came from the test's own paths (its tree, its working
# directory, a $ORIGIN) or from paths looked at apart for the move (see Session._resolve);
# the others name places outside the test (the cache, the system directories).
_MOVABLE_VIA = frozenset({Via.RPATH, Via.RUNPATH, Via.LD_LIBRARY_PATH, Via.PATH})


def _named_paths(info: elf.ElfInfo | None) -> tuple[str, ...]:
    """What an object names as places to load from: its search paths, its interpreter,
    and its DT_NEEDED entries that are paths."""
    if info is None:
        return ()
    return (*(info.rpath or "").split(":"), *(info.runpath or "").split(":"),
            info.interp or "", *(name for name in info.needed if "/" in name))


@dataclass(frozen=True)
class _Clues:
    """What in one resolution could name a test's own files (see Session._resolve)."""

    paths: twins.Mentions       # search paths and files the objects name, cache hits
    words: str                  # messages
    needed: frozenset[str]      # every DT_NEEDED name of the objects listed

    def movable(self, shape: twins.Shape) -> bool:
        return twins.movable(self.paths, self.words, shape) and \
            shape.own_name not in self.needed


@dataclass(frozen=True)
class _Template:
    """One test's outcome, kept to be moved to its twins (:mod:`twins`)."""

    outcome: _Outcome
    shape: twins.Shape
    clues: _Clues

    @functools.cached_property
    def _moving(self) -> tuple[int, ...]:
        """Which entries name the test's own paths (the others are the same for a twin)."""
        source = self.shape
        root, executable = source.root, source.executable

        def own(path: str) -> bool:
            return path.startswith(root) or path == executable

        return tuple(at for at, (path, name, requesters) in enumerate(self.outcome.entries)
                     if (path is not None and own(path)) or own(name)
                     or any(own(r) for r in requesters))

    def moved_to(self, shape: twins.Shape, memo: Memo) -> _Outcome | None:
        """The outcome for the twin of ``shape``; None when it cannot be moved there."""
        if not self.clues.movable(shape):
            return None
        mover = twins.Mover(self.shape, shape)
        move = mover.path
        outcome = self.outcome
        entries = list(outcome.entries)
        for at in self._moving:
            path, name, requesters = entries[at]
            entries[at] = (mover.found_path(path) if path is not None else None, move(name),
                           tuple(move(r) for r in requesters))
        skipped = tuple(dataclasses.replace(s, path=move(s.path)) for s in outcome.skipped)
        if not mover.same_files(memo):
            return None
        return _Outcome(outcome.header, tuple(entries), outcome.error, skipped,
                        outcome.program)


class Session:
    """What one command learns about its tests, for every plan it makes.

    Each test's executable and runfiles are read once, and each test is resolved once per
    value of LD_LIBRARY_PATH, or not at all when a twin was (:mod:`twins`); the file facts
    underneath are shared by all tests (:class:`~bazel_ldfix.memo.Memo`).
    """

    def __init__(self, memo: Memo | None = None, *, share: bool = True) -> None:
        self.memo = memo or Memo()
        self.share = share  # False: every test resolved on its own, twins or not
        self._subjects: dict[tuple[TestInput, elf.ElfHeader], _Subject] = {}
        # (value, with the runfiles' objects) -> (label, executable) -> outcome
        self._outcomes: dict[tuple[str | None, bool],
                             dict[tuple[str, str], _Outcome]] = {}
        self._strings: dict[str, str] = {}
        self._dirs: dict[str, tuple[str, ...]] = {}
        self._test_dirs: dict[int, tuple[_Outcome, tuple[str, ...]]] = {}
        self._shapes: dict[tuple[str, str], twins.Shape | None] = {}
        self._templates: dict[Hashable, _Template] = {}
        self._values: dict[str | None, twins.Mentions] = {}
        self._keys: dict[Hashable, Hashable] = {}
        self.twins = 0      # outcomes moved from a twin instead of resolved

    def subject(self, test: TestInput, host: elf.ElfHeader) -> _Subject:
        key = (test, host)
        found = self._subjects.get(key)
        if found is None:
            found = self._subjects[key] = _Subject.of(test, host, self.memo)
        return found

    def read_ahead(self, test: TestInput, host: elf.ElfHeader) -> _Subject | None:
        """Read a test before it is planned (while Bazel builds the others): its
        executable, runfiles and twins' shape, kept for :meth:`subject`. A test that
        cannot be read now (None) is left to the plan, which reads it again and says why."""
        try:
            subject = self.subject(test, host)
            if self.share:
                self._shape(subject)
        except Exception:   # met again, and handled, by the plan
            return None
        return subject

    def resolve_ahead(self, subject: _Subject, library_path: str | None,
                      make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                      cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None]
                      ) -> None:
        """:meth:`outcome` with the runfiles' objects, asked before the plan asks it (a
        failure is met again, and handled, by the plan)."""
        with contextlib.suppress(Exception):
            self.outcomes([subject], {subject.label: library_path}, make_loader, cache_for,
                          extras=True)

    def outcome(self, subject: _Subject, library_path: str | None,
                make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                *, extras: bool) -> _Outcome:
        """The test resolved in one environment, with the runfiles' objects or without:
        once per value for every scan. Without them, the first part of the resolution with
        them is taken when that resolution went through whole."""
        return self.outcomes([subject], {subject.label: library_path}, make_loader,
                             cache_for, extras=extras)[0]

    def outcomes(self, subjects: Sequence[_Subject], values: Mapping[str, str | None],
                 make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                 cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                 *, extras: bool) -> list[_Outcome]:
        """:meth:`outcome` of each of ``subjects``, in the value ``values`` gives its label
        (the same object each time it is asked again)."""
        tables = self._outcomes
        out = []
        get = values.get
        for subject in subjects:
            library_path = get(subject.label)
            table = tables.get((library_path, extras))
            if table is None:
                table = tables[(library_path, extras)] = {}
            key = (subject.label, subject.executable)
            found = table.get(key)
            if found is None:
                found = table[key] = self._outcome(subject, library_path, make_loader,
                                                   cache_for, extras=extras)
            out.append(found)
        return out

    def _outcome(self, subject: _Subject, library_path: str | None,
                 make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                 cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                 *, extras: bool) -> _Outcome:
        if extras:
            return self._resolve_alike(subject, library_path, make_loader, cache_for,
                                       extras=True)
        full = self.outcomes([subject], {subject.label: library_path}, make_loader,
                             cache_for, extras=True)[0]
        if full.program is not None:
            return _Outcome(full.header, full.entries[:full.program], full.error, full.skipped)
        return self._resolve_alike(subject, library_path, make_loader, cache_for,
                                   extras=False)

    def _resolve_alike(self, subject: _Subject, library_path: str | None,
                       make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                       cache_for: Callable[[elf.ElfInfo],
                                           Callable[[str], str | None] | None],
                       *, extras: bool) -> _Outcome:
        """:meth:`_resolve`, or the result of a twin test moved to this one's paths
        (:mod:`bazel_ldfix.repair.twins`)."""
        shape = self._shape(subject) if self.share else None
        if shape is None or self._mentions(library_path).name(shape):
            return self._resolve(subject, library_path, make_loader, cache_for,
                                 extras=extras)[0]
        key = (shape.key, library_path, extras, make_loader, cache_for)
        template = self._templates.get(key)
        if template is not None:
            moved = template.moved_to(shape, self.memo)
            if moved is not None:
                self.twins += 1
                return moved
            return self._resolve(subject, library_path, make_loader, cache_for,
                                 extras=extras)[0]
        outcome, clues = self._resolve(subject, library_path, make_loader, cache_for,
                                       extras=extras)
        if clues.movable(shape):
            self._templates[key] = _Template(outcome, shape, clues)
        return outcome

    def _mentions(self, library_path: str | None) -> twins.Mentions:
        """The directories of a value of LD_LIBRARY_PATH, sorted once per value."""
        found = self._values.get(library_path)
        if found is None:
            found = self._values[library_path] = twins.Mentions(
                pathlist.split(library_path or ""))
        return found

    def _shape(self, subject: _Subject) -> twins.Shape | None:
        key = (subject.label, subject.executable)
        if key not in self._shapes:
            # One copy of each twins' key, however many tests share it.
            self._shapes[key] = twins.shape(subject.executable, subject.info, subject.host,
                                            subject.cwd, subject.extras,
                                            [s.path for s in subject.skipped], self.memo,
                                            digest=subject.digest, keys=self._keys)
        return self._shapes[key]

    def _resolve(self, subject: _Subject, library_path: str | None,
                 make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                 cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                 *, extras: bool) -> tuple[_Outcome, _Clues]:
        """The test's outcome; with what in it may name paths (search paths and files the
        objects name, what the cache and the system directories gave, messages) and every
        DT_NEEDED name of the objects it lists, which decide whether it can be moved to a
        twin (LD_LIBRARY_PATH is looked at apart: its value is the same for every test)."""
        intern = self._strings.setdefault
        paths: list[str] = []
        words: list[str] = []
        needed: set[str] = set()
        header = None
        error = None
        entries: list[_Entry] = []
        skipped: list[Skipped] = []
        program: int | None = 0
        results = subject.resolve(make_loader, cache_for, library_path, extras=extras)
        if subject.info is not None and (len(results) != 1
                                         or isinstance(results[0], Skipped)):
            program = None  # the model went one object at a time
        for res in results:
            if isinstance(res, Skipped):
                skipped.append(res)
                words.append(res.reason)
                continue
            header = header or res.info.header
            error = error or res.error
            words += (res.error or "", res.blocked or "")
            paths += _named_paths(res.info)
            needed.update(res.info.needed)
            for lib in res.libraries:
                words.append(lib.error or "")
                paths += _named_paths(lib.info)
                if lib.info is not None:
                    needed.update(lib.info.needed)
                if lib.via is not None and lib.via not in _MOVABLE_VIA and lib.path:
                    paths.append(lib.path)
            for at, lib in enumerate(res.libraries):
                if lib.path is None and lib.error is not None:
                    continue  # the load stopped here; the test's error says why
                if program is not None and (res.program_libraries is None
                                            or at < res.program_libraries):
                    program += 1
                if lib.path is not None:
                    entries.append((intern(lib.path, lib.path), lib.name, ()))
                else:
                    entries.append((None, intern(lib.name, lib.name),
                                    tuple(intern(p, p) for p in lib.needed_by)))
        if subject.info is None:
            program = len(entries)  # a script: each object is resolved on its own anyway
        return (_Outcome(header, tuple(entries), error, tuple(skipped), program),
                _Clues(twins.Mentions(paths), "\0".join(words), frozenset(needed)))

    def test_dirs(self, subject: _Subject, outcome: _Outcome) -> tuple[str, ...]:
        """:func:`index.test_dirs` of a test in one environment: where its staged and its
        loaded libraries lead, each path's chain followed once per command."""
        key = id(outcome)
        found = self._test_dirs.get(key)
        if found is None or found[0] is not outcome:
            loaded = [path for path, _, _ in outcome.entries if path is not None]
            found = self._test_dirs[key] = (outcome, index.test_dirs(
                subject.extras, loaded, self._preferred))
        return found[1]

    def same_file(self, a: str, b: str) -> bool:
        """Whether two paths name one file (by real path, as the command reads them)."""
        return a == b or self.memo.realpath(a) == self.memo.realpath(b)

    def _preferred(self, path: str) -> tuple[str, ...]:
        """One path's chain. A link to an absolute path continues that path's chain, which
        every test's runfiles link to the same file shares (one link more is followed
        there, which only a chain the kernel refuses, of 40 links, could tell)."""
        dirs = self._dirs.get(path)
        if dirs is None:
            target = self.memo.readlink(path) or ""
            if target.startswith("/"):
                rest = self._dirs.get("\0" + target)
                if rest is None:
                    rest = self._dirs["\0" + target] = index.preferred_dirs(
                        [target], self.memo.realpath, self.memo.readlink)
                dirs = tuple(dict.fromkeys((os.path.dirname(target), *rest)))
            else:
                dirs = index.preferred_dirs([path], self.memo.realpath, self.memo.readlink)
            self._dirs[path] = dirs
        return dirs


@dataclass(frozen=True)
class _Subject:
    """One test: its executable (when it is ELF) and the shared objects in its runfiles."""

    label: str
    executable: str
    info: elf.ElfInfo | None
    extras: tuple[str, ...]
    cwd: str
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()
    host: elf.ElfHeader | None = None   # what a script runs as (this machine's programs)
    # The twins' digest of the tree's MANIFEST (twins.manifest_digest), taken from the
    # read that listed the tree; None: read it when it is asked for.
    digest: bytes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, test: TestInput, host: elf.ElfHeader, memo: Memo | None = None, *,
           from_manifest: bool = True) -> _Subject:
        """The test's executable and runfiles. The tree is listed from its ``MANIFEST``
        where that is exactly what a walk finds (:func:`runfiles.tree_listing`), else
        walked; ``from_manifest=False`` always walks it."""
        memo = memo or Memo()
        try:
            info: elf.ElfInfo | None = memo.read_elf(test.executable)
        except BadInputError:
            info = None  # a script (sh_test, py_test): only its runfiles are examined
        tree = test.executable + ".runfiles"
        # A script runs under an interpreter of this machine, which is what would load
        # the libraries of its runfiles.
        expect = info.header if info is not None else host
        notes: tuple[str, ...] = ()
        # A listing shows the tree is a directory (its root is one of those it stats).
        listing = _tree_listing(test.executable, memo, read=info is not None) \
            if from_manifest else None
        if listing is None or info is None:
            # A walk of the tree, a manifest read whole, a script's runfiles read one by one:
            # not kept as facts (see Memo.facts).
            memo.opaque()
        digest = None
        if listing is not None or os.path.isdir(tree):
            extras, skipped = _runfiles_libraries(tree, expect, memo, listing)
            if listing is not None:
                digest = twins.manifest_digest(listing.manifest, test.executable, memo)
        else:
            # No tree (--nobuild_runfile_links, as --remote_download_minimal sets): the
            # manifest names what the test stages.
            extras, skipped, absent = _manifest_libraries(test.executable, expect, memo)
            notes = tuple(f"{test.label}: cannot read {path}: not on disk (a remote cache "
                          "that did not download it?)" for path in absent)
        return cls(test.label, test.executable, info, tuple(sorted(extras)),
                   _test_cwd(test, tree, listing), tuple(skipped), notes, host, digest)

    def resolve(self, make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                library_path: str | None, *, extras: bool) -> list[Resolution | Skipped]:
        """The model's load of the executable (with the runfiles' objects as if dlopen()ed),
        or of each runfiles object for a script; a file the model fails on is skipped."""
        if self.info is not None:
            info = self.info
            try:
                env = Environment(library_path, self.cwd, cache_for(info))
                loader = make_loader(info, env)
            except _PER_FILE_ERRORS as exc:
                return [failopen.no_loader(self.executable, exc)]
            try:
                return [loader.resolve(self.executable, self.extras if extras else (),
                                       info=info)]
            except _PER_FILE_ERRORS as exc:
                if not (extras and self.extras):
                    return [failopen.from_error(self.executable, exc)]
            # One of the extras defeats the model: take them one at a time.
            out: list[Resolution | Skipped] = [*self.resolve(
                make_loader, cache_for, library_path, extras=False)]
            for path in self.extras:
                try:
                    out.append(make_loader(info, env).resolve(self.executable, (path,),
                                                              info=info))
                except _PER_FILE_ERRORS as exc:
                    out.append(failopen.from_error(path, exc))
            return out
        out = []
        for path in self.extras:
            try:
                extra = elf.read_elf(path)
            except _PER_FILE_ERRORS as exc:
                out.append(failopen.from_error(path, exc))
                continue
            try:
                env = Environment(library_path, self.cwd, cache_for(extra))
                loader = make_loader(extra, env)
            except _PER_FILE_ERRORS as exc:
                out.append(failopen.no_loader(path, exc))
                continue
            try:
                out.append(loader.resolve(path, info=extra))
            except _PER_FILE_ERRORS as exc:
                out.append(failopen.from_error(path, exc))
        return out


# What one hostile file can make the reader or the model raise: reported as a skipped file.
# Anything else is a bug, and `bazel-ldfix test` falls back to the unchanged `bazel test`.
_PER_FILE_ERRORS = (LdfixError, OSError, ValueError, IndexError, struct.error)


def _tree_listing(executable: str, memo: Memo, *, read: bool = False
                  ) -> runfiles.TreeListing | None:
    """:func:`runfiles.tree_listing`, each symlink target looked at once per command.
    ``read``: the executable was just opened as a regular file (the target of the tree's
    link to it, when that link names it by this path, is then known to be no directory)."""
    targets = memo.remember("runfiles-targets", None, runfiles.Targets)
    if read and executable.startswith("/"):
        targets.plain.add(executable)
    if not memo.watching:
        return runfiles.tree_listing(executable, targets=targets,
                                     mount_names=memo.mounts().names)
    # The statuses of the tree's own files and directories are kept as one fact (a
    # thousand trees have some ten thousand directories); what it reads elsewhere (the
    # links' targets) as facts of their own.
    statuses: list[tuple[str, os.stat_result]] = []

    def seen(kind: str, path: str, st: os.stat_result | None) -> None:
        if st is not None:
            statuses.append((path, st))     # the tree's own, in the order read
        else:
            memo.keep(kind, path)           # read here: a target's status, an access

    listing = runfiles.tree_listing(executable, targets=targets,
                                    mount_names=memo.mounts().names, seen=seen)
    if listing is not None:
        memo.keep_tree(executable, statuses)
    return listing


def _runfiles_libraries(runfiles_dir: str, expect: elf.ElfHeader, memo: Memo | None = None,
                        listing: runfiles.TreeListing | None = None
                        ) -> tuple[list[str], list[Skipped]]:
    """Shared objects in a runfiles tree that the loader of ``expect`` would accept, and
    the files named like libraries that it would not (each with the reason).

    The files are those a walk of the tree finds, or those of ``listing`` (the same paths,
    read from the tree's MANIFEST), taken in sorted order: of two paths to one file, the
    first is kept.
    """
    if listing is None and not os.path.isdir(runfiles_dir):
        return [], []
    memo = memo or Memo()
    if listing is not None:
        names = [path for path in listing.files
                 if ".so" in path and index.looks_like_library(path.rpartition("/")[2])]
        return _examined([f"{runfiles_dir}/{path}" for path in names], expect, memo,
                         [listing.targets[path] for path in names])
    paths = sorted(path for found in index.walk(runfiles_dir, mounts=memo.mounts()).values()
                   for path in found)
    return _examined(paths, expect, memo)


def _examined(paths: Sequence[str], expect: elf.ElfHeader, memo: Memo,
              targets: Sequence[str] | None = None) -> tuple[list[str], list[Skipped]]:
    """Of ``paths``, each file once (by real path, the first path kept), those the loader
    of ``expect`` would accept, and the others with the reason.

    ``targets``: each path's symlink target, from the ``MANIFEST`` of a tree it was shown
    to list (:func:`runfiles.tree_listing`; "" for an empty file). A link to an absolute
    target is then known without reading it: its real path is the target's, and a file
    the loader of ``expect`` accepted through one link to a target is accepted through
    every other (what is refused is examined again, through its own path, for its words).
    """
    out: list[str] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    accepted: set[str] | None = memo.remember("accepted-targets", expect, set) \
        if targets is not None else None
    for at, path in enumerate(paths):
        target = targets[at] if targets is not None else ""
        if target.startswith("/") and path.startswith("/"):
            real = memo.link_realpath(path, target)
        else:
            target = ""
            real = memo.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        if target and accepted is not None and target in accepted:
            out.append(path)
            continue
        verdict = failopen.examine(path, expect, memo)
        if isinstance(verdict, Skipped):
            skipped.append(verdict)
        else:
            out.append(path)
            if target and accepted is not None:
                accepted.add(target)
    return out, skipped


def _manifest_libraries(executable: str, expect: elf.ElfHeader, memo: Memo | None = None
                        ) -> tuple[list[str], list[Skipped], list[str]]:
    """Shared objects the runfiles manifest stages that the loader of ``expect`` would
    accept, the staged files it would not (with the reason), and the staged shared objects
    that are not on disk."""
    memo = memo or Memo()
    entries = runfiles.read_manifest(runfiles.manifest_of(executable))
    staged = [entry.target for entry in entries or ()
              if entry.target is not None and _SHARED_NAME.search(os.path.basename(entry.path))]
    absent = [target for target in staged if not os.path.exists(target)]
    gone = set(absent)
    out, skipped = _examined([t for t in staged if t not in gone], expect, memo)
    return out, skipped, absent


_SHARED_NAME = re.compile(r"\.so(?:\.[0-9][^/]*)?$")


def _test_cwd(test: TestInput, runfiles_dir: str,
              listing: runfiles.TreeListing | None = None) -> str:
    """Bazel starts a test in ``<runfiles>/<workspace name>``: the first directory of the
    tree's root that holds the test's own path (from ``listing`` when there is one)."""
    package_path = test.label.split("//", 1)[-1].replace(":", "/").lstrip("/")
    if listing is not None and all(part not in ("", ".", "..")
                                   for part in package_path.split("/")):
        paths = listing.paths
        for name in listing.top:
            if f"{name}/{package_path}" in paths:   # listing.lexists
                return f"{runfiles_dir}/{name}"     # a plain name, as os.path.join gives
        return runfiles_dir
    try:
        names = sorted(os.listdir(runfiles_dir))
    except OSError:
        return os.path.dirname(test.executable)
    for name in names:
        if os.path.lexists(os.path.join(runfiles_dir, name, package_path)):
            return os.path.join(runfiles_dir, name)
    return runfiles_dir

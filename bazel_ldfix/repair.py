"""The repair: what each test cannot load, where those files are, and the merged value.

The value a test would otherwise see is the base, and it is kept whole: entries are only
ever added (after the base, or before it with ``prepend``), never dropped or replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bazel_ldfix import bazel, elf, index, pathlist
from bazel_ldfix.errors import BadInputError, NotAWorkspaceError, NoTestsError
from bazel_ldfix.loader import Environment, Loader, Resolution
from bazel_ldfix.memo import Memo

VARIABLE = "LD_LIBRARY_PATH"
_MAX_ROUNDS = 8  # each round can only reveal the dependencies of newly found libraries


@dataclass(frozen=True)
class TestEnvironment:
    """LD_LIBRARY_PATH as Bazel would hand it to the tests, before any repair."""

    base: tuple[str, ...]               # entries every test keeps, in order
    source: str                         # where the base comes from, in words
    current: Mapping[str, str | None]   # label -> the value that test gets today


def test_environment(options: Sequence[bazel.Option], client_env: Mapping[str, str],
                     rule_envs: Mapping[str, Mapping[str, str]], labels: Sequence[str],
                     version: str | None) -> TestEnvironment:
    """Apply Bazel's rules for a test's LD_LIBRARY_PATH.

    Measured on Bazel 4.2.3: the last ``--test_env=LD_LIBRARY_PATH=V`` wins over everything;
    a bare ``--test_env=LD_LIBRARY_PATH`` passes the client's value when the client has one;
    with ``--incompatible_strict_action_env`` off (the default before Bazel 9) the client's
    value reaches the test as well. Each of these replaces the rule's ``env`` attribute,
    which applies only when none of them sets the variable. Since the repair is a
    ``--test_env``, the entries of every rule's value are kept in the base too.
    """
    given, value = bazel.test_env_setting(options, VARIABLE)
    major = bazel.major_version(version)
    strict = bazel.flag_value(options, "incompatible_strict_action_env",
                              default=major is not None and major >= 9)
    rule_values = [rule_envs.get(label, {}).get(VARIABLE) for label in labels]
    client = client_env.get(VARIABLE)
    if given and value is not None:
        base_value: str | None = value
        source = f"--test_env={VARIABLE}={value}"
    elif given and client is not None:
        base_value, source = client, f"the client's {VARIABLE} (bare --test_env={VARIABLE})"
    elif not strict and client is not None:
        base_value = client
        source = f"the client's {VARIABLE} (--incompatible_strict_action_env is off)"
    else:
        base_value, source = None, "nothing"
    if base_value is not None:
        # A --test_env value or the client's value replaces the rule's env attribute.
        current: dict[str, str | None] = {label: base_value for label in labels}
    else:
        current = dict(zip(labels, rule_values, strict=True))
    entries: list[str] = list(pathlist.split(base_value))
    for rv in rule_values:
        entries += pathlist.split(rv)
    if any(rv is not None for rv in rule_values):
        source += ", plus the env attribute of the test rules"
    return TestEnvironment(pathlist.merge(entries, ()), source, current)


@dataclass(frozen=True)
class Missing:
    soname: str
    needed_by: tuple[str, ...]
    dir: str | None
    passed_over: tuple[index.PassedOver, ...]


@dataclass(frozen=True)
class TestResult:
    label: str
    executable: str
    missing_before: tuple[str, ...]
    missing_after: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class Repair:
    output_base: str
    base: tuple[str, ...]
    base_source: str
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]
    added: tuple[str, ...]
    ld_library_path: str | None    # the merged value; None when nothing needs adding

    @property
    def flags(self) -> tuple[str, ...]:
        if self.ld_library_path is None:
            return ()
        return (f"--test_env={VARIABLE}={self.ld_library_path}",)

    @property
    def unresolved(self) -> tuple[str, ...]:
        return tuple(m.soname for m in self.missing if m.dir is None)


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
         search: bool = True, session: Session | None = None) -> Repair:
    """Find what the tests cannot load and the directories that fix it.

    Each round resolves every test in the environment it would get with the directories
    found so far; a library found in one round can reveal its own missing dependencies in
    the next. The executables' closures go first, so that a dependency is reported as
    needed by the library that really needs it; the other shared objects of the runfiles
    (which a test may dlopen) follow. Without ``search``, only what is missing is found
    (each test's ``missing_before``); nothing is looked for.

    A test is resolved once per environment (``session``, shared by the plans of one
    command): the first round, the rounds with and without the runfiles' objects and the
    final check read the same resolution when they ask about the same environment.
    """
    session = session or Session()
    subjects = [session.subject(t) for t in tests]
    roots = [os.path.join(output_base, "external")]
    scan = _Scan(subjects, make_loader, cache_for, session)
    # A separate scan, so that "needed by" comes from the rounds below (closures first).
    before = {s.label: missing for s, missing, _ in
              _Scan(subjects, make_loader, cache_for, session).run(env.current, extras=True)}
    choices: dict[str, index.Choice] = {}
    added: list[str] = []

    def current() -> Mapping[str, str | None]:
        if not added:
            return env.current
        value = pathlist.join(pathlist.merge(env.base, added, prepend=prepend))
        return {s.label: value for s in subjects}

    for extras in (False, True) if search else ():
        for _ in range(_MAX_ROUNDS):
            scan.run(current(), extras=extras)
            new = [name for name in scan.needed_by if name not in choices]
            if not new or scan.expect is None:
                break
            # Beside what the tests link, and beside what their _solib_* directories stage
            # (a cc_import of the main repository stages a file of the source tree).
            staged = [p for s in subjects for p in s.extras]
            preferred = session.preferred_dirs(
                sorted([*scan.linked, *staged], key=lambda p: "/_solib_" not in p))
            located = index.locate(new, roots, scan.expect, preferred, on_error,
                                   cache_dir=cache_dir, progress=progress, memo=session.memo)
            choices.update(located)
            added += [c.dir for c in located.values() if c.dir and c.dir not in added]
            if not any(c.dir for c in located.values()):
                break
    after = {s.label: (missing, error) for s, missing, error in scan.run(current(), extras=True)}
    merged = pathlist.join(pathlist.merge(env.base, added, prepend=prepend)) if added else None
    missing_out = tuple(
        Missing(name, tuple(scan.needed_by.get(name, ())), c.dir, c.passed_over)
        for name, c in choices.items())
    results_out = tuple(TestResult(s.label, s.executable, before[s.label], *after[s.label])
                        for s in subjects)
    return Repair(output_base, env.base, env.source, results_out, missing_out, tuple(added),
                  merged)


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

    def run(self, values: Mapping[str, str | None], *, extras: bool
            ) -> list[tuple[_Subject, tuple[str, ...], str | None]]:
        out = []
        needed_by, linked = self.needed_by, self.linked
        for subject in self.subjects:
            missing: dict[str, None] = {}
            outcome = self.session.outcome(subject, values.get(subject.label),
                                           self.make_loader, self.cache_for)
            self.expect = self.expect or outcome.header
            for path, name, requesters in (outcome.entries if extras
                                           else outcome.entries[:outcome.program]):
                if path is not None:
                    linked.setdefault(path, None)
                else:
                    missing.setdefault(name, None)
                    bucket = needed_by.setdefault(name, {})
                    for requester in requesters:
                        bucket.setdefault(requester, None)
            out.append((subject, tuple(missing), outcome.error if extras else None))
        return out


# (path, name, needed_by) of one listed object: path None when it was not found.
_Entry = tuple["str | None", str, tuple[str, ...]]


@dataclass(frozen=True)
class _Outcome:
    """What a scan keeps of a test's resolution in one environment."""

    header: elf.ElfHeader | None     # the first resolved object's, the kind of program
    entries: tuple[_Entry, ...]      # found and missing objects, in listing order
    program: int                     # entries[:program] come from the executable's closure
    error: str | None                # with the runfiles' objects loaded too


class Session:
    """What one command learns about its tests, for every plan it makes.

    Each test's executable and runfiles are read once, and each test is resolved once per
    value of LD_LIBRARY_PATH; the file facts underneath are shared by all tests
    (:class:`~bazel_ldfix.memo.Memo`).
    """

    def __init__(self, memo: Memo | None = None) -> None:
        self.memo = memo or Memo()
        self._subjects: dict[TestInput, _Subject] = {}
        self._outcomes: dict[tuple[str, str, str | None], _Outcome] = {}
        self._strings: dict[str, str] = {}
        self._dirs: dict[str, tuple[str, ...]] = {}

    def subject(self, test: TestInput) -> _Subject:
        found = self._subjects.get(test)
        if found is None:
            found = self._subjects[test] = _Subject.of(test, self.memo)
        return found

    def outcome(self, subject: _Subject, library_path: str | None,
                make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None]
                ) -> _Outcome:
        """The test resolved with its runfiles' objects: once per value, for every scan."""
        key = (subject.label, subject.executable, library_path)
        found = self._outcomes.get(key)
        if found is not None:
            return found
        intern = self._strings.setdefault
        header = None
        error = None
        entries: list[_Entry] = []
        program = 0
        resolutions = subject.resolve(make_loader, cache_for, library_path, extras=True)
        for res in resolutions:
            header = header or res.info.header
            error = error or res.error
            for at, lib in enumerate(res.libraries):
                if lib.path is None and lib.error is not None:
                    continue  # the load stopped here; the test's error says why
                if subject.info is not None and (res.program_libraries is None
                                                 or at < res.program_libraries):
                    program += 1
                if lib.path is not None:
                    entries.append((intern(lib.path, lib.path), lib.name, ()))
                else:
                    entries.append((None, intern(lib.name, lib.name),
                                    tuple(intern(p, p) for p in lib.needed_by)))
        if subject.info is None:
            program = len(entries)  # a script: each runfiles object is resolved on its own
        found = self._outcomes[key] = _Outcome(header, tuple(entries), program, error)
        return found

    def preferred_dirs(self, paths: Sequence[str]) -> tuple[str, ...]:
        """``index.preferred_dirs`` of ``paths``, each path's chain followed once."""
        out: dict[str, None] = {}
        for path in paths:
            dirs = self._dirs.get(path)
            if dirs is None:
                dirs = self._dirs[path] = index.preferred_dirs([path], self.memo.realpath)
            for d in dirs:
                out.setdefault(d, None)
        return tuple(out)


@dataclass(frozen=True)
class _Subject:
    """One test: its executable (when it is ELF) and the shared objects in its runfiles."""

    label: str
    executable: str
    info: elf.ElfInfo | None
    extras: tuple[str, ...]
    cwd: str

    @classmethod
    def of(cls, test: TestInput, memo: Memo | None = None) -> _Subject:
        memo = memo or Memo()
        try:
            info: elf.ElfInfo | None = memo.read_elf(test.executable)
        except BadInputError:
            info = None  # a script (sh_test, py_test): only its runfiles are examined
        runfiles = test.executable + ".runfiles"
        extras = tuple(sorted(_runfiles_libraries(runfiles, info, memo)))
        return cls(test.label, test.executable, info, extras, _test_cwd(test, runfiles))

    def resolve(self, make_loader: Callable[[elf.ElfInfo, Environment], Loader],
                cache_for: Callable[[elf.ElfInfo], Callable[[str], str | None] | None],
                library_path: str | None, *, extras: bool) -> list[Resolution]:
        if self.info is not None:
            env = Environment(library_path, self.cwd, cache_for(self.info))
            return [make_loader(self.info, env).resolve(
                self.executable, self.extras if extras else (), info=self.info)]
        out = []
        for path in self.extras:
            info = elf.read_elf(path)
            env = Environment(library_path, self.cwd, cache_for(info))
            out.append(make_loader(info, env).resolve(path, info=info))
        return out


def _runfiles_libraries(runfiles: str, program: elf.ElfInfo | None, memo: Memo) -> list[str]:
    """Shared objects in a runfiles tree that the loader would accept for this program."""
    if not os.path.isdir(runfiles):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for paths in index.walk(runfiles, mounts=memo.mounts()).values():
        for path in paths:
            real = memo.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            try:
                header = memo.read_header(path)
            except BadInputError:
                continue
            if header.type != elf.ET_DYN:
                continue
            if program is not None and index.check_candidate(path, program.header,
                                                             memo) is not None:
                continue
            out.append(path)
    return out


def _test_cwd(test: TestInput, runfiles: str) -> str:
    """Bazel starts a test in ``<runfiles>/<workspace name>``."""
    package_path = test.label.split("//", 1)[-1].replace(":", "/").lstrip("/")
    try:
        names = sorted(os.listdir(runfiles))
    except OSError:
        return os.path.dirname(test.executable)
    for name in names:
        if os.path.lexists(os.path.join(runfiles, name, package_path)):
            return os.path.join(runfiles, name)
    return runfiles


def repair_tests(runner: bazel.Bazel, args: Sequence[str], client_env: Mapping[str, str], *,
                 output_base: str | None = None, prepend: bool = False,
                 cache_dir: Callable[[str], str | None] | None = None,
                 progress: index.ProgressFn | None = None,
                 on_error: Callable[[str, OSError], None] | None = None
                 ) -> tuple[Repair | None, int]:
    """The repair for ``bazel test ARGS``: (the repair, 0), or (None, Bazel's exit code)
    when the build step fails. Raises NoTestsError when the patterns select no test.

    Bazel is asked as little as possible: the output_base and each test's tags come from
    the build step's events (unless given), and the rules' ``env`` (``bazel query``) only
    when a test misses something (a rule's ``env`` may provide it, and the repair's
    ``--test_env`` would replace it), only for the selected tests and only the rules whose
    ``env`` mentions the variable.
    ``cache_dir`` maps the output_base to the index cache's directory (None: no cache).
    """
    from bazel_ldfix.resolve import Options, cache_lookup, host_of, interp_for

    if bazel.workspace_of(runner.cwd) is None:
        raise NotAWorkspaceError("not inside a Bazel workspace (no WORKSPACE or MODULE.bazel "
                                 "above the current directory)")
    if output_base is not None and not os.path.isdir(output_base):
        raise BadInputError(f"output_base {output_base} does not exist")
    memo = _memo_file(runner, args, client_env) if cache_dir else None
    expected = _read_memo(memo)
    events, code = bazel.build_tests(runner, args, expected)
    if code not in (0, bazel.NO_TESTS_FOUND):
        return None, code
    base = output_base or events.output_base or bazel.output_base(runner)
    if not os.path.isdir(base):
        raise BadInputError(f"output_base {base} does not exist")

    session = Session()

    def make_loader(info: elf.ElfInfo, loader_env: Environment) -> Loader:
        return Loader(host_of(interp_for(info)), loader_env, session.memo)

    def cache_for(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
        return cache_lookup(info, Options())

    def repair_with(rules: Mapping[str, bazel.RuleInfo], search: bool = True) -> Repair:
        tests = bazel.selected(events.tests, rules, events.command_line)
        if not tests:
            patterns = " ".join(a for a in args if not a.startswith("-")) or "(none)"
            raise NoTestsError(f"the target patterns and test filters select no test: "
                               f"{patterns}")
        labels = [t.label for t in tests]
        env = test_environment(events.options, client_env,
                               {k: r.env for k, r in rules.items()}, labels, events.version)
        inputs = [TestInput(t.label, t.executable) for t in tests]
        return plan(inputs, env, base, make_loader, cache_for, prepend=prepend,
                    on_error=on_error, cache_dir=cache_dir(base) if cache_dir else None,
                    progress=progress, search=search, session=session)

    result = None
    chosen = [t.label for t in bazel.selected(events.tests, {}, events.command_line)]
    # The last run of this command needed a repair: this one most likely does too, so the
    # rule query runs while the tests are resolved.
    pending = bazel.start_rule_info(runner, chosen, VARIABLE) if expected and chosen else None
    try:
        if events.tests:
            # Without the rules' env: if every test loads, that is the answer (nothing to add).
            first = repair_with({}, search=False)
            if not any(t.missing_before or t.error for t in first.tests):
                result = first
        if result is None:
            rules = (pending.result() if pending is not None
                     else bazel.rule_info(runner, chosen, VARIABLE))
            result = repair_with(rules)
    finally:
        if pending is not None:
            pending.close()
    _write_memo(memo, result.flags)
    return result, 0


def _memo_file(runner: bazel.Bazel, args: Sequence[str], env: Mapping[str, str]) -> str:
    """Where the last repair of ``bazel test ARGS`` in this workspace is remembered."""
    import hashlib

    xdg = env.get("XDG_CACHE_HOME", "")
    home = env.get("HOME", "")
    top = xdg if os.path.isabs(xdg) else os.path.join(home or "/tmp", ".cache")
    key = "\0".join([os.path.abspath(runner.cwd), runner.executable, *runner.startup, *args])
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(top, "bazel-ldfix", "last-flags", digest)


def _read_memo(path: str | None) -> tuple[str, ...]:
    if path is None:
        return ()
    try:
        with open(path, encoding="utf-8") as fh:
            return tuple(line for line in fh.read().splitlines() if line.startswith("--"))
    except OSError:
        return ()


def _write_memo(path: str | None, flags: Sequence[str]) -> None:
    """Best effort: a cache that cannot be written only costs time."""
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("".join(f"{flag}\n" for flag in flags))
        os.replace(tmp, path)
    except OSError:
        pass

"""``bazel-ldfix diagnose``: what a failed test could not load, where it is, and the fix.

Two halves. :func:`parse_log` is pure: glibc's words in, :class:`LoaderFailure` out, for the
messages of the program's start (``error while loading shared libraries``, ``symbol lookup
error``, ``version ... not found``) and the same failures reported through ``dlopen`` (Python's
``ImportError``/``OSError``, anything that prints ``dlerror()``). :func:`diagnose` explains
each failure with the files Bazel left behind: the test executable (resolved with the loader
model, as the repair does), the copies under output_base (chosen as the repair chooses), the
``.gnu.version_d`` of each candidate, and the ``_solib_*`` directories that say which
``cc_import`` staged what. It never runs Bazel.

What is read from a message is reported as known; what the model or a directory name
suggests is said to be so.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bazel_ldfix import elf, pathlist
from bazel_ldfix.bazel import runfiles
from bazel_ldfix.diagnosis import fixes, logs
from bazel_ldfix.diagnosis.fixes import Fix, SolibImport
from bazel_ldfix.errors import BadInputError, LdfixError
from bazel_ldfix.loader.search import Environment, Loader, PassedOver, PassReason
from bazel_ldfix.outputbase import index

if TYPE_CHECKING:
    from bazel_ldfix.repair.plan import Missing

# -- reading glibc's words ------------------------------------------------------------------


class ErrorKind(str, enum.Enum):
    """Which of glibc's loader errors a line reports."""

    CANNOT_OPEN = "cannot_open"                # X: cannot open shared object file
    WRONG_CLASS = "wrong_elf_class"            # X: wrong ELF class: ELFCLASS32
    VERSION_NOT_FOUND = "version_not_found"    # F: version `V' not found (required by P)
    UNDEFINED_SYMBOL = "undefined_symbol"      # O: undefined symbol: S
    FILE_TOO_SHORT = "file_too_short"          # F: file too short
    INVALID_ELF_HEADER = "invalid_elf_header"  # F: invalid ELF header
    OTHER = "other"                            # any other error while loading


# Kinds that mean "the loader did not find a usable file by this name", which the repair's
# LD_LIBRARY_PATH addresses.
_NOT_FOUND_KINDS = (ErrorKind.CANNOT_OPEN, ErrorKind.WRONG_CLASS)


@dataclass(frozen=True)
class LoaderFailure:
    """One loader error, as the log says it."""

    kind: ErrorKind
    name: str                   # what glibc names: a soname or a path (for a version error,
                                # the file lacking it; for a symbol, the object needing it)
    detail: str                 # glibc's words after the name
    program: str | None         # the program, when the line starts with it
    dlopen: bool                # reported through dlopen (an exception), not at start-up
    required_by: str | None = None
    version: str | None = None
    symbol: str | None = None
    line: str = ""
    line_number: int = 0

    @property
    def soname(self) -> str | None:
        """The library's name as the loader looked for it (a path's last component)."""
        if self.kind is ErrorKind.UNDEFINED_SYMBOL:
            return None
        return os.path.basename(self.name)

    @property
    def by_path(self) -> bool:
        """glibc names a path: the file it opened, or a name that was itself a path."""
        return "/" in self.name


# A library name or path: no blanks, colons, quotes or brackets (which surround it in
# Python's repr, JSON and most log formats).
_NAME = r"(?P<name>[^\s:'\"`()\[\]]+)"
_QUOTE_OPEN, _QUOTE_CLOSE = "[`'\u2018\"]", "[`'\u2019\"]"
_PATTERNS: tuple[tuple[ErrorKind, re.Pattern[str]], ...] = (
    (ErrorKind.CANNOT_OPEN, re.compile(
        _NAME + r": cannot open shared object file(?:: (?P<detail>[A-Za-z][^'\"()\[\]]*))?")),
    (ErrorKind.WRONG_CLASS, re.compile(_NAME + r": (?P<detail>wrong ELF class: ELFCLASS\w+)")),
    (ErrorKind.VERSION_NOT_FOUND, re.compile(
        _NAME + r": version " + _QUOTE_OPEN + r"(?P<version>[^`'\u2019\"\s]+)" + _QUOTE_CLOSE
        + r" not found \(required by (?P<required_by>[^()]+?)\)")),
    (ErrorKind.UNDEFINED_SYMBOL, re.compile(
        _NAME + r": undefined symbol: (?P<symbol>[^\s,'\"()]+)"
        r"(?:, version (?P<version>[^\s'\"()]+))?")),
    (ErrorKind.FILE_TOO_SHORT, re.compile(_NAME + r": (?P<detail>file too short)")),
    (ErrorKind.INVALID_ELF_HEADER, re.compile(_NAME + r": (?P<detail>invalid ELF header)")),
)
_STARTUP = "error while loading shared libraries: "
_SYMBOL_LOOKUP = "symbol lookup error: "
_STARTUP_OTHER = re.compile(re.escape(_STARTUP) + _NAME + r": (?P<detail>.+?)\s*$")
# Other messages of glibc's dl-load.c and friends, as dlerror() reports them.
_DLOPEN_OTHER = re.compile(_NAME + r": (?P<detail>"
                           r"cannot read file data|"
                           r"cannot enable executable stack as shared object requires"
                           r"[^'\"()\[\]]*|"
                           r"cannot allocate memory in static TLS block|"
                           r"cannot dynamically load (?:position-independent )?executable|"
                           r"only ET_DYN and ET_EXEC can be loaded|"
                           r"object file has no (?:dynamic section|loadable segments)|"
                           r"failed to map segment from shared object|"
                           r"ELF load command address/offset not page-aligned|"
                           r"ELF file (?:data encoding not [a-z]+-endian|OS ABI invalid|"
                           r"ABI version invalid|version does not match current one|"
                           r"'s phentsize not the expected size))")
# Cheap tests before any regular expression: every message above contains one of these.
_KEYWORDS = ("shared object", "ELF", "version", "undefined symbol", "file too short",
             "cannot read file data", "static TLS", "dynamically load", "loadable segments",
             "map segment")
_NEEDLES = tuple(k.encode() for k in _KEYWORDS)
# Bazel's sandbox debug lines (--sandbox_debug) name paths, never loader errors.
_SANDBOX_DEBUG = re.compile(r"^\d+\.\d+: src/main/tools/")


def parse_log(lines: Iterable[str]) -> tuple[LoaderFailure, ...]:
    """Every loader failure a log reports, once each, in the order first seen."""
    return parse_numbered(enumerate(lines, 1))


def parse_numbered(lines: Iterable[tuple[int, str]]) -> tuple[LoaderFailure, ...]:
    """:func:`parse_log` for ``(line number, line)`` pairs (some lines left out)."""
    out: dict[tuple[Any, ...], LoaderFailure] = {}
    for number, line in lines:
        failure = parse_line(line, number)
        if failure is None:
            continue
        key = (failure.kind, failure.name, failure.version, failure.symbol,
               failure.required_by)
        out.setdefault(key, failure)
    return tuple(out.values())


def read_log(path: str) -> tuple[LoaderFailure, ...]:
    """The loader failures in the log at ``path``, read in chunks (any size will do)."""
    return parse_numbered(logs.read_matching(path, _NEEDLES))


def parse_line(line: str, number: int = 0) -> LoaderFailure | None:
    """The loader failure one line reports, or None."""
    if not any(k in line for k in _KEYWORDS) or _SANDBOX_DEBUG.match(line):
        return None
    text = line.strip()
    for kind, pattern in _PATTERNS:
        match = pattern.search(text)
        if match:
            return _failure(kind, match, text, number)
    match = _STARTUP_OTHER.search(text) or _DLOPEN_OTHER.search(text)
    return _failure(ErrorKind.OTHER, match, text, number) if match else None


def _failure(kind: ErrorKind, match: re.Match[str], text: str,
             number: int) -> LoaderFailure | None:
    groups = match.groupdict()
    prefix = text[: match.start("name")]
    program, dlopen = _who(prefix)
    if dlopen and ".so" not in groups["name"] and "/" not in groups["name"]:
        # Not the loader's report (which always names a library or a path), but prose that
        # quotes its words: "expected error: cannot open shared object file".
        return None
    detail = groups.get("detail") or {
        ErrorKind.CANNOT_OPEN: "cannot open shared object file",
        ErrorKind.VERSION_NOT_FOUND: f"version {groups.get('version')} not found",
        ErrorKind.UNDEFINED_SYMBOL: f"undefined symbol: {groups.get('symbol')}",
    }.get(kind, "")
    if kind is ErrorKind.CANNOT_OPEN:
        detail = "cannot open shared object file" + (
            f": {groups['detail']}" if groups.get("detail") else "")
    return LoaderFailure(kind, groups["name"], detail.strip(), program, dlopen,
                         (groups.get("required_by") or "").strip() or None,
                         groups.get("version"), groups.get("symbol"), text, number)


def _who(prefix: str) -> tuple[str | None, bool]:
    """(program, reported through dlopen) from what precedes the name in the line.

    ``PROG: error while loading shared libraries: `` and ``PROG: symbol lookup error: `` are
    the loader's own start-up reports; ``PROG: `` alone precedes a version error at start-up.
    Anything else (``OSError: ``, ``ImportError: ``, a logger's prefix) is a dlopen caller.
    """
    for marker in (_STARTUP, _SYMBOL_LOOKUP):
        if prefix.endswith(marker):
            head = prefix[: -len(marker)].rstrip()
            return (_last_word(head.removesuffix(":")) or None), False
    head = prefix.rstrip()
    if head.endswith(":"):
        word = _last_word(head[:-1])
        if "/" in word and not word.endswith(("Error", "Exception")):
            return word, False
    return None, True


def _last_word(text: str) -> str:
    return text.split()[-1] if text.split() else ""


# -- explaining -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One library one test could not load, explained, with the three fixes."""

    test: str | None
    log: str
    error_kind: ErrorKind
    soname: str | None
    needed_by: tuple[str, ...]
    found: tuple[str, ...]          # usable copies, best first (the repair's choice)
    fix: Fix
    message: str                    # the log's line ("" for a predicted one)
    seen_in_log: bool               # False: predicted by the loader model
    needed_by_source: str           # "message", "loader model" or "unknown"
    version: str | None = None
    symbol: str | None = None
    passed_over: tuple[PassedOver, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    source: str
    output_base: str | None
    findings: tuple[Finding, ...]
    logs_read: int
    other_failures: tuple[str, ...]     # failed tests (or logs) with no loader error
    passed: int
    notes: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """0: nothing to diagnose; 1: loader failures found."""
        return 1 if self.findings else 0


MakeLoader = Callable[[elf.ElfInfo, Environment], Loader]
CacheFor = Callable[[elf.ElfInfo], "Callable[[str], str | None] | None"]


def diagnose(found_logs: logs.LogSet, *, library_path: str | None = None,
             make_loader: MakeLoader | None = None, cache_for: CacheFor | None = None,
             on_error: Callable[[str, OSError], None] | None = None,
             shell_library_path: str | None = None) -> Diagnosis:
    """Read each log, and explain every loader failure in it (see the module docstring).

    ``shell_library_path`` is the LD_LIBRARY_PATH of the shell Bazel was started from, the
    value a test gets in Bazel 4 when no --test_env sets one (a note says a flag replaces it).

    ``library_path`` is the LD_LIBRARY_PATH the tests had, when known (the value
    ``bazel-ldfix test`` added, or the BEP's ``--test_env``); the loader model resolves with
    it and the suggested value keeps it. ``make_loader`` and ``cache_for`` default to this
    machine's loader and cache, as the repair uses them.
    """
    make_loader = make_loader or _host_loader
    cache_for = cache_for or _host_cache
    library_path = library_path if library_path is not None else found_logs.library_path
    grouped: dict[str, list[tuple[logs.TestLog, tuple[LoaderFailure, ...]]]] = {}
    other: list[str] = []
    notes = list(found_logs.notes)
    for log in found_logs.logs:
        try:
            failures = read_log(log.path)
        except BadInputError as exc:
            notes.append(f"skipped {exc}")
            continue
        if failures:
            grouped.setdefault(log.label or log.path, []).append((log, failures))
        elif (log.label or log.path) not in other:
            other.append(log.label or log.path)
    other = [o for o in other if o not in grouped]
    findings: list[Finding] = []
    for entries in grouped.values():
        test = _TestContext.build(entries, found_logs.output_base, library_path, make_loader,
                                  cache_for, on_error)
        findings += test.explain(entries)
    if library_path is None and shell_library_path and any(f.fix.flag for f in findings):
        notes.append(f"your shell has LD_LIBRARY_PATH={shell_library_path}, which Bazel 4 "
                     "passes to tests (without --incompatible_strict_action_env); the "
                     "--test_env=LD_LIBRARY_PATH below replaces it: add to it, or let "
                     "`bazel-ldfix test` merge it")
    return Diagnosis(found_logs.source, found_logs.output_base, tuple(findings),
                     len(found_logs.logs), tuple(other), found_logs.passed, tuple(notes))


@dataclass
class _Explained:
    """The part of a finding that does not depend on the other failures of the test."""

    failure: LoaderFailure | None
    soname: str | None
    needed_by: tuple[str, ...] = ()
    needed_by_source: str = "unknown"
    found: tuple[str, ...] = ()
    passed_over: tuple[PassedOver, ...] = ()
    notes: list[str] = field(default_factory=list)
    append: tuple[str, ...] = ()        # directories LD_LIBRARY_PATH needs, after the rest
    prepend: tuple[str, ...] = ()       # ... before the rest (to win over a bad copy)
    ldfix: bool = False                 # `bazel-ldfix test` finds it by itself
    modelled: bool = False              # the loader model misses it too
    build: str | None = None
    kind: ErrorKind = ErrorKind.CANNOT_OPEN
    log: str = ""


@dataclass
class _TestContext:
    """What is known about one failed test: its executable, the model's view, its imports."""

    label: str | None
    executable: str | None
    expect: elf.ElfHeader
    output_base: str | None
    library_path: str | None
    missing: Mapping[str, Missing]          # soname -> what the repair's model misses
    imports: list[SolibImport]
    other_imports: list[SolibImport]
    notes: list[str]
    on_error: Callable[[str, OSError], None] | None

    @classmethod
    def build(cls, entries: Sequence[tuple[logs.TestLog, tuple[LoaderFailure, ...]]],
              output_base: str | None, library_path: str | None, make_loader: MakeLoader,
              cache_for: CacheFor,
              on_error: Callable[[str, OSError], None] | None) -> _TestContext:
        label = entries[0][0].label
        notes: list[str] = []
        executable = _executable(entries)
        output_base = output_base or next(
            (ob for ob in (logs.output_base_of(p) for p in _paths_named(entries)) if ob), None)
        expect = _host_header()
        info = None
        if executable is not None:
            try:
                info = elf.read_elf(executable)
                expect = info.header
            except BadInputError:
                info = None     # a script (sh_test, py_test)
        missing: dict[str, Missing] = {}
        if executable is not None and output_base is not None:
            missing = _model(label, executable, output_base, library_path, make_loader,
                             cache_for, on_error, notes)
        elif executable is None:
            notes.append("the test executable is gone (bazel clean?) or unknown: who needs "
                         "the library comes from the message alone")
        imports = other = []
        if executable is not None:
            # Canonical repository names (@@+ext+nvsdk, @@nvsdk~) are printed as the main
            # repository writes them, from the test's runfiles repository mapping.
            mapping = runfiles.repo_mapping_of(executable)
            apparent = mapping.label if mapping is not None else None
            imports = fixes.solib_imports(fixes.solib_dirs_of(executable), apparent)
            own = {i.staged for i in imports}
            other = [i for i in fixes.solib_imports(fixes.every_solib_dir(executable),
                                                    apparent)
                     if i.staged not in own]
        return cls(label, executable, expect, output_base, library_path, missing, imports,
                   other, notes, on_error)

    # -- per failure --------------------------------------------------------------------

    def explain(self, entries: Sequence[tuple[logs.TestLog, tuple[LoaderFailure, ...]]]
                ) -> list[Finding]:
        explained: list[_Explained] = []
        seen: set[tuple[Any, ...]] = set()
        for log, failures in entries:
            for failure in failures:
                key = (failure.kind, failure.soname, failure.version, failure.symbol)
                if key in seen:
                    continue        # the same failure in another shard, run or attempt
                seen.add(key)
                one = self._explain(failure)
                one.log = log.path
                explained.append(one)
        if any(e.modelled for e in explained):
            # The loader stops at the first library it cannot load; the model knows the rest.
            shown = {e.soname for e in explained}
            for soname, missing in self.missing.items():
                if soname not in shown:
                    one = self._from_model(soname, missing)
                    one.log = explained[0].log
                    one.notes.insert(0, "predicted by the loader model: the loader stops at "
                                        "the first library it cannot load, so the log cannot "
                                        "show this one yet")
                    explained.append(one)
        base = pathlist.split(self.library_path)
        value = fixes.library_path_value(
            base, [d for e in explained for d in e.append],
            [d for e in explained for d in e.prepend])
        ldfix = all(e.ldfix for e in explained if e.append or e.prepend) and any(
            e.ldfix for e in explained)
        out = []
        for e in explained:
            helps = bool(e.append or e.prepend)
            fix = Fix(fixes.command(self.label, value, ldfix=ldfix) if helps else None,
                      fixes.flag(value) if helps else None,
                      fixes.bazelrc(value) if helps else None,
                      e.build)
            seen_failure = e.failure
            out.append(Finding(
                self.label, e.log, e.kind, e.soname, e.needed_by, e.found, fix,
                seen_failure.line if seen_failure else "", seen_failure is not None,
                e.needed_by_source, seen_failure.version if seen_failure else None,
                seen_failure.symbol if seen_failure else None,
                e.passed_over, tuple(e.notes + (self.notes if seen_failure else []))))
        return out

    def _explain(self, failure: LoaderFailure) -> _Explained:
        kind = failure.kind
        if kind is ErrorKind.VERSION_NOT_FOUND:
            return self._version(failure)
        if kind is ErrorKind.UNDEFINED_SYMBOL:
            return self._symbol(failure)
        if kind in _NOT_FOUND_KINDS and not failure.by_path:
            return self._not_found(failure)
        return self._bad_file(failure)

    def _not_found(self, failure: LoaderFailure) -> _Explained:
        soname = failure.soname or failure.name
        missing = self.missing.get(soname)
        if missing is not None:
            one = self._from_model(soname, missing)
        else:
            one = self._search(soname)
            linked = any(i.soname == soname for i in self.imports)
            if failure.dlopen and not linked:
                one.needed_by_source = "dlopen"
                one.notes.append("loaded with dlopen by name: no ELF file of the test names "
                                 "it, so bazel-ldfix test cannot know it is needed; the flag "
                                 "below adds its directory")
                one.build = fixes.dlopen_by_name(
                    soname, one.found[0] if one.found else None, self.output_base, self.label)
            elif self.executable is not None and self.output_base is not None:
                one.notes.append("the loader model finds it in the environment assumed "
                                 f"({_describe_env(self.library_path)}, outside the "
                                 "sandbox): the test ran with another LD_LIBRARY_PATH (an env "
                                 "attribute, a --test_env, or your shell's), or the model saw "
                                 "a file the sandbox hides (a stale _solib_ symlink of an "
                                 "earlier build)")
        one.failure = failure
        one.kind = failure.kind
        if failure.kind is ErrorKind.WRONG_CLASS:
            one.notes.append(f"every {soname} the loader tried was of the other class "
                             f"({failure.detail}); it skips those and keeps searching")
        return one

    def _from_model(self, soname: str, missing: Missing) -> _Explained:
        """A name the model also misses: the repair's own answer (its choice, its reasons)."""
        one = _Explained(None, soname, tuple(missing.needed_by),
                         "loader model" if missing.needed_by else "unknown", modelled=True)
        one.found, one.passed_over = _split_choice(missing.dir, soname, missing.passed_over)
        if missing.dir is not None:
            one.append = (missing.dir,)
            one.ldfix = True
        else:
            # The repair looks beside the libraries the loader found and under
            # output_base/external. A cc_import of this workspace stages a file of the
            # source tree, and its versioned file sits beside it there.
            near = index.locate([soname], [], self.expect, self._preferred(),
                                self.on_error)[soname]
            if near.dir is not None:
                one.found, one.passed_over = _split_choice(near.dir, soname, near.passed_over)
                one.append = (near.dir,)
                one.notes.append("found beside the file a cc_import of the test stages, "
                                 "where bazel-ldfix test does not look")
            else:
                one.notes.append(self._nowhere(soname))
        one.build = self._build(soname, one.found)
        return one

    def _search(self, soname: str) -> _Explained:
        """Look for ``soname`` as the repair would, for a name the model does not miss."""
        one = _Explained(None, soname)
        if self.output_base is None:
            one.notes.append("output_base unknown (pass --output-base): not searched")
            return one
        choice = index.locate([soname], self._roots(), self.expect, self._preferred(),
                              self.on_error)[soname]
        one.found, one.passed_over = _split_choice(choice.dir, soname, choice.passed_over)
        if choice.dir is not None:
            one.append = (choice.dir,)
        else:
            one.notes.append(self._nowhere(soname))
        one.build = self._build(soname, one.found)
        return one

    def _version(self, failure: LoaderFailure) -> _Explained:
        lacking = logs.unsandbox(failure.name)
        soname = failure.soname or lacking
        if os.path.isfile(lacking):
            with contextlib.suppress(BadInputError):
                soname = elf.read_elf(lacking).soname or soname
        version = failure.version or ""
        required_by = _real(logs.unsandbox(failure.required_by)) if failure.required_by \
            else None
        one = _Explained(failure, soname, (required_by,) if required_by else (),
                         "message" if required_by else "unknown", kind=failure.kind)
        one.notes.append(f"the loader took {lacking}, which does not define {version}"
                         + _defined_note(lacking))
        if version.startswith("GLIBC_"):
            one.notes.append(
                f"{version} is glibc's own: glibc's libraries must match the ld.so that "
                "starts the test, so no LD_LIBRARY_PATH can bring a newer one. Build "
                f"{required_by or 'the object'} for the oldest glibc it must run on (a sysroot "
                "toolchain), or run the test where glibc is at least that new")
            return one
        if self.output_base is None:
            one.notes.append("output_base unknown (pass --output-base): not searched")
            return one
        candidates = self._candidates(soname)
        defining = []
        for path in candidates:
            if index.check_candidate(path, self.expect) is None and version in _versions(path):
                defining.append(path)
        choice = index.choose(soname, defining, self.expect, self._preferred())
        one.found, one.passed_over = _split_choice(choice.dir, soname, choice.passed_over)
        if choice.dir is None:
            others = ", ".join(candidates) if candidates else "none"
            one.notes.append(f"no {soname} under {self.output_base}/external or beside the "
                             f"test's libraries defines {version} (copies seen: {others})")
            if version.startswith(("GLIBCXX_", "CXXABI_")):
                one.notes.append(
                    f"the C++ toolchain that built {required_by or 'the object'} is newer "
                    f"than the {soname} the test loads: ship that toolchain's {soname} with "
                    "the test (a cc_import of it), or link with -static-libstdc++")
            return one
        one.prepend = (choice.dir,)
        one.notes.append(f"{choice.path} defines {version}; LD_LIBRARY_PATH is searched "
                         "before RUNPATH, ld.so.cache and the system directories, so it wins "
                         "over the copy taken now (unless that one was found through a "
                         "DT_RPATH or an earlier LD_LIBRARY_PATH entry)")
        build = self._build(soname, one.found, version)
        if not _is_system(lacking) and not any(_same_file(i.staged, lacking)
                                               for i in self.imports):
            # Not a system copy and not one Bazel staged: it came through LD_LIBRARY_PATH
            # (or a DT_RPATH), which every RUNPATH, hence every BUILD change, comes after.
            build = (f"{os.path.dirname(lacking)} is not a system directory nor one Bazel "
                     "staged, so the loader found it through LD_LIBRARY_PATH (an env "
                     "attribute, a --test_env, or the shell's) or a DT_RPATH (guessed). Take "
                     "it out of the test's environment first; nothing in a BUILD file can "
                     "come before it.\n" + ("\n" + build if build else ""))
        one.build = build
        return one

    def _symbol(self, failure: LoaderFailure) -> _Explained:
        obj = _real(logs.unsandbox(failure.name))
        one = _Explained(failure, None, (obj,), "message", kind=failure.kind)
        version = f" (version {failure.version})" if failure.version else ""
        one.notes.append(
            f"{obj} uses {failure.symbol}{version}, which no object loaded with it defines: "
            "it was built against another version of one of its libraries, or a library it "
            "needs is missing from its DT_NEEDED entries. bazel-ldfix does not search symbol "
            "tables; `nm -D --defined-only` on the candidates tells which file defines it")
        return one

    def _bad_file(self, failure: LoaderFailure) -> _Explained:
        """The loader named a file it could not use (or a name that was itself a path)."""
        path = logs.unsandbox(failure.name)
        soname = os.path.basename(path)
        one = self._search(soname) if failure.kind is not ErrorKind.OTHER or "/" in path \
            else _Explained(failure, soname)
        one.failure, one.kind = failure, failure.kind
        one.needed_by, one.needed_by_source = (), "unknown"   # the message does not say
        described = _describe_file(path)
        if described:
            one.notes.append(described)
        if failure.kind is ErrorKind.OTHER:
            one.notes.append(_OTHER_HINTS.get(_hint_key(failure.detail),
                                              f"glibc says: {failure.detail}"))
            one.append = ()
            return one
        if failure.kind is ErrorKind.WRONG_CLASS:
            opener = "a dlopen call" if failure.dlopen else "a DT_NEEDED entry with a slash"
            one.notes.append(
                f"{path} was opened by its path ({opener}): LD_LIBRARY_PATH cannot redirect a "
                "path; the path itself must name a file of the test's class and machine"
                + (f", such as {one.found[0]}" if one.found else ""))
            one.append = ()
            one.build = None
            return one
        # file too short / invalid ELF header: the search stopped at a broken copy.
        one.prepend, one.append = one.append, ()
        if one.found:
            one.notes.append(f"the loader stops at a broken copy instead of going on; put "
                             f"{os.path.dirname(one.found[0])} first on LD_LIBRARY_PATH, "
                             "which is searched before RUNPATH, ld.so.cache and the system "
                             "directories (not before a DT_RPATH)")
        staged = [i for i in self.imports if _same_file(i.staged, path)]
        if staged:
            imp = staged[0]
            one.build = (f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) imports "
                         f"{imp.attribute_value}, which is not a usable library "
                         f"({failure.detail}). Fix the repository's content (a real file, "
                         "not a Git LFS pointer or a truncated download); the cc_import "
                         "itself can stay.\n")
        return one

    # -- helpers ------------------------------------------------------------------------

    def _roots(self) -> list[str]:
        return [os.path.join(self.output_base, "external")] if self.output_base else []

    def _preferred(self) -> tuple[str, ...]:
        return index.preferred_dirs(i.staged for i in self.imports)

    def _candidates(self, soname: str) -> list[str]:
        found: dict[str, None] = {}
        for directory in self._preferred():
            path = os.path.join(directory, soname)
            if os.path.isfile(path):
                found.setdefault(path, None)
        for root in self._roots():
            if os.path.isdir(root):
                for path in index.walk(root, soname.__eq__, self.on_error).get(soname, ()):
                    found.setdefault(path, None)
        return list(found)

    def _nowhere(self, soname: str) -> str:
        where = (f"{self.output_base}/external, and beside the libraries the test links"
                 if self.output_base else "beside the libraries the test links; output_base "
                 "unknown")
        return (f"no usable {soname} exists anywhere searched ({where}): it must come from "
                "somewhere else (an SDK not fetched, a system package)")

    def _build(self, soname: str, found: Sequence[str],
               version: str | None = None) -> str | None:
        """The hermetic fix: which cc_import to change (or add), and how.

        For a version error, only a file that defines the version will do.
        """
        def usable(path: str) -> bool:
            return version is None or version in _versions(path)

        for imp in (i for i in self.imports if i.soname == soname):
            if imp.file == soname:
                if usable(imp.staged):
                    return None     # staged under the right name already (see the notes)
                return _verified(imp, (
                    f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) stages a "
                    f"{soname} that does not define {version}. Import a newer one"
                    + (f", such as {found[0]}" if found else "") + ".\n"))
            versioned = fixes.versioned_in_repository(imp, soname, found, usable)
            if versioned is not None:
                return _verified(imp, fixes.import_versioned(imp, soname, versioned))
            return _verified(imp, (
                f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) imports "
                f"{imp.attribute_value}, whose SONAME is {soname}, and Bazel stages only "
                f"{imp.file}; but no usable file named {soname} is in that package. The "
                f"repository must provide one (a symlink {soname} -> {imp.file} made by its "
                "repository rule, or a copy_file/genrule) for the cc_import to import as "
                "shared_library.\n"))
        carrier = self._carrier(soname)
        for imp in (i for i in self.other_imports if i.soname == soname):
            text = fixes.add_dependency(imp, carrier.label, carrier.why)
            if imp.file != soname:
                versioned = fixes.versioned_in_repository(imp, soname, found, usable)
                if versioned is None:
                    continue
                text = fixes.import_versioned(imp, soname, versioned) + "\n" + text
            elif not usable(imp.staged):
                continue
            return _verified(imp, text)
        if found:
            return fixes.new_import(soname, found[0], self.output_base, carrier.label,
                                    carrier.why)
        return None

    def _carrier(self, soname: str) -> fixes.Carrier:
        """The target whose deps can carry a dependency on ``soname``'s import.

        Bazel stages a cc_import's library for the C/C++ target that depends on it; a
        py_test or sh_test takes no cc_import in its deps. So the dependency goes on the
        target that links the object needing ``soname``: the test itself when its executable
        needs it, else the C/C++ target that built that object (read from where Bazel put
        it), going up through prebuilt libraries (``libvendor.so.3`` needs
        ``libvendor_core.so.3``: whatever links ``libvendor.so.3`` carries both).
        """
        seen: set[str] = set()
        wanted = [soname]
        while wanted:
            name = wanted.pop(0)
            if name in seen:
                continue
            seen.add(name)
            missing = self.missing.get(name)
            for needer in missing.needed_by if missing else ():
                if self.executable and _same_file(needer, self.executable):
                    return fixes.Carrier(self.label, None if name == soname else
                                         f"it links {name}, which needs {soname}")
                try:
                    needer_soname = elf.read_elf(needer).soname
                except BadInputError:
                    needer_soname = None
                if needer_soname in self.missing or _is_prebuilt(needer, self.output_base):
                    if needer_soname:
                        wanted.append(needer_soname)
                    continue
                label = fixes.label_of_output(needer)
                if label is not None:
                    what = f"which needs {soname}" if name == soname else \
                        f"which needs {name}, which needs {soname}"
                    return fixes.Carrier(label, f"the C/C++ target that builds "
                                                f"{os.path.basename(needer)}, {what}")
        return fixes.Carrier(self.label, None)


def with_loader(loader: str | None) -> dict[str, Any]:
    """``make_loader`` and ``cache_for`` for :func:`diagnose` asking the loader the user
    named (``--loader``) instead of the host's; nothing for None."""
    if loader is None:
        return {}
    from bazel_ldfix.loader.resolve import Options, cache_lookup, host_of, interp_for

    def make_loader(info: elf.ElfInfo, env: Environment) -> Loader:
        return Loader(host_of(interp_for(info, loader)), env)

    def cache_for(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
        return cache_lookup(info, Options(loader=loader))

    return {"make_loader": make_loader, "cache_for": cache_for}


def model_missing(label: str | None, executable: str, output_base: str,
                  library_path: str | None) -> tuple[str, ...]:
    """Every name the loader model misses for one test, its libraries' own included."""
    return tuple(_model(label, executable, output_base, library_path, _host_loader,
                        _host_cache, None, []))


def _host_loader(info: elf.ElfInfo, env: Environment) -> Loader:
    from bazel_ldfix.loader.resolve import host_of, interp_for

    return Loader(host_of(interp_for(info)), env)


def _host_cache(info: elf.ElfInfo) -> Callable[[str], str | None] | None:
    from bazel_ldfix.loader.resolve import Options, cache_lookup

    return cache_lookup(info, Options())


def _model(label: str | None, executable: str, output_base: str, library_path: str | None,
           make_loader: MakeLoader, cache_for: CacheFor,
           on_error: Callable[[str, OSError], None] | None,
           notes: list[str]) -> dict[str, Missing]:
    """What the repair finds missing for this test, by soname."""
    from bazel_ldfix.repair import plan as repair

    key = label or executable
    env = repair.TestEnvironment(pathlist.split(library_path),
                                 "the run's --test_env" if library_path else "nothing",
                                 {key: library_path})
    try:
        plan = repair.plan([repair.TestInput(key, executable)], env, output_base, make_loader,
                           cache_for, on_error=on_error)
    except LdfixError as exc:
        notes.append(f"the loader model could not resolve {executable}: {exc}")
        return {}
    return _chain({m.soname: m for m in plan.missing}, library_path, make_loader, cache_for,
                  output_base, on_error)


def _chain(found: Mapping[str, Missing], library_path: str | None, make_loader: MakeLoader,
           cache_for: CacheFor, output_base: str,
           on_error: Callable[[str, OSError], None] | None) -> dict[str, Missing]:
    """``found`` plus what each library found there misses by itself in the test's own
    environment: what the test misses next once that library is staged by a BUILD fix.

    The repair's rounds resolve with every directory found so far, so a dependency that sits
    beside its parent is never missing there; whether it shows depends on the order the
    rounds met the files. Resolving each found file on its own makes the prediction the same
    for every test whose chain allows it.
    """
    from bazel_ldfix.repair.plan import Missing as MissingLibrary

    out = dict(found)
    pending = [m for m in found.values() if m.dir is not None]
    while pending:
        parent = pending.pop(0)
        assert parent.dir is not None
        path = os.path.join(parent.dir, parent.soname)
        try:
            info = elf.read_elf(path)
            env = Environment(library_path, parent.dir, cache_for(info))
            resolution = make_loader(info, env).resolve(path, info=info)
        except LdfixError:
            continue
        for lib in resolution.libraries:
            if lib.path is not None or lib.error is not None or lib.name in out:
                continue
            choice = index.locate([lib.name], [os.path.join(output_base, "external")],
                                  info.header, [parent.dir], on_error)[lib.name]
            needed_by = tuple(path if n == resolution.file else n for n in lib.needed_by)
            out[lib.name] = MissingLibrary(lib.name, needed_by, choice.dir,
                                           choice.passed_over)
            pending.append(out[lib.name])
    return out


def _split_choice(directory: str | None, soname: str,
                  passed_over: Sequence[PassedOver]
                  ) -> tuple[tuple[str, ...], tuple[PassedOver, ...]]:
    """(usable copies best first, the others) from one of index.choose's answers."""
    if directory is None:
        return (), tuple(passed_over)
    good = [os.path.join(directory, soname)]
    rest = []
    for p in passed_over:
        if p.kind is PassReason.NOT_PREFERRED:
            good.append(p.path)
        elif p.kind is not PassReason.SAME_FILE:
            rest.append(p)
    return tuple(good), tuple(rest)


def _executable(entries: Sequence[tuple[logs.TestLog, tuple[LoaderFailure, ...]]]
                ) -> str | None:
    for log, _ in entries:
        exe = logs.executable_for(log.path)
        if exe is not None:
            return exe
    for _, failures in entries:
        for failure in failures:
            if failure.program and not failure.dlopen:
                path = logs.unsandbox(failure.program)
                if os.path.isfile(path):
                    return os.path.realpath(path)
    return None


def _paths_named(entries: Sequence[tuple[logs.TestLog, tuple[LoaderFailure, ...]]]
                 ) -> list[str]:
    out = []
    for log, failures in entries:
        out.append(os.path.realpath(log.path))
        for f in failures:
            out += [p for p in (f.program, f.name, f.required_by) if p]
    return out


def _host_header() -> elf.ElfHeader:
    """The class and machine to judge candidates by when the test is a script."""
    return elf.read_header(os.path.realpath(sys.executable))


def _real(path: str) -> str:
    """The file behind a runfiles or _solib_ path, when it still exists."""
    return os.path.realpath(path) if os.path.exists(path) else path


def _versions(path: str) -> tuple[str, ...]:
    try:
        return elf.version_definitions(path)
    except BadInputError:
        return ()


def _defined_note(path: str) -> str:
    if not os.path.isfile(path):
        return ""
    versions = _versions(path)
    if not versions:
        return " (it defines no versions)"
    shown = ", ".join(versions[-4:])
    return f" (its newest: {shown})" if len(versions) > 4 else f" (it defines {shown})"


def _describe_file(path: str) -> str | None:
    if not path.startswith("/") or not os.path.exists(path):
        return None
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    if head.startswith(b"version https://git-lfs"):
        return (f"{path} is a Git LFS pointer ({size} bytes), not the library: the "
                "repository was fetched without `git lfs pull`")
    if head.startswith(b"/* GNU ld script") or head.startswith(b"INPUT(") \
            or head.startswith(b"GROUP("):
        return f"{path} is a linker script, which only the linker reads"
    if not head.startswith(elf.ELFMAG):
        return f"{path} is not an ELF file ({size} bytes)"
    if size < 64:
        return f"{path} is {size} bytes long: a truncated download?"
    return None


_SYSTEM_PREFIXES = ("/lib/", "/lib64/", "/lib32/", "/libx32/", "/usr/lib/", "/usr/lib64/",
                    "/usr/lib32/", "/usr/libx32/", "/usr/local/lib/")


def _is_system(path: str) -> bool:
    """In a directory the loader reaches through ld.so.cache or its defaults (roughly)."""
    return path.startswith(_SYSTEM_PREFIXES)


def _is_prebuilt(path: str, output_base: str | None) -> bool:
    """A library Bazel did not build: staged from a cc_import, or under external/."""
    real = os.path.realpath(path)
    return "/_solib_" in path or "/bazel-out/" not in real or bool(
        output_base and real.startswith(os.path.join(output_base, "external") + "/"))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _verified(imp: SolibImport, text: str) -> str:
    if imp.verified:
        return text
    return text + (f"(the label {imp.shown_label} is decoded from {os.path.dirname(imp.staged)}; "
                   "its repository path did not lead back to the staged file, so check it "
                   "with `bazel query`)\n")


def _describe_env(library_path: str | None) -> str:
    return f"LD_LIBRARY_PATH={library_path}" if library_path else "no LD_LIBRARY_PATH"


def _hint_key(detail: str) -> str:
    for key in _OTHER_HINTS:
        if detail.startswith(key):
            return key
    return detail


_OTHER_HINTS = {
    "cannot enable executable stack": (
        "the library asks for an executable stack (PT_GNU_STACK with PF_X), which this "
        "system refuses: rebuild it with -Wl,-z,noexecstack, or clear the flag "
        "(patchelf --clear-execstack)"),
    "cannot allocate memory in static TLS block": (
        "a library with initial-exec TLS was dlopen()ed after start-up and the static TLS "
        "space is used up: link it into the test (so it loads at start-up) or LD_PRELOAD it"),
    "cannot dynamically load position-independent executable": (
        "dlopen was given a program, not a library"),
    "cannot read file data": (
        "the file is shorter than its ELF header says: a truncated download or copy"),
}


def after_test(output_base: str, exit_code: int, *, library_path: str | None = None,
               on_error: Callable[[str, OSError], None] | None = None,
               shell_library_path: str | None = None) -> Diagnosis | None:
    """What ``bazel-ldfix test`` prints after Bazel's summary: the loader failures of the
    run that just ended, or None (no test failed, or none failed in the loader).

    ``exit_code`` is Bazel's; only 3 (TESTS_FAILED) has test logs worth reading.
    ``library_path`` is the LD_LIBRARY_PATH the run gave its tests (the repair's value).
    """
    if exit_code != TESTS_FAILED:
        return None
    found = logs.from_command_log(output_base)
    if found is None:
        return None
    result = diagnose(found, library_path=library_path, on_error=on_error,
                      shell_library_path=shell_library_path)
    return result if result.findings else None


TESTS_FAILED = 3   # Bazel's exit code when tests ran and some failed


def unmatched_patterns(patterns: Sequence[str], every: logs.LogSet, package: str) -> str:
    """Why target ``patterns`` select nothing: the ones that match no failed test, named,
    and the failed tests there are."""
    labels = list(dict.fromkeys(log.label for log in every.logs if log.label))
    positive = [p for p in patterns if not p.startswith("-")]
    lonely = [p for p in positive
              if not any(logs.matches(label, [p], package) for label in labels)]
    named = " ".join(lonely or patterns)
    failed = (f"the failed tests: {', '.join(labels)}" if labels
              else "no test failed there")
    return f"no failed test matches {named} in {every.source}; {failed}"


# -- output -----------------------------------------------------------------------------------


def to_json(diagnosis: Diagnosis) -> str:
    """``{"version": 1, "failures": [{test, log, error_kind, soname, needed_by, found,
    fix: {command, flag, bazelrc, build}, ...}], ...}``."""
    from bazel_ldfix import report

    return report.dumps({
        "source": diagnosis.source,
        "output_base": diagnosis.output_base,
        "failures": [_finding_json(f) for f in diagnosis.findings],
        "other_failures": list(diagnosis.other_failures),
        "logs_read": diagnosis.logs_read,
        "passed": diagnosis.passed,
        "notes": list(diagnosis.notes),
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


def to_text(diagnosis: Diagnosis, prefix: str = "", *, color: bool = False) -> str:
    """For people: one block per finding, each fix once (see ``diagnose_text``), then one
    summary line."""
    from bazel_ldfix.diagnosis import text as diagnose_text

    return diagnose_text.render(diagnosis, what=_WHAT, summary=_summary(diagnosis),
                                shorten=_shorten, prefix=prefix, color=color)


def _summary(d: Diagnosis) -> str:
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
    if not parts:
        return f"nothing to diagnose in {d.source}: no log could be read"
    return f"from {d.source}: " + "; ".join(parts)


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""The models of one command's tests: each test read once, and resolved once per value of
LD_LIBRARY_PATH, or moved from a twin's resolution."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable, Mapping, Sequence

from bazel_ldfix import elf, pathlist
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.search import LoaderSource
from bazel_ldfix.outputbase import index
from bazel_ldfix.repair import loadalike
from bazel_ldfix.repair.fallback import Skipped
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.scanresult import Entry, Outcome
from bazel_ldfix.repair.templates import MOVABLE_VIA, Clues, Template, named_paths
from bazel_ldfix.repair.testread import Subject


class Models:
    """What one command learns about its tests, for every plan it makes.

    Each test's executable and runfiles are read once, and each test is resolved once per
    value of LD_LIBRARY_PATH, or not at all when a twin was (:mod:`loadalike`); the file facts
    underneath are shared by all tests (:class:`~bazel_ldfix.fs.memo.Memo`).
    """

    def __init__(self, memo: Memo | None = None, *, share: bool = True) -> None:
        self.memo = memo or Memo()
        self.share = share  # False: every test resolved on its own, twins or not
        self._subjects: dict[tuple[TestInput, elf.ElfHeader], Subject] = {}
        # (value, with the runfiles' objects) -> (label, executable) -> outcome
        self._outcomes: dict[tuple[str | None, bool],
                             dict[tuple[str, str], Outcome]] = {}
        self._strings: dict[str, str] = {}
        self._dirs: dict[str, tuple[str, ...]] = {}
        self._test_dirs: dict[int, tuple[Outcome, tuple[str, ...]]] = {}
        self._shapes: dict[tuple[str, str], loadalike.Shape | None] = {}
        self._templates: dict[Hashable, Template] = {}
        self._values: dict[str | None, loadalike.Mentions] = {}
        self._keys: dict[Hashable, Hashable] = {}
        self.twins = 0      # outcomes moved from a twin instead of resolved

    def subject(self, test: TestInput, host: elf.ElfHeader) -> Subject:
        key = (test, host)
        found = self._subjects.get(key)
        if found is None:
            found = self._subjects[key] = Subject.of(test, host, self.memo)
        return found

    def read_ahead(self, test: TestInput, host: elf.ElfHeader) -> Subject | None:
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

    def resolve_ahead(self, subject: Subject, library_path: str | None,
                      loaders: LoaderSource
                      ) -> None:
        """:meth:`outcome` with the runfiles' objects, asked before the plan asks it (a
        failure is met again, and handled, by the plan)."""
        with contextlib.suppress(Exception):
            self.outcomes([subject], {subject.label: library_path}, loaders,
                          extras=True)

    def outcome(self, subject: Subject, library_path: str | None,
                loaders: LoaderSource,
                *, extras: bool) -> Outcome:
        """The test resolved in one environment, with the runfiles' objects or without:
        once per value for every scan. Without them, the first part of the resolution with
        them is taken when that resolution went through whole."""
        return self.outcomes([subject], {subject.label: library_path}, loaders, extras=extras)[0]

    def outcomes(self, subjects: Sequence[Subject], values: Mapping[str, str | None],
                 loaders: LoaderSource,
                 *, extras: bool) -> list[Outcome]:
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
                found = table[key] = self._outcome(subject, library_path, loaders, extras=extras)
            out.append(found)
        return out

    def _outcome(self, subject: Subject, library_path: str | None,
                 loaders: LoaderSource,
                 *, extras: bool) -> Outcome:
        if extras:
            return self._resolve_alike(subject, library_path, loaders,
                                       extras=True)
        full = self.outcomes([subject], {subject.label: library_path}, loaders, extras=True)[0]
        if full.program is not None:
            return Outcome(full.header, full.entries[:full.program], full.error, full.skipped)
        return self._resolve_alike(subject, library_path, loaders,
                                   extras=False)

    def _resolve_alike(self, subject: Subject, library_path: str | None,
                       loaders: LoaderSource,
                       *, extras: bool) -> Outcome:
        """:meth:`_resolve`, or the result of a twin test moved to this one's paths
        (:mod:`bazel_ldfix.repair.loadalike`)."""
        shape = self._shape(subject) if self.share else None
        if shape is None or self._mentions(library_path).name(shape):
            return self._resolve(subject, library_path, loaders,
                                 extras=extras)[0]
        key = (shape.key, library_path, extras, loaders)
        template = self._templates.get(key)
        if template is not None:
            moved = template.moved_to(shape, self.memo)
            if moved is not None:
                self.twins += 1
                return moved
            return self._resolve(subject, library_path, loaders,
                                 extras=extras)[0]
        outcome, clues = self._resolve(subject, library_path, loaders,
                                       extras=extras)
        if clues.movable(shape):
            self._templates[key] = Template(outcome, shape, clues)
        return outcome

    def _mentions(self, library_path: str | None) -> loadalike.Mentions:
        """The directories of a value of LD_LIBRARY_PATH, sorted once per value."""
        found = self._values.get(library_path)
        if found is None:
            found = self._values[library_path] = loadalike.Mentions(
                pathlist.split(library_path or ""))
        return found

    def _shape(self, subject: Subject) -> loadalike.Shape | None:
        key = (subject.label, subject.executable)
        if key not in self._shapes:
            if subject.programs:
                # A test that starts programs of its runfiles is resolved on its own: a
                # twin's load is moved for one program only.
                self._shapes[key] = None
            else:
                # One copy of each twins' key, however many tests share it.
                self._shapes[key] = loadalike.shape(
                    subject.executable, subject.info, subject.host, subject.cwd,
                    subject.extras, [s.path for s in subject.skipped], self.memo,
                    digest=subject.digest, keys=self._keys)
        return self._shapes[key]

    def _resolve(self, subject: Subject, library_path: str | None,
                 loaders: LoaderSource,
                 *, extras: bool) -> tuple[Outcome, Clues]:
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
        entries: list[Entry] = []
        skipped: list[Skipped] = []
        program: int | None = 0
        results = subject.resolve(loaders, library_path, extras=extras)
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
            paths += named_paths(res.info)
            needed.update(res.info.needed)
            for lib in res.libraries:
                words.append(lib.error or "")
                paths += named_paths(lib.info)
                if lib.info is not None:
                    needed.update(lib.info.needed)
                if lib.via is not None and lib.via not in MOVABLE_VIA and lib.path:
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
        return (Outcome(header, tuple(entries), error, tuple(skipped), program),
                Clues(loadalike.Mentions(paths), "\0".join(words), frozenset(needed)))

    def test_dirs(self, subject: Subject, outcome: Outcome) -> tuple[str, ...]:
        """:func:`index.test_dirs` of a test in one environment: where its staged and its
        loaded libraries lead, each path's chain followed once per command."""
        key = id(outcome)
        found = self._test_dirs.get(key)
        if found is None or found[0] is not outcome:
            loaded = [path for path, _, _ in outcome.entries if path is not None]
            found = self._test_dirs[key] = (outcome, index.test_dirs(
                subject.extras, loaded, self._preferred))
        return found[1]

    def dirs_of(self, subject: Subject, loaded: Sequence[str]) -> tuple[str, ...]:
        """:func:`index.test_dirs` of a test whose libraries loaded are ``loaded``."""
        return index.test_dirs(subject.extras, loaded, self._preferred)

    def twin_key(self, subject: Subject) -> Hashable | None:
        """What the test's twins share (:mod:`bazel_ldfix.repair.loadalike`); None: it has
        none, or every test is resolved on its own."""
        shape = self._shape(subject) if self.share else None
        return None if shape is None else shape.key

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

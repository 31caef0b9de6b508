"""What is known about one failed test: its executable, the loader model's view, the
``cc_import``s Bazel staged for it, and where its libraries could be found."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import elf
from bazel_ldfix.bazel import declaredinputs, runfiles
from bazel_ldfix.bazel.solib import SolibImport
from bazel_ldfix.diagnosis import logs
from bazel_ldfix.diagnosis.messages import LoaderFailure
from bazel_ldfix.diagnosis.model import OnError, exposed, missing_for
from bazel_ldfix.errors import BadInputError, LdfixError
from bazel_ldfix.loader.resolution import Environment, Library
from bazel_ldfix.loader.search import LoaderSource
from bazel_ldfix.outputbase import index

if TYPE_CHECKING:
    from bazel_ldfix.repair.results import Missing
    from bazel_ldfix.session import Session

#: The logs of one test (shards, runs, attempts), each with the failures it reports.
Entries = Sequence[tuple[logs.TestLog, tuple[LoaderFailure, ...]]]


@dataclass(frozen=True)
class TestContext:
    """What is known about one failed test, gathered once before its failures are explained."""

    label: str | None
    executable: str | None
    expect: elf.ElfHeader
    output_base: str | None
    library_path: str | None
    missing: Mapping[str, Missing]          # soname -> what the repair's model misses
    imports: tuple[SolibImport, ...]
    other_imports: tuple[SolibImport, ...]
    notes: tuple[str, ...]
    loaders: LoaderSource | None = None
    session: Session | None = None          # who asks: the store, the unreadable files

    @classmethod
    def build(cls, entries: Entries, output_base: str | None, library_path: str | None,
              loaders: LoaderSource, session: Session | None = None,
              planned: tuple[str, ...] | None = None) -> TestContext:
        """``planned``: what the run's plan found the test still missing in
        ``library_path`` (None: no plan of the run is known). Nothing: the model is not
        asked again, as it would answer the same."""
        label = entries[0][0].label
        notes: list[str] = []
        executable = _executable(entries)
        output_base = output_base or next(
            (ob for ob in (logs.output_base_of(p) for p in _paths_named(entries)) if ob), None)
        expect = _host_header()
        if executable is not None:
            with contextlib.suppress(BadInputError):    # a script (sh_test, py_test)
                expect = elf.read_elf(executable).header
        missing: dict[str, Missing] = {}
        if planned == ():
            pass    # the run's plan proved it loads all it links in this value
        elif executable is not None and output_base is not None:
            missing, note = missing_for(label, executable, output_base, library_path,
                                        loaders, session)
            notes += [note] if note else []
        elif executable is None:
            notes.append("the test executable is gone (bazel clean?) or unknown: who needs "
                         "the library comes from the message alone")
        imports: list[SolibImport] = []
        other: list[SolibImport] = []
        if executable is not None:
            # Canonical repository names (@@+ext+nvsdk, @@nvsdk~) are printed as the main
            # repository writes them, from the test's runfiles repository mapping.
            mapping = runfiles.repo_mapping_of(executable)
            apparent = mapping.label if mapping is not None else None
            # What an earlier build left in bazel-out is no import of this build's.
            staged = declaredinputs.imports_of(executable, apparent)
            imports, other = list(staged.own), list(staged.other)
        return cls(label, executable, expect, output_base, library_path, missing,
                   tuple(imports), tuple(other), tuple(notes), loaders, session)

    @property
    def on_error(self) -> OnError | None:
        """Who hears of a file that could not be read."""
        return self.session.on_error if self.session is not None else None

    def roots(self) -> list[str]:
        return [os.path.join(self.output_base, "external")] if self.output_base else []

    def preferred(self) -> tuple[str, ...]:
        """Where the test's libraries lead, as the repair ranks them (index.test_dirs)."""
        return index.test_dirs([i.staged for i in self.imports], ())

    def exposed(self, given: Sequence[index.Choice]) -> tuple[str, ...] | None:
        """The entries that give the test ``given`` and change nothing else it loads
        (see :func:`model.exposed`); None when the model cannot say."""
        if self.executable is None or self.output_base is None \
                or self.loaders is None:
            return None
        return exposed(self.label, self.executable, self.output_base, self.library_path,
                       given, self.loaders, self.session)

    def candidates(self, soname: str) -> list[str]:
        """Every file named ``soname`` beside the test's libraries or under external/."""
        found: dict[str, None] = {}
        for directory in self.preferred():
            path = os.path.join(directory, soname)
            if os.path.isfile(path):
                found.setdefault(path, None)
        for root in self.roots():
            if os.path.isdir(root):
                for path in index.walk(root, soname.__eq__, self.on_error).get(soname, ()):
                    found.setdefault(path, None)
        return list(found)

    def system_copies(self, soname: str) -> list[str]:
        """The files named ``soname`` the system offers a program like the test's: the one
        ``ld.so.cache`` gives, then those in the loader's default directories (as the loader
        itself says them)."""
        # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
        from bazel_ldfix.loader.closure import host_of, interp_for

        found: dict[str, None] = {}
        info = self._info()
        if info is None:
            return []
        lookup = self.loaders.cache_for(info) if self.loaders is not None else None
        cached = lookup(soname) if lookup is not None else None
        if cached:
            found.setdefault(cached, None)
        with contextlib.suppress(BadInputError):
            for directory in host_of(interp_for(info)).system_dirs:
                path = os.path.join(directory, soname)
                if os.path.isfile(path):
                    found.setdefault(path, None)
        return list(found)

    def loaded(self, path: str) -> tuple[Library, ...]:
        """What the loader model loads for ``path`` (the test's executable, or a library it
        opens) in the test's environment, in the loader's order; nothing when it cannot."""
        if self.loaders is None:
            return ()
        try:
            info = elf.read_elf(path)
            env = Environment(self.library_path, os.path.dirname(path),
                              self.loaders.cache_for(info))
            return self.loaders.make_loader(info, env).resolve(path, info=info).libraries
        except LdfixError:
            return ()

    def _info(self) -> elf.ElfInfo | None:
        """The test's executable, or this machine's Python for a script test."""
        for path in (self.executable, os.path.realpath(sys.executable)):
            if path:
                with contextlib.suppress(BadInputError):
                    return elf.read_elf(path)
        return None

    def nowhere(self, soname: str) -> str:
        where = (f"{self.output_base}/external, and beside the libraries the test links"
                 if self.output_base else "beside the libraries the test links; output_base "
                 "unknown")
        return (f"no usable {soname} exists anywhere searched ({where}): it must come from "
                "somewhere else (an SDK not fetched, a system package)")


def versions(path: str) -> tuple[str, ...]:
    """The versions ``path`` defines (``.gnu.version_d``); none for a file that is not ELF."""
    try:
        return elf.version_definitions(path)
    except BadInputError:
        return ()


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _executable(entries: Entries) -> str | None:
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


def _paths_named(entries: Entries) -> list[str]:
    out = []
    for log, failures in entries:
        out.append(os.path.realpath(log.path))
        for f in failures:
            out += [p for p in (f.program, f.name, f.required_by) if p]
    return out


def _host_header() -> elf.ElfHeader:
    """The class and machine to judge candidates by when the test is a script."""
    return elf.read_header(os.path.realpath(sys.executable))

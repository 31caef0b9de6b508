"""``assert-package``: what a CI ships holds each named library once, as a shared object.

A second copy of a library, or its static archive linked into a program or an extension,
gives the process two instances of each of its ``thread_local`` variables. The package
shows it in its files, without running any of them:

- each named library is exactly one file, and that file is a real shared object: ELF
  ``ET_DYN`` with PT_DYNAMIC and a DT_SONAME. A static archive (``!<arch>``) renamed
  ``.so``, a linker script or a program is not one;
- no two files carry one SONAME;
- no program or library of the package defines a name the library exports. Such a
  definition is a private, static copy. ``.dynsym`` is read, and ``.symtab`` when there is
  one: ``strip`` removes ``.symtab``, but a copy whose names are exported stays in
  ``.dynsym``.

A file is the library when one of its names (its own, or a link's leading to it) is the
library's name or that name with a version (``libx.so.3``), or when its SONAME is.
"""

from __future__ import annotations

import enum
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, NotElfError
from bazel_ldfix.fs import archive
from bazel_ldfix.linkage import kinds
from bazel_ldfix.symbols import Bind, Symbol, SymbolTables, SymbolType, read_symbols

_VERSION = re.compile(r"[0-9][0-9A-Za-z_.]*")
# What a static copy brings along: code and data, thread-locals included.
_STATE_TYPES = frozenset({SymbolType.FUNC, SymbolType.OBJECT, SymbolType.TLS,
                          SymbolType.IFUNC, SymbolType.COMMON})
# Every object has these; they are the linker's, not the library's.
_LINKER_NAMES = frozenset({"_init", "_fini", "_DYNAMIC", "_GLOBAL_OFFSET_TABLE_"})
_LINKED = (kinds.Kind.SHARED_OBJECT, kinds.Kind.PIE, kinds.Kind.EXECUTABLE)
# Links worth a line: a link to a directory of the package is followed through, not a fault.
_UNFOLLOWED = frozenset({archive.LinkProblem.OUTSIDE, archive.LinkProblem.LOOP,
                         archive.LinkProblem.DANGLING})


class Problem(str, enum.Enum):
    """What a package must not hold."""

    MISSING = "missing"                      # no file is the library
    NOT_SHARED = "not-a-shared-object"       # a file is the library by name, and no shared object
    SONAME_MISMATCH = "soname-mismatch"      # the library's file carries another SONAME
    COPIES = "copies"                        # more than one shared object is the library
    ONE_SONAME = "one-soname"                # two files carry one SONAME
    PRIVATE_COPY = "private-copy"            # a program or library defines the library's names

    @property
    def words(self) -> str:
        return _WORDS[self]


_WORDS = {
    Problem.MISSING: "missing",
    Problem.NOT_SHARED: "not a shared object",
    Problem.SONAME_MISMATCH: "another SONAME",
    Problem.COPIES: "more than one copy",
    Problem.ONE_SONAME: "one SONAME, several files",
    Problem.PRIVATE_COPY: "a private copy",
}


@dataclass(frozen=True)
class Finding:
    problem: Problem
    subject: str                   # the library, or the SONAME two files carry
    files: tuple[str, ...]         # names inside the package
    detail: str                    # why, in words
    symbols: tuple[str, ...] = ()  # a private copy's names (mangled), .dynsym's first
    links: tuple[str, ...] = ()    # the links of the package that lead to the one file


@dataclass(frozen=True)
class Library:
    """One ``--library`` and the shared object that is it."""

    name: str
    file: str | None               # the one shared object, when there is exactly one
    soname: str | None
    exports: int                   # the names a private copy is looked for by


@dataclass(frozen=True)
class Unread:
    """A file the gate could not read (a corrupt ELF file): no verdict rests on it."""

    file: str
    reason: str


@dataclass(frozen=True)
class PackageReport:
    package: str
    format: archive.Format
    entries: int                   # members of every type
    objects: int                   # ELF objects read
    libraries: tuple[Library, ...]
    findings: tuple[Finding, ...]
    links: tuple[archive.Link, ...]  # links that leave the package, loop or dangle
    unread: tuple[Unread, ...]

    @property
    def ok(self) -> bool:
        return not self.findings


def is_named(name: str, library: str) -> bool:
    """Whether the file name ``name`` (a path's last part) is ``library``, or it versioned."""
    if name == library:
        return True
    rest = name[len(library) + 1:] if name.startswith(library + ".") else ""
    return bool(_VERSION.fullmatch(rest))


@dataclass(frozen=True)
class _File:
    member: archive.Member
    names: tuple[str, ...]
    inspection: kinds.Inspection

    @property
    def soname(self) -> str | None:
        return self.inspection.elf.soname if self.inspection.elf is not None else None

    def is_library(self, library: str) -> bool:
        soname = self.soname
        return (any(is_named(posixpath.basename(n), library) for n in self.names)
                or (soname is not None and is_named(soname, library)))


def check_package(path: str, libraries: Sequence[str],
                  limits: archive.Limits | None = None) -> PackageReport:
    """Every finding of the package at ``path`` for ``libraries`` (all, not the first)."""
    if not libraries:
        raise BadInputError("no library named: give --library NAME")
    for name in libraries:
        if not name or "/" in name:
            raise BadInputError(f"--library {name!r}: expected a file name or SONAME, "
                                "such as libextension_cuda.so")

    def keep(name: str, head: bytes) -> bool:
        return (head.startswith((elf.ELFMAG, kinds.ARMAG, kinds.THINMAG))
                or any(is_named(posixpath.basename(name), lib) for lib in libraries))

    with archive.opened(path, keep, limits) as package:
        files, unread = _inspect(package)
        return _verdict(package, tuple(dict.fromkeys(libraries)), files, unread)


def _inspect(package: archive.Package) -> tuple[list[_File], list[Unread]]:
    files = []
    unread = []
    for member in package.files:
        try:
            found = kinds.inspect(member.path)
        except BadInputError as exc:
            unread.append(Unread(member.name, _without_path(str(exc), member.path)))
            continue
        files.append(_File(member, package.names_of(member.name), found))
    return files, unread


def _without_path(message: str, path: str) -> str:
    """A reader's message without the private copy's path it names first."""
    return message.removeprefix(path + ": ")


def _verdict(package: archive.Package, libraries: tuple[str, ...], files: list[_File],
             unread: list[Unread]) -> PackageReport:
    findings: list[Finding] = []
    results: list[Library] = []
    copies_of: dict[str, frozenset[str]] = {}
    tables: dict[str, SymbolTables | None] = {}
    unread_more: list[Unread] = []

    def symbols_of(file: _File) -> SymbolTables | None:
        if file.member.name not in tables:
            try:
                tables[file.member.name] = read_symbols(file.member.path, relocations=False)
            except NotElfError as exc:
                tables[file.member.name] = None
                unread_more.append(Unread(file.member.name,
                                          _without_path(str(exc), file.member.path)))
        return tables[file.member.name]

    for library in libraries:
        named = [f for f in files if f.is_library(library)]
        real = [f for f in named if _real_shared_object(f)]
        for f in named:
            if f not in real:
                findings.append(Finding(Problem.NOT_SHARED, library, (f.member.name,),
                                        _not_shared(f, library), links=f.names[1:]))
        findings += _links_named(package, library, {f.member.name for f in files})
        for f in real:
            if f.soname is not None and not is_named(f.soname, library):
                findings.append(Finding(
                    Problem.SONAME_MISMATCH, library, (f.member.name,),
                    f"its SONAME is {f.soname}: a program linked against it needs "
                    f"{f.soname}, not {library}", links=f.names[1:]))
        if len(real) > 1:
            findings.append(Finding(
                Problem.COPIES, library, tuple(f.member.name for f in real),
                f"{len(real)} shared objects are {library}: a process that loads two holds "
                "two copies of its state"))
            copies_of[library] = frozenset(f.member.name for f in real)
        if not named and not any(x.subject == library for x in findings):
            findings.append(Finding(Problem.MISSING, library, (),
                                    f"no file of the package is {library}, by name or "
                                    "SONAME"))
        exports: tuple[Symbol, ...] = ()
        if real:
            tables_of_lib = symbols_of(real[0])
            exports = _exports(tables_of_lib) if tables_of_lib is not None else ()
        results.append(Library(library, real[0].member.name if len(real) == 1 else None,
                               real[0].soname if real else None, len(exports)))
        if exports:
            own = {f.member.name for f in real}
            findings += _private_copies(library, exports, files, own, symbols_of)
    findings += _one_soname(files, copies_of)
    return PackageReport(
        package.path, package.format, package.entries,
        sum(f.inspection.elf is not None for f in files), tuple(results), tuple(findings),
        tuple(link for link in package.links if link.problem in _UNFOLLOWED),
        tuple(unread + unread_more))


def _real_shared_object(file: _File) -> bool:
    facts = file.inspection.elf
    return (file.inspection.kind is kinds.Kind.SHARED_OBJECT and facts is not None
            and facts.dynamic and facts.soname is not None)


def _not_shared(file: _File, library: str) -> str:
    found = file.inspection
    if found.kind is kinds.Kind.SHARED_OBJECT and found.elf is not None:
        if not found.elf.dynamic:
            return "a shared object without PT_DYNAMIC: the loader cannot load it"
        return (f"a shared object without a DT_SONAME: a program linked against it records "
                f"its path, not {library}")
    words = found.mismatch(kinds.Kind.SHARED_OBJECT, file.member.name) or found.kind.words
    return words.replace(" named .so", f" named {posixpath.basename(file.member.name)}", 1)


def _links_named(package: archive.Package, library: str,
                 kept: set[str]) -> list[Finding]:
    """Links named as the library that lead to no file the gate read."""
    out = []
    for link in package.links:
        if not is_named(posixpath.basename(link.name), library):
            continue
        if link.problem is not None:
            out.append(Finding(Problem.NOT_SHARED, library, (link.name,),
                               f"a link to {link.target}: {link.problem.words}"))
        elif link.resolved is not None and link.resolved not in kept:
            out.append(Finding(Problem.NOT_SHARED, library, (link.name,),
                               f"a link to {link.resolved}, which is neither ELF nor an "
                               "archive"))
    return out


def _exports(tables: SymbolTables) -> tuple[Symbol, ...]:
    """The names a static copy of the library would define too: its own global code and
    data. Weak definitions (C++ inline functions and templates, which every user of a
    header defines) and STB_GNU_UNIQUE ones (one per process, whatever the copies) are not
    evidence of a copy; absolute symbols (version names) hold nothing."""
    return tuple(s for s in tables.dynsym
                 if s.defined and s.bind is Bind.GLOBAL and s.type in _STATE_TYPES
                 and not s.absolute and s.name and s.name not in _LINKER_NAMES)


def _private_copies(library: str, exports: tuple[Symbol, ...], files: list[_File],
                    own: set[str], symbols_of: Callable[[_File], SymbolTables | None]
                    ) -> list[Finding]:
    names = {s.name for s in exports}
    out = []
    for f in files:
        if f.member.name in own or f.inspection.kind not in _LINKED:
            continue
        tables = symbols_of(f)
        if tables is None:
            continue
        dynamic = _defined(tables.dynsym, names, local=False)
        static = _defined(tables.symtab or (), names, local=True) - dynamic
        if not dynamic and not static:
            continue
        found = sorted(dynamic) + sorted(static)
        if dynamic:
            where = f"{len(dynamic)} in .dynsym (exported, seen even when stripped)"
            if static:
                where += f", {len(static)} more in .symtab"
        else:
            where = f"{len(static)} in .symtab only (a stripped copy would hide them)"
        out.append(Finding(
            Problem.PRIVATE_COPY, library, (f.member.name,),
            f"defines {len(found)} of the {len(names)} names {library} exports: {where}",
            tuple(found), f.names[1:]))
    return out


def _defined(table: Sequence[Symbol], names: set[str], *, local: bool) -> set[str]:
    return {s.name for s in table
            if s.defined and s.name in names and s.type in _STATE_TYPES and not s.absolute
            and (local or s.bind is not Bind.LOCAL)}


def _one_soname(files: list[_File], copies_of: dict[str, frozenset[str]]) -> list[Finding]:
    carriers: dict[str, list[_File]] = {}
    for f in files:
        if f.soname is not None:
            carriers.setdefault(f.soname, []).append(f)
    already = set(copies_of.values())
    out = []
    for soname, group in sorted(carriers.items()):
        names = frozenset(f.member.name for f in group)
        if len(group) < 2 or names in already:
            continue
        out.append(Finding(Problem.ONE_SONAME, soname, tuple(sorted(names)),
                           f"{len(group)} files carry the SONAME {soname}: the loader loads "
                           "one of them, whichever it finds first"))
    return out

"""``assert-linkage``: the assertions a wrongly linked build cannot pass, stripped or not.

What survives ``strip`` decides: the ELF header, the DT_NEEDED entries of PT_DYNAMIC, and the
undefined symbols of ``.dynsym``. ``.symtab`` (which ``strip`` removes) is only ever used to
find *more* evidence of a private copy, never to pass a check.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, PatternError
from bazel_ldfix.linkage import kinds, names
from bazel_ldfix.linkage.scope import Scope, load_scope
from bazel_ldfix.loader.closure import Options
from bazel_ldfix.symbols import Bind, Symbol, SymbolType, read_symbols

LINKED_KINDS = (kinds.Kind.SHARED_OBJECT, kinds.Kind.PIE, kinds.Kind.EXECUTABLE)


class Check(str, enum.Enum):
    NEEDS = "needs"
    IMPORTS = "imports"
    NO_DEFINES = "no-defines"
    BINDS = "binds"


@dataclass(frozen=True)
class CheckResult:
    """One assertion and what the file says about it."""

    check: Check
    subject: str                   # the SONAME, the pattern, or PATTERN=SONAME
    ok: bool
    detail: str                    # why, in words
    symbols: tuple[str, ...] = ()  # the symbols the pattern matched (mangled)


@dataclass(frozen=True)
class Assertions:
    needs: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    no_defines: tuple[str, ...] = ()
    binds: tuple[tuple[str, str], ...] = ()     # (pattern, soname)


@dataclass(frozen=True)
class GateReport:
    file: str
    kind: kinds.Kind
    stripped: bool                 # no .symtab
    outcomes: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


def parse_binds(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for value in values:
        pattern, eq, soname = value.rpartition("=")
        if not eq or not pattern or not soname or "/" in soname:
            raise PatternError(f"--binds {value!r}: expected SYMBOL=SONAME")
        out.append((pattern, soname))
    return tuple(out)


def check(path: str, asked: Assertions, options: Options,
          demangler: names.Demangler) -> GateReport:
    """Every assertion of ``asked`` on ``path`` (all of them, not up to the first failure)."""
    patterns = {text: names.parse_pattern(text) for text in
                (*asked.imports, *asked.no_defines, *(p for p, _ in asked.binds))}
    found = kinds.inspect(path)
    if found.kind not in LINKED_KINDS:
        raise BadInputError(f"{path}: {found.kind.words}, not a linked ELF object "
                            "(a shared object or a program)")
    info = elf.read_elf(path)
    tables = read_symbols(path)
    every = [s.name for s in tables.dynsym] + [s.name for s in tables.symtab or ()]
    demangled: dict[str, str] = {}
    if names.needs_demangler(patterns.values()):
        demangled = demangler.demangle(every)

    outcomes: list[CheckResult] = []
    for soname in asked.needs:
        outcomes.append(_needs(soname, info.needed))
    imports = [s for s in tables.dynsym if not s.defined and s.name]
    for text in asked.imports:
        outcomes.append(_imports(patterns[text], imports, tables.dynsym, demangled))
    for text in asked.no_defines:
        outcomes.append(_no_defines(patterns[text], tables.dynsym, tables.symtab, demangled))
    if asked.binds:
        scope = load_scope(path, options)
        more = [s.name for obj in scope.objects[1:] for s in obj.symbols.dynsym]
        if names.needs_demangler(patterns[p] for p, _ in asked.binds):
            demangled.update(demangler.demangle(more))
        for text, soname in asked.binds:
            outcomes.append(_binds(patterns[text], soname, scope, imports, tables.symtab,
                                   demangled))
    return GateReport(path, found.kind, tables.symtab is None, tuple(outcomes))


def _needs(soname: str, needed: Sequence[str]) -> CheckResult:
    if soname in needed:
        return CheckResult(Check.NEEDS, soname, True, "a DT_NEEDED entry")
    near = [n for n in needed if soname in n]
    detail = "no DT_NEEDED entry"
    if near:
        detail += f" (only {', '.join(near)}, which is not the same name)"
    elif needed:
        detail += f" (DT_NEEDED: {', '.join(needed)})"
    return CheckResult(Check.NEEDS, soname, False, detail)


def _imports(pattern: names.Pattern, imports: Sequence[Symbol], dynsym: Sequence[Symbol],
             demangled: dict[str, str]) -> CheckResult:
    hits = tuple(s.name for s in imports if pattern.matches(s.name, demangled))
    if hits:
        return CheckResult(Check.IMPORTS, pattern.text, True,
                       f"undefined in .dynsym: {_show(hits, demangled)}", hits)
    own = tuple(s.name for s in dynsym if s.defined and pattern.matches(s.name, demangled))
    detail = "no undefined symbol in .dynsym matches"
    if own:
        detail += f"; the file defines {_show(own, demangled)} itself"
    return CheckResult(Check.IMPORTS, pattern.text, False, detail, own)


def _defined(table: Sequence[Symbol], pattern: names.Pattern,
             demangled: dict[str, str]) -> tuple[str, ...]:
    return tuple(s.name for s in table if s.defined and s.name and s.type is not SymbolType.OTHER
                 and pattern.matches(s.name, demangled))


def _no_defines(pattern: names.Pattern, dynsym: Sequence[Symbol],
                symtab: Sequence[Symbol] | None, demangled: dict[str, str]) -> CheckResult:
    in_dynsym = _defined([s for s in dynsym if s.bind is not Bind.LOCAL], pattern, demangled)
    in_symtab = _defined(symtab or (), pattern, demangled)
    if in_dynsym:
        return CheckResult(Check.NO_DEFINES, pattern.text, False,
                       f"defined in .dynsym (exported): {_show(in_dynsym, demangled)}",
                       in_dynsym)
    if in_symtab:
        return CheckResult(Check.NO_DEFINES, pattern.text, False,
                       f"defined in .symtab (a private copy): {_show(in_symtab, demangled)}",
                       in_symtab)
    where = ".dynsym and .symtab" if symtab is not None else ".dynsym (no .symtab: stripped)"
    return CheckResult(Check.NO_DEFINES, pattern.text, True, f"not defined in {where}")


def _binds(pattern: names.Pattern, soname: str, scope: Scope, imports: Sequence[Symbol],
           symtab: Sequence[Symbol] | None, demangled: dict[str, str]) -> CheckResult:
    subject = f"{pattern.text}={soname}"
    refs = tuple(s.name for s in imports if pattern.matches(s.name, demangled))
    if not refs:
        own = _defined(symtab or (), pattern, demangled) or _defined(
            scope.objects[0].symbols.dynsym, pattern, demangled)
        detail = "the file has no reference to it in .dynsym, so nothing binds at load time"
        if own:
            detail += f"; it defines {_show(own, demangled)} itself (its own copy)"
        return CheckResult(Check.BINDS, subject, False, detail, own)
    wrong: list[str] = []
    right: list[str] = []
    for name in refs:
        hit = scope.lookup(name, scope.objects[0])
        if hit is None:
            missing = f"; not found: {', '.join(scope.missing)}" if scope.missing else ""
            wrong.append(f"{_one(name, demangled)}: no loaded object defines it{missing}")
            continue
        obj, _sym = hit
        others = [o.label for o, _ in scope.definers(name) if o is not obj]
        also = f" (also defined by {', '.join(others)})" if others else ""
        if obj.known_as(soname):
            right.append(f"{_one(name, demangled)} -> {obj.label}{also}")
        else:
            wrong.append(f"{_one(name, demangled)} -> {obj.label} ({obj.path}), not "
                         f"{soname}{also}")
    if wrong:
        return CheckResult(Check.BINDS, subject, False, "; ".join(wrong), refs)
    return CheckResult(Check.BINDS, subject, True, "; ".join(right), refs)


def _one(name: str, demangled: dict[str, str]) -> str:
    return demangled.get(name, name)


def _show(found: Sequence[str], demangled: dict[str, str], limit: int = 4) -> str:
    shown = [_one(n, demangled) for n in dict.fromkeys(found)]
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return ", ".join(shown[:limit]) + more

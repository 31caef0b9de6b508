"""``dupes``: dynamic symbols defined by more than one loaded object, and which split state.

A name defined by several objects is harmless when every reference goes through a symbol
relocation: glibc binds them all to the first definition in the global scope (interposition)
and the other copies are dead. It is a silent bug when an object binds its own references
to its own copy without asking the loader; that object then keeps private state under a
shared name. glibc (elf/dl-lookup.c, elf/do-rel.h) and the linkers give four ways:

- DF_SYMBOLIC (``-Bsymbolic``): the object's own definitions are searched first;
- STV_PROTECTED in the object's ``.dynsym``: glibc resolves the object's references to its
  own definition (``_dl_lookup_symbol_x``, the protected case);
- a local-dynamic TLS access (a module relocation without a symbol, e.g. DTPMOD64 against
  symbol 0) and no relocation naming the variable: the object reads its own TLS block;
- STB_GNU_UNIQUE is the opposite: one definition per process, whatever the scope.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bazel_ldfix.linkage.scope import Scope, ScopeObject, exported, load_scope
from bazel_ldfix.loader.closure import Options
from bazel_ldfix.symbols import Bind, Symbol, SymbolType, Visibility

# Relocation types that refer to a module's TLS block, by e_machine.
_TLS_RELOCATIONS = {
    62: frozenset({16, 17, 18, 36}),          # x86-64: DTPMOD64, DTPOFF64, TPOFF64, TLSDESC
    3: frozenset({14, 35, 36, 37, 41}),       # i386: TLS_TPOFF, DTPMOD32, DTPOFF32, TPOFF32, DESC
    183: frozenset({1028, 1029, 1030, 1031}),  # aarch64: DTPMOD, DTPREL, TPREL, TLSDESC
}


class Binding(str, enum.Enum):
    """Where one defining object's own references to the name go."""

    CHOSEN = "chosen"             # the first definition in the scope: everyone's copy
    INTERPOSED = "interposed"     # through a symbol relocation, to the chosen copy
    UNIQUE = "unique"             # STB_GNU_UNIQUE: the loader keeps one per process
    UNREFERENCED = "unreferenced"  # no relocation names it; the copy is not used by name
    SYMBOLIC = "symbolic"         # DF_SYMBOLIC: to its own copy
    PROTECTED = "protected"       # STV_PROTECTED: to its own copy
    LOCAL_TLS = "local-tls"       # a local-dynamic TLS access: its own TLS block

    @property
    def splits(self) -> bool:
        return self in (Binding.SYMBOLIC, Binding.PROTECTED, Binding.LOCAL_TLS)

    @property
    def words(self) -> str:
        return _WORDS[self]


_WORDS = {
    Binding.CHOSEN: "chosen: first in lookup order, references bind here",
    Binding.INTERPOSED: "interposed: its references bind to the chosen copy",
    Binding.UNIQUE: "unique (STB_GNU_UNIQUE): the loader keeps one copy per process",
    Binding.UNREFERENCED: "unused by name: no relocation of it names the symbol",
    Binding.SYMBOLIC: "OWN COPY: linked -Bsymbolic (DF_SYMBOLIC), binds to itself first",
    Binding.PROTECTED: "OWN COPY: protected visibility, its references bind to itself",
    Binding.LOCAL_TLS: "OWN COPY: local-dynamic TLS access, no relocation names the variable",
}


@dataclass(frozen=True)
class Definition:
    object: str            # the object's SONAME, else its DT_NEEDED name
    path: str
    type: SymbolType
    visibility: Visibility
    binding: Binding
    binds_to: str          # the object this definer's own references reach


@dataclass(frozen=True)
class Duplicate:
    name: str
    type: SymbolType       # of the chosen definition
    definitions: tuple[Definition, ...]   # in lookup order; the first is chosen
    importers: tuple[str, ...] = ()       # objects that only import it (bind to the chosen)

    @property
    def split(self) -> bool:
        return any(d.binding.splits for d in self.definitions)


@dataclass(frozen=True)
class DupesReport:
    file: str
    objects: tuple[str, ...]              # the lookup scope, in order
    missing: tuple[str, ...]
    duplicates: tuple[Duplicate, ...]     # thread-local, then data, then the rest

    @property
    def split(self) -> tuple[Duplicate, ...]:
        return tuple(d for d in self.duplicates if d.split)


_ORDER = {SymbolType.TLS: 0, SymbolType.OBJECT: 1, SymbolType.COMMON: 1}


def find_dupes(path: str, options: Options) -> DupesReport:
    """Every name more than one object of ``path``'s load exports, and how each is bound."""
    scope = load_scope(path, options)
    return dupes_of(scope)


def dupes_of(scope: Scope) -> DupesReport:
    definers: dict[str, list[tuple[ScopeObject, Symbol]]] = {}
    for obj in scope.objects:
        for sym in exported(obj.symbols):
            defs = definers.setdefault(sym.name, [])
            # One object may define several versions of a name (sys_errlist@GLIBC_2.2.5,
            # @GLIBC_2.3, ...): one object, one copy of its state for this count.
            if not defs or defs[-1][0] is not obj:
                defs.append((obj, sym))
    shared = {name for name, defs in definers.items() if len(defs) > 1}
    importers: dict[str, list[str]] = {}
    for obj in scope.objects:
        for sym in obj.symbols.dynsym:
            if not sym.defined and sym.name in shared:
                importers.setdefault(sym.name, []).append(obj.label)
    dupes = []
    for name in shared:
        defs = definers[name]
        chosen = defs[0][0]
        entries = tuple(_definition(obj, sym, chosen, first=i == 0)
                        for i, (obj, sym) in enumerate(defs))
        dupes.append(Duplicate(name, defs[0][1].type, entries,
                               tuple(dict.fromkeys(importers.get(name, ())))))
    dupes.sort(key=lambda d: (not d.split, _ORDER.get(d.type, 2), d.name))
    return DupesReport(scope.file, tuple(o.label for o in scope.objects), scope.missing,
                       tuple(dupes))


def _definition(obj: ScopeObject, sym: Symbol, chosen: ScopeObject, *,
                first: bool) -> Definition:
    binding = Binding.CHOSEN if first else _binding(obj, sym)
    own = binding is Binding.CHOSEN or binding.splits
    return Definition(obj.label, obj.path, sym.type, sym.visibility, binding,
                      obj.label if own else chosen.label)


def _binding(obj: ScopeObject, sym: Symbol) -> Binding:
    """How ``obj``, which is not first in the scope, binds its own references to ``sym``."""
    tables = obj.symbols
    if sym.bind is Bind.UNIQUE:
        return Binding.UNIQUE
    if tables.symbolic:
        return Binding.SYMBOLIC
    if sym.visibility is Visibility.PROTECTED:
        return Binding.PROTECTED
    named = sym.index in tables.referenced_by_symbol()
    if named:
        return Binding.INTERPOSED
    if sym.type is SymbolType.TLS and _local_tls(obj):
        return Binding.LOCAL_TLS
    return Binding.UNREFERENCED


def _local_tls(obj: ScopeObject) -> bool:
    """Whether ``obj`` has a TLS relocation against its own module (no symbol)."""
    kinds = _TLS_RELOCATIONS.get(obj.symbols.machine, frozenset())
    return any(r.type in kinds and r.symbol == 0 for r in obj.symbols.relocations)

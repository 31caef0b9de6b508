"""The global lookup scope of a load, in glibc's order, with each object's symbols.

glibc looks a symbol up in the main program's search list (``l_searchlist``, built
breadth-first by ``_dl_map_object_deps`` in elf/dl-deps.c): the program, then its
DT_NEEDED closure in load order, the loader itself where it was first needed. The first
object whose ``.dynsym`` defines the name wins (elf/dl-lookup.c, ``do_lookup_x``); an object
with DF_SYMBOLIC is searched first for its own references. LD_PRELOAD objects are not
modelled (a build's tests should not depend on them), nor symbol versions: the first
definition of the name is taken.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from bazel_ldfix.loader.closure import Options, resolve_file
from bazel_ldfix.loader.resolution import Via
from bazel_ldfix.symbols import Bind, Symbol, SymbolTables, read_symbols


@dataclass(frozen=True)
class ScopeObject:
    """One loaded object: the name it was loaded under, its file, its symbols."""

    name: str                      # the DT_NEEDED name (the file as given, for the first)
    path: str                      # where it was opened
    soname: str | None
    symbols: SymbolTables = field(repr=False)

    def known_as(self, name: str) -> bool:
        return name in (self.name, self.soname, os.path.basename(self.path))

    @property
    def label(self) -> str:
        return self.soname or self.name


@dataclass(frozen=True)
class Scope:
    file: str
    objects: tuple[ScopeObject, ...]     # lookup order; objects[0] is the file itself
    missing: tuple[str, ...]             # DT_NEEDED names the loader model did not find
    error: str | None                    # where the model's load stops, if it does

    def lookup(self, name: str, requester: ScopeObject) -> tuple[ScopeObject, Symbol] | None:
        """The definition a reference from ``requester`` to ``name`` binds to."""
        if requester.symbols.symbolic:
            own = requester.symbols.defines(name)
            if own is not None:
                return requester, own
        for obj in self.objects:
            sym = obj.symbols.defines(name)
            if sym is not None:
                return obj, sym
        return None

    def definers(self, name: str) -> tuple[tuple[ScopeObject, Symbol], ...]:
        out = []
        for obj in self.objects:
            sym = obj.symbols.defines(name)
            if sym is not None:
                out.append((obj, sym))
        return tuple(out)


def load_scope(path: str, options: Options) -> Scope:
    """``path``'s load by the loader model, and the symbols of every object in it."""
    resolution = resolve_file(path, options)
    objects = [ScopeObject(path, path, resolution.info.soname, read_symbols(path))]
    seen = {os.path.realpath(path)}
    for lib in resolution.libraries:
        if lib.path is None or lib.via is Via.VDSO:
            continue
        host = _host_path(lib.path, options)
        real = os.path.realpath(host)
        if real in seen:
            continue
        seen.add(real)
        soname = lib.info.soname if lib.info is not None else None
        objects.append(ScopeObject(lib.name, host, soname, read_symbols(host)))
    return Scope(path, tuple(objects), resolution.missing, resolution.error)


def _host_path(path: str, options: Options) -> str:
    """Where the file the loader would open under ``options.root`` is on this machine."""
    if not path.startswith("/"):
        return os.path.join(options.cwd, path)
    root = options.root.rstrip("/")
    if not root or path.startswith(root + "/"):
        return path
    return root + path


def exported(symbols: SymbolTables) -> tuple[Symbol, ...]:
    """What the object offers the global scope and may hold state: defined, non-local
    .dynsym symbols that are not absolute (version names such as GLIBC_2.2.5 are)."""
    return tuple(s for s in symbols.dynsym
                 if s.defined and s.bind is not Bind.LOCAL and s.name and not s.absolute)

"""Which ``cc_import`` can provide a SONAME that no import of the test's build stages.

A vendor SDK often declares every library it ships, while a test links only the one it
calls: ``libztop.so.1`` needs ``libzmid.so.3``, and nothing of the test's build stages
``zmid``. Bazel's ``_solib_`` directories then say nothing of its import. The import is read
from the BUILD file of the package that holds a copy of the file: the nearest directory,
at or above the copy, with a ``BUILD.bazel`` or ``BUILD`` file, inside the copy's
repository. Bazel reads a repository's BUILD files from under ``external/``, whatever
layout wrote them, so that is where they are read. A call counts when it is a top-level
``cc_import`` whose ``shared_library`` is a plain string naming a file of its own package
that has the SONAME wanted.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bazel_ldfix import elf
from bazel_ldfix.bazel import buildfile
from bazel_ldfix.bazel.solib import SolibImport
from bazel_ldfix.buildfix.definitions import read_source
from bazel_ldfix.errors import BadInputError, CannotEditError

_BUILD_NAMES = ("BUILD.bazel", "BUILD")


def declared_import(soname: str, copies: Iterable[str], output_base: str | None
                    ) -> SolibImport | None:
    """The first import, in the order of ``copies``, of a file with the SONAME ``soname`` in
    the package that holds the copy; None when no BUILD file declares one.

    ``copies`` are paths under ``output_base/external`` as Bazel's symlinks name them.
    """
    if not output_base:
        return None
    external = os.path.join(output_base, "external") + "/"
    seen: set[tuple[str, str]] = set()
    for copy in copies:
        copy = os.path.normpath(copy)
        if not copy.startswith(external):
            continue
        repository, _, rel = copy[len(external):].partition("/")
        if not repository or not rel:
            continue
        package = _package_of(external + repository, os.path.dirname(rel))
        if package is None or (repository, package[0]) in seen:
            continue
        seen.add((repository, package[0]))
        found = _import_in(external + repository, repository, package, soname)
        if found is not None:
            return found
    return None


def _package_of(root: str, rel_dir: str) -> tuple[str, str] | None:
    """``(package, BUILD file)``: the nearest directory at or above ``rel_dir`` (relative
    to the repository ``root``) with a BUILD file."""
    parts = [p for p in rel_dir.split("/") if p]
    while True:
        package = "/".join(parts)
        for name in _BUILD_NAMES:
            path = os.path.join(root, package, name) if package else os.path.join(root, name)
            if os.path.isfile(path):
                return package, path
        if not parts:
            return None
        parts.pop()


def _import_in(root: str, repository: str, package: tuple[str, str], soname: str
               ) -> SolibImport | None:
    return next((i for i in _imports_in(root, repository, package) if i.soname == soname),
                None)


def _imports_in(root: str, repository: str, package: tuple[str, str]) -> list[SolibImport]:
    """Every top-level ``cc_import`` of one package whose ``shared_library`` is a plain
    file of the package, with that file's SONAME, in the order of the BUILD file."""
    name, build = package
    try:
        source = read_source(build)
    except CannotEditError:
        return []               # unreadable or not Starlark: nothing to find there
    package_dir = os.path.join(root, name) if name else root
    out: list[SolibImport] = []
    for call in source.calls():
        if buildfile.function_name(call) != "cc_import":
            continue
        rule = buildfile.string_attr(call, "name")
        value = buildfile.string_attr(call, "shared_library")
        if not rule or not value or value.startswith(("@", "//")) or ":" in value:
            continue            # a label of another rule: not a file of this package
        target = os.path.normpath(os.path.join(package_dir, value))
        if not target.startswith(package_dir + "/") or not os.path.isfile(target):
            continue
        try:
            found = elf.read_elf(target).soname
        except BadInputError:
            continue
        rel = os.path.relpath(target, root)
        prefix = f"@{repository}" if repository else ""
        out.append(SolibImport(f"{prefix}//{name}:{rule}", os.path.dirname(rel),
                               os.path.basename(rel), "", target, found, True))
    return out


@dataclass(frozen=True)
class Package:
    """The rules of one package that ``fix`` may give an edge: its ``cc_import`` calls,
    and the ``cc_library`` wrappers an earlier ``fix`` made of some of them."""

    imports: tuple[SolibImport, ...] = ()
    # The name of a wrapped import (``a_import``) -> the wrapper's name (``a``) and its deps.
    wrappers: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)


def package_of(imp: SolibImport) -> Package:
    """The rules of the package ``imp`` was declared in, read as :func:`declared_import`
    reads them (nothing when its label was not verified, or its package has no BUILD file
    there)."""
    suffix = os.path.join(imp.library_dir, imp.file) if imp.library_dir else imp.file
    target = os.path.normpath(imp.target)
    if not imp.verified or not target.endswith("/" + suffix):
        return Package()
    root = target[: -len(suffix) - 1]
    for name in _BUILD_NAMES:
        build = os.path.join(root, imp.package, name) if imp.package else \
            os.path.join(root, name)
        if os.path.isfile(build):
            return Package(tuple(_imports_in(root, imp.repository, (imp.package, build))),
                           _wrappers(build))
    return Package()


def _wrappers(build: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``cc_library(name = "x", deps = [":x_import", ...])``, as ``fix`` writes it, by the
    name of the import it wraps."""
    try:
        source = read_source(build)
    except CannotEditError:
        return {}
    out = {}
    for call in source.calls():
        name = buildfile.string_attr(call, "name")
        deps = buildfile.keyword(call, "deps")
        if buildfile.function_name(call) != "cc_library" or not name or deps is None \
                or not isinstance(deps.value, ast.List):
            continue
        items = tuple(v for v in map(buildfile.string_of, deps.value.elts) if v is not None)
        if f":{name}_import" in items:
            out[f"{name}_import"] = (name, items)
    return out

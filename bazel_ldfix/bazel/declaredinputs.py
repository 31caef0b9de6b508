"""What Bazel declares for a test, against what an earlier build left in ``bazel-out``.

A test's RUNPATH reaches ``$ORIGIN/../_solib_<cpu>/<dir>``, and ``$ORIGIN`` is where the
executable really is: ``bazel-out/<config>/bin``, a directory Bazel never empties. A library
an earlier build staged there (before a BUILD change was reverted, on another branch) stays
until ``bazel clean``, and a local run finds it by accident. Bazel declares what the test may
use: its runfiles manifest (``<test>.runfiles_manifest``), which is also the test action's
declared inputs, what a remote executor or a clean checkout gets. A file of a ``_solib_``
directory the test's RUNPATH reaches that the manifest does not list is a leftover, and a
library the loader model finds there is one the test loads only by accident.

The check is cheap when there is nothing to find: the manifest is read and its ``_solib_``
directories listed (once per command); the loader model runs only when some file there is
not declared.

The other ``_solib_`` directories of the configuration hold what Bazel staged for other
targets, and what earlier builds left: an import renamed by a BUILD fix and then reverted
(``@sdk//:x_import``), or an import that has since changed its file. No manifest of the
test speaks of them. So each is judged by the BUILD file Bazel reads for its label
(:func:`build_declares`): a file that no rule of that package stages now is a leftover.
When the file cannot tell (a macro, a computed name, a ``glob``), the import is kept.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.bazel import buildfile, runfiles, solib
from bazel_ldfix.bazel.solib import SolibImport
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.resolution import Environment


@dataclass(frozen=True)
class Leftover:
    """A library a test loads from a file Bazel does not declare for it."""

    soname: str
    path: str           # the file the model found: <bin>/_solib_<cpu>/<dir>/<name>


def undeclared(executable: str, listed: dict[str, tuple[str, list[str]]] | None = None,
               *, declarer: str | None = None) -> frozenset[str]:
    """The files of the test's ``_solib_`` directories that its runfiles manifest does
    not list (by real directory; empty when there is no manifest).

    ``declarer``: the executable whose runfiles manifest declares what ``executable`` may
    use, when that is not its own: the test's, for a program of its runfiles (Bazel makes
    no manifest for a ``cc_binary`` that only a test's ``data`` names).

    The directories are those of the ``_solib_`` files the manifest declares: the test's
    RUNPATH names the directories of the libraries it links, and Bazel stages each of
    those libraries in its runfiles. Each manifest line gives the file's path in
    ``bazel-out`` (its target), so neither the executable nor a symlink is read.
    ``listed`` keeps each directory's listing for the next test of the same command.
    """
    entries = runfiles.read_manifest(runfiles.manifest_of(declarer or executable))
    if not entries:
        return frozenset()
    declared: dict[str, set[str]] = {}
    for e in entries:
        rest = e.path.partition("/")[2]
        if rest.startswith("_solib_") and e.target and "/bin/_solib_" in e.target:
            directory, _, name = e.target.rpartition("/")
            declared.setdefault(directory, set()).add(name)
    out: set[str] = set()
    listed = {} if listed is None else listed
    for directory, names in declared.items():
        seen = listed.get(directory)
        if seen is None:
            # By its real path: the model finds files through the executable's real path.
            try:
                seen = listed[directory] = (os.path.realpath(directory),
                                            os.listdir(directory))
            except OSError:
                seen = listed[directory] = (directory, [])
        real, found = seen
        out.update(os.path.join(real, n) for n in found if n not in names)
    return frozenset(out)


def leftovers(executable: str, library_path: str | None = None,
              listed: dict[str, tuple[str, list[str]]] | None = None,
              *, declarer: str | None = None) -> tuple[Leftover, ...]:
    """The libraries ``executable`` would load only from undeclared files (none for a test
    that is not an ELF program); ``declarer`` as for :func:`undeclared`."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.loader.closure import LoaderFactory

    stale = undeclared(executable, listed, declarer=declarer)
    if not stale:
        return ()
    real = os.path.realpath(executable)
    try:
        info = elf.read_elf(real)
    except BadInputError:
        return ()
    loaders = LoaderFactory()
    env = Environment(library_path, os.path.dirname(real), loaders.cache_for(info))
    resolution = loaders.make_loader(info, env).resolve(real, info=info)
    out: dict[str, Leftover] = {}
    for lib in resolution.libraries:
        if lib.path is not None and among(lib.path, stale):
            out.setdefault(lib.name, Leftover(lib.name, lib.path))
    return tuple(out.values())


def among(path: str, stale: frozenset[str]) -> bool:
    """Whether the file ``path`` names (its directory's real path, its own name) is one of
    ``stale`` (from :func:`undeclared`)."""
    if not stale:
        return False
    directory, _, name = os.path.normpath(path).rpartition("/")
    return os.path.join(os.path.realpath(directory), name) in stale


@dataclass(frozen=True)
class Imports:
    """The libraries staged in the ``_solib_`` directories of a test's configuration."""

    own: tuple[SolibImport, ...]        # the test's, as its runfiles manifest declares them
    other: tuple[SolibImport, ...]      # other targets', as their BUILD files declare them


def imports_of(executable: str, apparent: Callable[[str], str] | None = None) -> Imports:
    """What Bazel stages now for ``executable`` and for the rest of its configuration,
    without what earlier builds left in ``bazel-out`` (see the module docstring).

    ``apparent`` maps a canonical label to the one the main repository writes
    (:func:`solib.solib_imports`).
    """
    stale = undeclared(executable)
    own = tuple(i for i in solib.solib_imports(solib.solib_dirs_of(executable), apparent)
                if not among(i.staged, stale))
    staged = {i.staged for i in own}
    trees: dict[str, ast.Module | None] = {}
    other = tuple(i for i in solib.solib_imports(solib.every_solib_dir(executable), apparent)
                  if i.staged not in staged and not among(i.staged, stale)
                  and build_declares(i, trees) is not False)
    return Imports(own, other)


# Rules that stage a prebuilt library under their own label, and the attributes that name it.
_STAGING = {"cc_import": ("shared_library", "interface_library"),
            "cc_library": ("srcs",), "cc_binary": ("srcs",), "cc_test": ("srcs",)}
# Rules that make one target, named by ``name``, and stage no library under it
# (``copy_file`` is skylib's, which ``fix`` itself writes).
_ONE_TARGET = frozenset({
    "genrule", "filegroup", "alias", "config_setting", "test_suite", "copy_file",
    *(f"{lang}_{kind}" for lang in ("sh", "py", "java") for kind in ("binary", "library", "test"))})
# Calls that make no rule: Bazel's functions of a BUILD file and Starlark's built-ins.
_NO_TARGET = frozenset({
    "load", "package", "licenses", "exports_files", "package_group", "glob", "select",
    "package_name", "repository_name", "module_name", "subpackages", "existing_rule",
    "existing_rules", "len", "str", "int", "bool", "list", "dict", "tuple", "range",
    "sorted", "reversed", "enumerate", "zip", "any", "all", "min", "max", "repr", "type",
    "hasattr", "getattr", "fail", "print", "struct", "depset", "Label"})
# The name of a library file, as cc_import accepts it (a label without one may name a rule).
_LIBRARY_FILE = re.compile(r"\.(so(\.[^/]*)?|dylib|dll|ifso|tbd|lib|a)$")


def build_declares(imp: SolibImport, trees: dict[str, ast.Module | None] | None = None
                   ) -> bool | None:
    """Whether the BUILD file Bazel reads for ``imp.label`` stages ``imp``'s file now.

    True: a rule of that name names the file (``shared_library``, ``interface_library``,
    ``srcs``). False: the file was read, and no rule of it can stage the file under that
    label: no call of that name names it, and every call is one of Bazel's own rules with
    a literal name. None: the file cannot tell (a macro or a rule loaded from a ``.bzl``, a
    computed name or attribute, a ``glob``), or cannot be read, or the import's label was
    not verified. ``trees`` keeps the files read, by path, for the next import.
    """
    # An unverified label (a hashed directory's guess) names no BUILD file to read.
    root = imp.repository_root if imp.verified else None
    if root is None:
        return None
    directory = os.path.join(root, imp.package) if imp.package else root
    path = next((os.path.join(directory, name) for name in ("BUILD.bazel", "BUILD")
                 if os.path.isfile(os.path.join(directory, name))), None)
    if path is None:
        # A directory with no BUILD file is no package. A directory not there may be one
        # of the main repository that this build did not link into the execroot.
        return False if os.path.isdir(directory) else None
    trees = {} if trees is None else trees
    if path not in trees:
        trees[path] = buildfile.read_tree(path)
    tree = trees[path]
    if tree is None:
        return None
    wanted = os.path.normpath(os.path.join(imp.library_dir, imp.file))
    unsure = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = _rule_function(node)
        if function is None or function in _NO_TARGET:
            continue
        if function not in _STAGING and function not in _ONE_TARGET:
            unsure = True       # a macro may make a target of any name
            continue
        name = buildfile.string_attr(node, "name")
        if name is None:
            # A name computed (a comprehension) or passed with **kwargs may be this one.
            unsure = unsure or buildfile.keyword(node, "name") is not None or any(
                kw.arg is None for kw in node.keywords)
            continue
        if name != imp.name or function in _ONE_TARGET:
            continue
        found = _stages(node, _STAGING[function], imp.package, wanted)
        if found:
            return True
        unsure = unsure or found is None
    return None if unsure else False


def _rule_function(call: ast.Call) -> str | None:
    """``cc_import`` for ``cc_import(...)`` and ``native.cc_import(...)``; None for a
    method (``"%s".format(...)``), which makes no rule."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "native":
        return call.func.attr
    return None


def _stages(call: ast.Call, attributes: tuple[str, ...], package: str, wanted: str
            ) -> bool | None:
    """Whether one of ``attributes`` names the repository-relative file ``wanted`` (None:
    some value cannot be read as a file of the repository)."""
    unsure = False
    for attribute in attributes:
        kw = buildfile.keyword(call, attribute)
        if kw is None:
            continue
        nodes = kw.value.elts if isinstance(kw.value, ast.List) else [kw.value]
        for node in nodes:
            value = buildfile.string_of(node)
            path = None if value is None else _repository_path(value, package)
            if path is None:
                unsure = True
            elif path == wanted:
                return True
    return None if unsure else False


def _repository_path(value: str, package: str) -> str | None:
    """The repository-relative file a label names (``lib/x.so``, ``:lib/x.so``,
    ``//pkg:lib/x.so``); None for another repository's, or for a rule's label."""
    if value.startswith("@"):
        return None
    if value.startswith("//"):
        package, _, name = value[2:].partition(":")
        name = name or package.rsplit("/", 1)[-1]
    else:
        name = value.removeprefix(":")
    if not _LIBRARY_FILE.search(name):
        # A source file of another kind stages nothing; a name with no extension may be a
        # rule's, whose output may be the file.
        return "" if "." in os.path.basename(name) else None
    return os.path.normpath(os.path.join(package, name))

"""Which file defines a ``cc_import``: the one a person edits, or why there is none.

A rule of the main repository lives in ``<workspace>/<package>/BUILD(.bazel)``. A rule of an
external repository lives in a BUILD file its repository rule put there; the place to change
it is read from the repository's call in WORKSPACE:

- ``local_repository(path = P)``: the BUILD file inside ``P``;
- ``new_local_repository``/``http_archive`` with ``build_file = L``: the file ``L`` names in
  the main repository;
- ... with ``build_file_content = "..."``: that string, in WORKSPACE;
- ``http_archive`` without either: the archive's own BUILD file (described, not edited);
- any other rule (one loaded from a ``.bzl``): that rule writes the file (described);
- no call at all (a macro of a ``.bzl`` file makes it): Bazel's query names the rule, the
  macros that call it and their files (described).
"""

from __future__ import annotations

import ast
import enum
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from bazel_ldfix.bazel import buildfile
from bazel_ldfix.bazel.buildfile import function_name, string_attr
from bazel_ldfix.bazel.repocall import Frame, RepositoryCall
from bazel_ldfix.buildfix import files
from bazel_ldfix.buildfix.starlark import Source
from bazel_ldfix.errors import CannotEditError

BUILD_NAMES = ("BUILD.bazel", "BUILD")
_BUILD_FILE_RULES = ("new_local_repository", "http_archive", "git_repository",
                     "new_git_repository")


class Layout(enum.Enum):
    MAIN = "a BUILD file of this workspace"
    LOCAL_REPOSITORY = "local_repository: the BUILD file in its directory"
    BUILD_FILE = "build_file: a file of this workspace"
    BUILD_FILE_CONTENT = "build_file_content: a string in WORKSPACE"
    ARCHIVE = "the archive's own BUILD file"
    REPOSITORY_RULE = "a repository rule writes the BUILD file"
    EXTENSION = "a module extension makes the repository"
    MODULE = "the repository of another Bazel module"
    UNSEEN = "no call in WORKSPACE or MODULE.bazel defines the repository"

    @property
    def editable(self) -> bool:
        return self in (Layout.MAIN, Layout.LOCAL_REPOSITORY, Layout.BUILD_FILE,
                        Layout.BUILD_FILE_CONTENT)


@dataclass(frozen=True)
class Place:
    """Where the BUILD text of one package of one repository comes from."""

    layout: Layout
    repository: str             # "" for the main repository
    package: str
    file: str | None            # the file to edit (WORKSPACE for build_file_content)
    rule: str | None = None     # the WORKSPACE function: new_local_repository, my_sdk_rule
    bzl: str | None = None      # the .bzl label a custom rule is loaded from
    line: int | None = None     # its call's line in WORKSPACE
    generated: str | None = None    # the BUILD file as the rule wrote it (output_base)
    call_name: str | None = None    # the name the call gives it, when not the repository's
    defined_in: str = "WORKSPACE"   # or MODULE.bazel
    # A repository a macro of a .bzl file makes: the macros' calls of the rule, outermost
    # first, and where the rule is defined (Bazel's query says both, bazel/repocall.py).
    macros: tuple[Frame, ...] = ()
    rule_at: Frame | None = None

    @property
    def name_in_file(self) -> str:
        return self.call_name or self.repository

    def describe(self, workspace: str) -> str:
        where = f"@{self.repository}" if self.repository else "this workspace"
        if self.layout is Layout.REPOSITORY_RULE:
            text = (f"{where} is made by the repository rule `{self.rule}`"
                    + (f" (loaded from {self.bzl})" if self.bzl else "")
                    + (f" (defined in {_rel(self.rule_at.path, workspace)} line "
                       f"{self.rule_at.line})" if self.rule_at else "")
                    + "".join(f", called in the macro `{m.function}` "
                              f"({_rel(m.path, workspace)} line {m.line})"
                              for m in reversed(self.macros))
                    + f", called in {self.defined_in} line {self.line}; that rule writes its "
                    "BUILD file, so change what it writes")
        elif self.layout is Layout.ARCHIVE:
            text = (f"{where} ({self.rule}, {self.defined_in} line {self.line}) uses the "
                    "archive's own BUILD file: give it a build_file, or a patch "
                    "(patches = [...])")
        elif self.layout is Layout.EXTENSION:
            text = (f"{where} is made by the module extension `{self.rule}`"
                    + (f" (from {self.bzl})" if self.bzl else "")
                    + (f", used in MODULE.bazel line {self.line}" if self.line else "")
                    + f" under the name {self.name_in_file}; the extension writes its BUILD "
                    "file, so change its tags or the extension")
        elif self.layout is Layout.MODULE:
            text = (f"{where} comes from the Bazel module `{self.rule}` (its own or its "
                    "registry's BUILD file): patch it (single_version_override(patches = "
                    "[...]) in MODULE.bazel)")
        elif self.layout is Layout.UNSEEN:
            text = (f"{where} is not defined by a call with name = "
                    f"\"{self.name_in_file}\" in WORKSPACE or MODULE.bazel (a macro from a .bzl "
                    "file defines it?), so its BUILD file cannot be traced to a file of yours")
        else:
            text = f"{self.layout.value}: {_rel(self.file, workspace)}"
        if self.generated:
            text += f"; as written now: {self.generated}"
        return text


def workspace_file(workspace: str) -> str | None:
    for name in ("WORKSPACE.bazel", "WORKSPACE"):
        path = os.path.join(workspace, name)
        if os.path.isfile(path):
            return path
    return None


def read_source(path: str, name: str | None = None) -> Source:
    """The whole file, parsed (a file too large to read whole is refused, never cut)."""
    return Source.parse(files.read(path).text, name or path)


def defines_repository(name: str, workspace: str, output_base: str | None) -> bool:
    """Whether the workspace can reach ``@name``: fetched already under the output_base,
    or named by a call in WORKSPACE (``name = "..."``) or MODULE.bazel (``bazel_dep``)."""
    if output_base and os.path.isdir(os.path.join(output_base, "external", name)):
        return True
    for path in (workspace_file(workspace), os.path.join(workspace, "MODULE.bazel")):
        if path is None or not os.path.isfile(path):
            continue
        try:
            source = read_source(path)
        except CannotEditError:
            continue
        if any(string_attr(call, "name") == name for call in source.calls()):
            return True
    return False


def locate(repository: str, package: str, workspace: str, output_base: str | None,
           ask: Callable[[str], RepositoryCall | None] | None = None) -> Place:
    """The place a package's BUILD text comes from (see the module docstring).

    ``ask(name)`` is Bazel's answer for a repository no call in WORKSPACE names (a macro
    of a .bzl file makes it): the rule and the macros that call it (None: not asked)."""
    if not repository:
        return Place(Layout.MAIN, "", package, _build_file(os.path.join(workspace, package)))
    generated = None
    if output_base:
        generated = _build_file(os.path.join(output_base, "external", repository, package),
                                must_exist=True) or None
    made = extension_repo(repository)
    module = os.path.join(workspace, "MODULE.bazel")
    if made is not None and os.path.isfile(module):
        return _from_module(made, repository, package, workspace, module, generated)
    owner = re.split(r"[+~]", repository)
    if len(owner) == 2 and os.path.isfile(module):
        # rules_foo+ (Bazel 8), rules_foo~ or rules_foo~1.2.3 (Bazel 7): a module's own repo
        return Place(Layout.MODULE, repository, package, None, rule=owner[0],
                     generated=generated)
    ws_file = workspace_file(workspace)
    source = read_source(ws_file) if ws_file else None
    call = source.rule(repository) if source else None
    asked = ask(repository) if call is None and ask is not None and ws_file else None
    if asked is not None:
        top = asked.stack[0]
        return Place(Layout.REPOSITORY_RULE, repository, package, None, rule=asked.rule,
                     line=top.line, generated=generated,
                     defined_in=os.path.basename(top.path), macros=asked.macros,
                     rule_at=asked.defined)
    if call is None and os.path.isfile(module):
        # An apparent name of a use_repo_rule repository (a repo mapping already applied).
        return _from_module(("", "_repo_rules", repository), repository, package, workspace,
                            module, generated)
    if source is None or call is None or ws_file is None:
        return Place(Layout.UNSEEN, repository, package, None, generated=generated)
    rule = function_name(call)
    if rule == "maybe" and call.args and isinstance(call.args[0], ast.Name):
        rule = call.args[0].id      # maybe(http_archive, name = ...)
    loaded = source.loads().get(rule or "")
    return _from_call(call, rule, loaded[0] if loaded else None, source, ws_file, repository,
                      package, workspace, generated)


def extension_repo(repository: str) -> tuple[str, str, str] | None:
    """``(module repo, extension, name)`` of a repository a module extension made, by its
    canonical name, or None for any other name.

    Bazel 8 names it ``<bzl repo>+<extension><n>+<name>`` and Bazel 7
    ``<bzl repo>~<extension>~<name>`` (``BazelDepGraphFunction.makeUniqueNameCandidate``);
    a ``use_repo_rule`` repository is made by the extension ``_repo_rules`` (``_repo_rules2``
    for a second proxy file), of the root module: ``+_repo_rules+x``, ``_main~_repo_rules~x``.
    """
    parts = re.split(r"[+~]", repository)
    if len(parts) != 3 or not parts[1] or not parts[2]:
        return None
    return parts[0], parts[1], parts[2]


def _from_module(made: tuple[str, str, str], repository: str, package: str, workspace: str,
                 module: str, generated: str | None) -> Place:
    owner, extension, name = made
    if owner not in ("", "_main"):
        return Place(Layout.MODULE, repository, package, None, rule=owner, generated=generated)
    source = read_source(module)
    proxies = source.assignments()
    if re.fullmatch(r"_repo_rules\d*", extension):
        call = source.rule(name)
        bound = proxies.get(buildfile.function_name(call) or "") if call else None
        if call is None or bound is None or bound[0] != "use_repo_rule" or len(bound[1]) < 2:
            return Place(Layout.UNSEEN, repository, package, None, generated=generated,
                         call_name=name)
        return _from_call(call, bound[1][1], bound[1][0], source, module, repository,
                          package, workspace, generated, name)
    usage = next(((var, args) for var, (callee, args) in proxies.items()
                  if callee == "use_extension" and len(args) >= 2 and args[1] == extension),
                 None)
    line = None
    bzl = usage[1][0] if usage else None
    for call in source.calls():
        if usage and isinstance(call.func, ast.Attribute) and isinstance(
                call.func.value, ast.Name) and call.func.value.id == usage[0]:
            line = line or call.lineno
    return Place(Layout.EXTENSION, repository, package, None, rule=extension, bzl=bzl,
                 line=line, generated=generated, call_name=name)


def _from_call(call: ast.Call, rule: str | None, bzl: str | None, source: Source, file: str,
               repository: str, package: str, workspace: str, generated: str | None,
               call_name: str | None = None) -> Place:
    """The place a repository call (in WORKSPACE or MODULE.bazel) puts a package's BUILD."""
    line = call.lineno
    kind = os.path.basename(file)
    base = Place(Layout.REPOSITORY_RULE, repository, package, None, rule, bzl, line, generated,
                 call_name, kind)
    if rule in ("local_repository", "new_local_repository"):
        path = string_attr(call, "path")
        if path is not None and (rule == "local_repository" or package):
            directory = os.path.join(workspace, path, package)
            return replace(base, layout=Layout.LOCAL_REPOSITORY, file=_build_file(directory))
    if rule in ("local_repository", *_BUILD_FILE_RULES) and not package:
        if string_attr(call, "build_file_content") is not None:
            return replace(base, layout=Layout.BUILD_FILE_CONTENT, file=file)
        label = string_attr(call, "build_file")
        if label is not None:
            path = label_path(label, workspace, source)
            if path is not None:
                return replace(base, layout=Layout.BUILD_FILE, file=path)
            return replace(base, bzl=f"build_file = {label} (another repository)")
        if rule in ("http_archive", "git_repository"):
            return replace(base, layout=Layout.ARCHIVE)
    return base


def label_path(label: str, workspace: str, source: Source) -> str | None:
    """The file a label of the main repository names (a plain path is workspace-relative)."""
    if label.startswith("@"):
        repo, sep, rest = label[1:].partition("//")
        if not sep or repo not in ("", _workspace_name(source)):
            return None
        label = "//" + rest
    if label.startswith("//"):
        package, _, name = label[2:].partition(":")
        if not name:
            name = package.rsplit("/", 1)[-1]
        return os.path.join(workspace, package, name)
    return os.path.join(workspace, label.lstrip(":"))


def _workspace_name(source: Source) -> str | None:
    for call in source.calls():
        if function_name(call) == "workspace":
            return string_attr(call, "name")
    return None


def _build_file(directory: str, must_exist: bool = False) -> str:
    for name in BUILD_NAMES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return "" if must_exist else os.path.join(directory, "BUILD")


def _rel(path: str | None, workspace: str) -> str:
    if path is None:
        return "?"
    rel = os.path.relpath(path, workspace)
    return path if rel.startswith("..") else rel

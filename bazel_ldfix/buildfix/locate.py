"""Which file defines a ``cc_import``: the one a person edits, or why there is none.

A rule of the main repository lives in ``<workspace>/<package>/BUILD(.bazel)``. A rule of an
external repository lives in a BUILD file its repository rule put there; the place to change
it is read from the repository's call in WORKSPACE:

- ``local_repository(path = P)``: the BUILD file inside ``P``;
- ``new_local_repository``/``http_archive`` with ``build_file = L``: the file ``L`` names in
  the main repository;
- ... with ``build_file_content = "..."``: that string, in WORKSPACE;
- ``http_archive`` without either: the archive's own BUILD file (described, not edited);
- any other rule (one loaded from a ``.bzl``): that rule writes the file (described).
"""

from __future__ import annotations

import ast
import enum
import os
from dataclasses import dataclass

from bazel_ldfix.buildfix.starlark import Source, function_name, string_attr
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
    UNSEEN = "no call in WORKSPACE defines the repository"

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

    def describe(self, workspace: str) -> str:
        where = f"@{self.repository}" if self.repository else "this workspace"
        if self.layout is Layout.REPOSITORY_RULE:
            text = (f"{where} is made by the repository rule `{self.rule}`"
                    + (f" (loaded from {self.bzl})" if self.bzl else "")
                    + f", called in WORKSPACE line {self.line}; that rule writes its BUILD "
                    "file, so change what it writes")
        elif self.layout is Layout.ARCHIVE:
            text = (f"{where} ({self.rule}, WORKSPACE line {self.line}) uses the archive's own "
                    "BUILD file: give it a build_file, or a patch (patches = [...])")
        elif self.layout is Layout.UNSEEN:
            text = (f"{where} is not defined by a call with name = \"{self.repository}\" in "
                    "WORKSPACE (a macro from a .bzl file defines it?), so its BUILD file "
                    "cannot be traced to a file of yours")
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
    try:
        with open(path, "rb") as fh:
            data = fh.read(16 << 20)
    except OSError as exc:
        raise CannotEditError(f"cannot read {path}: {exc.strerror}") from None
    return Source.parse(data.decode("utf-8", "surrogateescape"), name or path)


def locate(repository: str, package: str, workspace: str, output_base: str | None) -> Place:
    """The place a package's BUILD text comes from (see the module docstring)."""
    if not repository:
        return Place(Layout.MAIN, "", package, _build_file(os.path.join(workspace, package)))
    generated = None
    if output_base:
        generated = _build_file(os.path.join(output_base, "external", repository, package),
                                must_exist=True) or None
    ws_file = workspace_file(workspace)
    if ws_file is None:
        return Place(Layout.UNSEEN, repository, package, None, generated=generated)
    source = read_source(ws_file)
    call = source.rule(repository)
    if call is None:
        return Place(Layout.UNSEEN, repository, package, None, generated=generated)
    rule = function_name(call)
    if rule == "maybe" and call.args and isinstance(call.args[0], ast.Name):
        rule = call.args[0].id      # maybe(http_archive, name = ...)
    line = call.lineno
    if rule in ("local_repository", "new_local_repository"):
        path = string_attr(call, "path")
        if path is not None and (rule == "local_repository" or package):
            directory = os.path.join(workspace, path, package)
            return Place(Layout.LOCAL_REPOSITORY, repository, package,
                         _build_file(directory), rule, line=line, generated=generated)
    if rule in ("local_repository", *_BUILD_FILE_RULES) and not package:
        if string_attr(call, "build_file_content") is not None:
            return Place(Layout.BUILD_FILE_CONTENT, repository, package, ws_file, rule,
                         line=line, generated=generated)
        label = string_attr(call, "build_file")
        if label is not None:
            path = label_path(label, workspace, source)
            if path is not None:
                return Place(Layout.BUILD_FILE, repository, package, path, rule, line=line,
                             generated=generated)
            return Place(Layout.REPOSITORY_RULE, repository, package, None, rule,
                         bzl=f"build_file = {label} (another repository)", line=line,
                         generated=generated)
        if rule in ("http_archive", "git_repository"):
            return Place(Layout.ARCHIVE, repository, package, None, rule, line=line,
                         generated=generated)
    loaded = source.loads().get(rule or "")
    return Place(Layout.REPOSITORY_RULE, repository, package, None, rule,
                 bzl=loaded[0] if loaded else None, line=line, generated=generated)


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

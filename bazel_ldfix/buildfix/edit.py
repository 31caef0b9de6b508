"""The changes made to files: each file found, read whole, edited once, and written.

Changes are grouped by the file that holds each rule's text, and files by their identity
(device, inode): one ``build_file`` reached through two names (a symlink shared by two
repositories) is read once and carries the edits of both. A dependency edge is only
written on a rule whose ``deps`` can carry a ``cc_import`` (a C/C++ rule); on any other
(a ``py_test``, a ``sh_test``, a macro) it is printed, not written.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Sequence

from bazel_ldfix.bazel import buildfile, buildtext
from bazel_ldfix.bazel.repocall import RepositoryCall
from bazel_ldfix.buildfix import files, starlark
from bazel_ldfix.buildfix.change import (
    Change,
    FileChange,
    Kind,
    Plan,
    Unwritten,
    shown,
    wrapped_name,
)
from bazel_ldfix.buildfix.definitions import Layout, Place, locate
from bazel_ldfix.errors import CannotEditError

# The rules whose deps take a cc_import, and link it into what they build.
CC_RULES = ("cc_test", "cc_binary", "cc_library")
# Bazel's own rules of other languages, named as such (any other name is a macro's).
_OTHER_RULES = frozenset(f"{lang}_{kind}" for lang in ("py", "sh", "java")
                         for kind in ("test", "binary", "library"))


def edit_plan(changes: Sequence[Change], workspace: str, output_base: str | None,
              problems: list[str], notes: list[str], unprovided: Sequence[str] = (),
              unfetched: Sequence[str] = (),
              ask: Callable[[str], RepositoryCall | None] | None = None) -> Plan:
    """The files that carry ``changes``, with their new text (nothing written); ``ask``
    says where a macro makes a repository (:func:`definitions.locate`)."""
    by_place: dict[Place, list[Change]] = {}
    for change in changes:
        repository, _, rest = change.label.lstrip("@").partition("//")
        package = rest.split(":", 1)[0]
        try:
            place = locate(repository, package, workspace, output_base, ask)
        except CannotEditError as exc:
            problems.append(str(exc))
            continue
        by_place.setdefault(place, []).append(change)
    # Two places in one file (two packages of one file, a build_file shared by two
    # repositories, one file named two ways) edit it in turn.
    found: dict[tuple[int, int], FileChange] = {}
    described: list[tuple[Place, tuple[Change, ...]]] = []
    unwritten: list[Unwritten] = []
    for place, group in by_place.items():
        path = place.file if place.layout.editable else place.generated
        if path is None:
            described.append((place, tuple(group)))
            continue
        try:
            if place.layout.editable:
                files.check_writable(path, output_base)
            snapshot = files.read(path)
            previous = found.get(snapshot.identity)
            before = previous.after if previous else snapshot.text
            after, refused = _edit(before, place, group, path, workspace)
        except CannotEditError as exc:
            problems.append(str(exc))
            continue
        unwritten += refused
        if after == before:
            continue
        names = (previous.names if previous else ()) + (
            (path,) if previous and path != previous.path and path not in previous.names
            else ())
        found[snapshot.identity] = FileChange(
            place if previous is None else previous.place,
            previous.path if previous else path,
            previous.before if previous else before, after,
            (previous.changes if previous else ()) + tuple(
                c for c in group if all(c != u.change for u in refused)),
            previous.snapshot if previous else snapshot, names)
    ordered = sorted(found.values(), key=lambda f: (not f.editable, f.path))
    return Plan(tuple(ordered), tuple(described), tuple(dict.fromkeys(problems)),
                tuple(dict.fromkeys(notes)), tuple(unwritten), tuple(dict.fromkeys(unprovided)),
                tuple(dict.fromkeys(unfetched)))


def _edit(text: str, place: Place, changes: Sequence[Change], path: str,
          workspace: str) -> tuple[str, list[Unwritten]]:
    name = shown(path, workspace)
    if place.layout is not Layout.BUILD_FILE_CONTENT:
        source, refused = _edit_build(starlark.Source.parse(text, name), changes)
        return source.text, refused
    ws = starlark.Source.parse(text, name)
    call = ws.rule(place.name_in_file)
    assert call is not None     # locate found it in this very file
    kw = buildfile.keyword(call, "build_file_content")
    assert kw is not None
    body = starlark.string_literal_body(ws, kw.value)
    value = buildfile.string_attr(call, "build_file_content")
    if body is None or value is None:
        raise CannotEditError(f"{name}:{kw.value.lineno}: build_file_content of "
                              f"@{place.repository} is not one string literal; nothing "
                              "changed")
    inner = starlark.Source.parse(value, f"build_file_content of @{place.repository} "
                                         f"({name} line {kw.value.lineno})")
    edited, refused = _edit_build(inner, changes)
    if edited.text == value:
        return text, refused
    # The literal keeps its form (r, quotes, triple or not) and the bytes of what stays.
    return starlark.set_literal(ws, kw.value, edited.text).text, refused


def _edit_build(source: starlark.Source, changes: Sequence[Change]
                ) -> tuple[starlark.Source, list[Unwritten]]:
    refused: list[Unwritten] = []
    # A wrap renames the import: every other change of the rule is made first, by its name.
    for change in sorted(changes, key=lambda c: c.kind is Kind.WRAP):
        name = change.label.rsplit(":", 1)[-1]
        call = source.rule(name)
        if call is None:
            raise CannotEditError(
                f"{source.name}: no call with name = {buildtext.string(name)} at the top level "
                f"(is {change.label} made by a macro or a loop?); nothing changed")
        function = buildfile.function_name(call)
        if change.kind is Kind.ADD and change.attribute == "deps" \
                and function not in CC_RULES:
            what = f"a {function}" if function in _OTHER_RULES \
                else f"made by `{function}`, which is not a C/C++ rule"
            refused.append(Unwritten(change, (
                f"{change.label} is {what}: its deps take no cc_import; add the dependency "
                "to the cc_library or cc_binary that links the library needing it")))
            continue
        if (change.attribute in ("shared_library", "interface_library")
                or change.kind is Kind.SYSTEM) and function != "cc_import":
            raise CannotEditError(
                f"{source.name}:{call.lineno}: {change.label} is made by the macro "
                f"`{function}`, not by cc_import: change what the macro passes on; nothing "
                "changed")
        if change.attribute == "shared_library" and _says_system_provided(call):
            # Bazel's rule: a cc_import whose library the system provides at run time
            # takes an interface_library and no shared_library (cc_import.bzl fails
            # "'shared_library' shouldn't be specified when 'system_provided' is true").
            raise CannotEditError(
                f"{source.name}:{call.lineno}: {change.label} says the system provides its "
                "library at run time (system_provided), so Bazel stages no file for it to "
                f"load, and takes no shared_library beside it. Install "
                f"{os.path.basename(change.value)} where the loader looks, or import "
                f"{change.value} as shared_library without system_provided; nothing "
                "changed")
        if change.kind is Kind.RULE:
            source = _add_rule(source, call, change)
            continue
        if change.kind is Kind.WRAP:
            source = _wrap(source, call, change)
            continue
        named = "shared_library" if change.kind is Kind.SYSTEM else change.attribute
        now = buildfile.string_attr(call, named)
        if change.old is not None and now is not None and now not in _spellings(
                change.old, change.label):
            raise CannotEditError(
                f"{source.name}:{call.lineno}: {change.label} has {named} = "
                f"{buildtext.string(now)}, which is not the file {change.old} itself (a label "
                "of another rule?); change it by hand; nothing changed")
        if change.kind is Kind.SYSTEM:
            source = _made_system_provided(source, name, change.value)
        elif change.kind is Kind.SET:
            source = starlark.set_string(source, call, change.attribute, change.value,
                                         after="shared_library")
        else:
            source = starlark.add_to_list(source, call, change.attribute, change.value)
    return source, refused


def _made_system_provided(source: starlark.Source, name: str, interface: str
                          ) -> starlark.Source:
    """The import ``name`` made a library the system provides: ``interface_library``
    where ``shared_library`` was, then ``system_provided = 1``, and no ``shared_library``
    (Bazel refuses a system-provided import that has one)."""
    def rule(source: starlark.Source) -> ast.Call:
        call = source.rule(name)
        assert call is not None     # found before, and only its attributes change
        return call

    source = starlark.set_string(source, rule(source), "interface_library", interface,
                                 after="shared_library")
    source = starlark.set_int(source, rule(source), "system_provided", 1,
                              after="interface_library")
    return starlark.remove_keyword(source, rule(source), "shared_library")


def _add_rule(source: starlark.Source, call: ast.Call, change: Change
              ) -> starlark.Source:
    """The new rule after ``call`` (once: a rule of that text already there is kept)."""
    if change.value in source.text:
        return source
    source = starlark.add_call_after(source, call, change.value)
    if change.load is not None:
        source = starlark.ensure_load(source, *change.load)
    return source


def _wrap(source: starlark.Source, call: ast.Call, change: Change) -> starlark.Source:
    """The import renamed ``<name>_import``, and a ``cc_library`` of the old name after it
    that links the import and ``change.value``; a later wrap of the same rule adds to that
    library's deps. The library keeps the import's ``visibility``, ``testonly`` and
    ``tags``, written as they were, so whatever could depend on the import still can."""
    name = change.label.rsplit(":", 1)[-1]
    inner = wrapped_name(change.label)
    function = buildfile.function_name(call)
    if function == "cc_library":
        deps = buildfile.keyword(call, "deps")
        items = deps.value.elts if deps is not None and isinstance(deps.value, ast.List) \
            else []
        if f":{inner}" in [getattr(e, "value", None) for e in items]:
            return starlark.add_to_list(source, call, "deps", change.value)
    if function != "cc_import":
        raise CannotEditError(
            f"{source.name}:{call.lineno}: {change.label} is made by `{function}`, not by "
            "cc_import: add the dependency where it is defined; nothing changed")
    if source.rule(inner) is not None:
        raise CannotEditError(
            f"{source.name}: a rule named {buildtext.string(inner)} exists already, so "
            f"{change.label} cannot be renamed to it; nothing changed")
    kept = []
    for attribute in ("visibility", "testonly", "tags"):
        kw = buildfile.keyword(call, attribute)
        if kw is not None:
            span = source.span(kw.value)
            raw = source.data[span.start: span.end].decode("utf-8", "surrogateescape")
            kept.append(f"    {attribute} = {raw},\n")
    text = (f"cc_library(\n"
            f"    name = {buildtext.string(name)},\n"
            f"    deps = [\n"
            f"        {buildtext.string(':' + inner)},\n"
            f"        {buildtext.string(change.value)},\n"
            f"    ],\n" + "".join(kept) + ")")
    source = starlark.set_string(source, call, "name", inner)
    renamed = source.rule(inner)
    assert renamed is not None
    return starlark.add_call_after(source, renamed, text)


def _says_system_provided(call: ast.Call) -> bool:
    """Whether the call sets ``system_provided`` true (``1``, ``True``) as a literal."""
    kw = buildfile.keyword(call, "system_provided")
    return kw is not None and isinstance(kw.value, ast.Constant) \
        and kw.value.value in (1, True)


def _spellings(path: str, label: str) -> set[str]:
    """How a BUILD file may name a file of its own package: ``lib/x.so``, ``:lib/x.so``,
    ``//pkg:lib/x.so`` (``@repo//pkg:...`` too)."""
    package = label.rsplit(":", 1)[0]
    return {path, f":{path}", f"{package}:{path}", f"{package.split('//', 1)[-1]}:{path}",
            f"//{package.split('//', 1)[-1]}:{path}"}


def write(plan_files: Sequence[FileChange], output_base: str | None) -> list[files.Written]:
    """Write every editable file (see :mod:`files`): all of them, or none."""
    todo = [f for f in plan_files if f.editable and f.snapshot is not None]
    edits = []
    for f in todo:
        assert f.snapshot is not None
        edits.append((f.snapshot, f.after.encode("utf-8", "surrogateescape")))
    return files.save(edits, output_base)

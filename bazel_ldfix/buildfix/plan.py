"""What to change for each library a test cannot load, checked, as diffs, then written.

Input is the repair's answer (which tests miss which sonames); the ``cc_import`` behind each
name is read from the test's ``_solib_`` directories (``fixes.solib_imports``). Three cases:

- the test links an import whose file is unversioned: import the file named like its SONAME
  (``shared_library``), or keep the unversioned one as ``interface_library`` beside it;
- the name is needed by another library (``libA.so.11`` needs ``libB.so.13``) and an import
  of the configuration stages it, but the test does not depend on it: a test's RUNPATH does
  not apply to its dependencies' dependencies, but glibc reuses an object already loaded
  under the same SONAME, so the test is made to load it itself (a ``deps`` edge);
- no import stages the name: nothing to edit; ``diagnose`` explains it.
"""

from __future__ import annotations

import contextlib
import difflib
import enum
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.buildfix import staging, starlark
from bazel_ldfix.buildfix.locate import Layout, Place, locate, read_source
from bazel_ldfix.diagnosis import fixes
from bazel_ldfix.errors import BadInputError, CannotEditError
from bazel_ldfix.loader import search as loader


class Shape(enum.Enum):
    VERSIONED = "versioned"     # shared_library = "lib/libX.so.N"
    INTERFACE = "interface"     # interface_library = "lib/libX.so" + the versioned shared_library


class Kind(enum.Enum):
    SET = "set"                 # attribute = "value"
    ADD = "add"                 # "value" added to the list attribute


@dataclass(frozen=True)
class Change:
    """One attribute of one rule."""

    label: str                  # the rule changed: @xsdk//:xdemo, //t:needs_x
    kind: Kind
    attribute: str
    value: str
    why: str                    # for people: which test needs it, and what for
    old: str | None = None      # the file the attribute names now (package-relative)


@dataclass(frozen=True)
class FileChange:
    """The new text of one file, and the changes it carries."""

    place: Place
    path: str                   # the file written (or, for a described place, shown)
    before: str
    after: str
    changes: tuple[Change, ...]

    @property
    def editable(self) -> bool:
        return self.place.layout.editable

    def diff(self, workspace: str) -> str:
        name = _shown(self.path, workspace)
        old, new = (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")
        return "".join(difflib.unified_diff(
            self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
            old, new))


@dataclass(frozen=True)
class Plan:
    files: tuple[FileChange, ...]       # editable first, then the described ones
    described: tuple[tuple[Place, tuple[Change, ...]], ...]     # no file to show a diff of
    problems: tuple[str, ...]           # changes that cannot be made (bad input)
    notes: tuple[str, ...]              # names no import stages: nothing to edit

    @property
    def needed(self) -> bool:
        return bool(self.files or self.described or self.problems)

    @property
    def described_only(self) -> bool:
        """Some change is one it only describes (a rule writes that BUILD file)."""
        return bool(self.described) or any(not f.editable for f in self.files)


@dataclass(frozen=True)
class TestMissing:
    label: str
    executable: str
    missing: tuple[str, ...]


def plan(tests: Sequence[TestMissing], workspace: str, output_base: str | None,
         shape: Shape = Shape.VERSIONED,
         candidates: Callable[[str], Sequence[str]] = lambda s: (),
         library_path: str | None = None) -> Plan:
    """The changes that make every test load what it misses (see the module docstring).

    ``candidates(soname)`` are known copies (the repair's choice), looked at after the
    import's own directory. Each proposed import is checked with the loader model first
    (``_refuse``), and so is each test as Bazel would stage it after the change
    (``staging.missing_after``, with ``library_path`` as the test's LD_LIBRARY_PATH).
    """
    changes: list[Change] = []
    notes: list[str] = []
    problems: list[str] = []
    for test in tests:
        try:
            header = elf.read_elf(test.executable).header
        except BadInputError:
            header = None       # a script: its libraries' class is the host's
        own = fixes.solib_imports(fixes.solib_dirs_of(test.executable))
        staged = {i.staged for i in own}
        other = [i for i in fixes.solib_imports(fixes.every_solib_dir(test.executable))
                 if i.staged not in staged]
        added: list[tuple[str, str]] = []       # what Bazel would stage after the change
        settled: set[str] = set()               # names the model need not find afterwards
        for soname in test.missing:
            imp = next((i for i in own if i.soname == soname and i.file != soname), None)
            if imp is not None:
                found = _import(imp, soname, test.label, header, shape, candidates, problems)
                if found is not None:
                    changes += found[0]
                    added.append((_staged_as(imp, soname), found[1]))
                settled.add(soname)
                continue
            imp = next((i for i in other if i.soname == soname), None)
            settled.add(soname)
            if imp is None:
                if not any(i.soname == soname for i in own):
                    notes.append(f"{test.label}: no cc_import the build stages provides "
                                 f"{soname}; nothing to edit (bazel-ldfix diagnose explains "
                                 "what to add)")
                continue
            if test.label.startswith("@"):
                problems.append(f"{test.label} needs a dependency on {imp.label}, but it is "
                                "in another repository")
                continue
            # The test links the import after the change: its RUNPATH reaches the staged
            # name, and glibc reuses that object for the library that needs it.
            changes.append(Change(test.label, Kind.ADD, "deps", imp.label,
                                  f"{soname} is needed by a library {test.label} links; the "
                                  "test's RUNPATH does not reach a dependency's dependency, "
                                  "so the test loads it itself (glibc reuses it by SONAME)"))
            if imp.file != soname:
                found = _import(imp, soname, test.label, header, shape, candidates, problems)
                if found is not None:
                    changes += found[0]
        if added:
            # What the change stages must then be found, and nothing new may go missing
            # (a dependency edge's name is settled: the edge is not in the staged tree).
            fixed_here = {os.path.basename(a[0]) for a in added}
            left = staging.missing_after(test.executable, added, library_path) or ()
            bad = [n for n in dict.fromkeys(left) if n in fixed_here or n not in settled]
            if bad:
                problems.append(f"{test.label}: the loader model still misses "
                                f"{', '.join(bad)} with the change staged as Bazel would "
                                "stage it")
    return edit_plan(_unique(changes, problems), workspace, output_base, problems, notes)


def _staged_as(imp: fixes.SolibImport, soname: str) -> str:
    """``_solib_<cpu>/<dir>/<soname>``: the import's directory keeps its name."""
    directory = os.path.dirname(imp.staged)
    return "/".join([os.path.basename(os.path.dirname(directory)),
                     os.path.basename(directory), soname])


def _import(imp: fixes.SolibImport, soname: str, test: str, header: elf.ElfHeader | None,
            shape: Shape, candidates: Callable[[str], Sequence[str]],
            problems: list[str]) -> tuple[list[Change], str] | None:
    """Import the file named like the SONAME (the name the loader asks for), if it will do:
    the changes and the file."""
    versioned = fixes.versioned_in_repository(imp, soname, candidates(soname))
    if versioned is None:
        problems.append(f"{imp.label} imports {imp.attribute_value} (SONAME {soname}), but no "
                        f"file named {soname} is in its package: its repository must provide "
                        "one before the import can name it")
        return None
    path = os.path.join(os.path.dirname(imp.target), os.path.basename(versioned))
    reason = _refuse(path, soname, header)
    if reason is not None:
        problems.append(f"{imp.label}: {versioned} will not do: {reason}")
        return None
    why = f"{test} needs {soname}; Bazel stages a file under the name it is imported by"
    out = [Change(imp.label, Kind.SET, "shared_library", versioned, why,
                  imp.attribute_value)]
    if shape is Shape.INTERFACE:
        out.insert(0, Change(imp.label, Kind.SET, "interface_library", imp.attribute_value,
                             "link against the unversioned file, as before"))
    return out, path


def _refuse(path: str, soname: str, header: elf.ElfHeader | None) -> str | None:
    """Why the loader model would not take ``path`` for ``soname`` (None: it would).

    The staged name is the file's name; the loader opens it by the name DT_NEEDED gives,
    which is the SONAME, then checks it as ``open_verify`` does.
    """
    try:
        info = elf.read_elf(path)
    except BadInputError as exc:
        return str(exc)
    if info.soname != soname:
        return f"its SONAME is {info.soname or 'not set'}, not {soname}"
    if header is not None:
        verdict = loader.verify(path, header)
        if not verdict.accepted:
            return verdict.reason or "the loader would not take it"
    return None


def _unique(changes: Sequence[Change], problems: list[str]) -> list[Change]:
    """Drop repeats; two different values for one attribute of one rule are a conflict."""
    out: dict[tuple[str, str, str], Change] = {}
    for change in changes:
        key = (change.label, change.attribute,
               change.value if change.kind is Kind.ADD else "")
        seen = out.get(key)
        if seen is None:
            out[key] = change
        elif seen.value != change.value:
            problems.append(f"conflicting fixes for {change.label}: {change.attribute} = "
                            f"{starlark.quote(seen.value)} ({seen.why}) and "
                            f"{starlark.quote(change.value)} ({change.why})")
    return list(out.values())


def edit_plan(changes: Sequence[Change], workspace: str, output_base: str | None,
           problems: list[str], notes: list[str]) -> Plan:
    by_place: dict[Place, list[Change]] = {}
    for change in changes:
        repository, _, rest = change.label.lstrip("@").partition("//")
        package = rest.split(":", 1)[0]
        try:
            place = locate(repository, package, workspace, output_base)
        except CannotEditError as exc:
            problems.append(str(exc))
            continue
        by_place.setdefault(place, []).append(change)
    # Two packages of one file (a build_file shared by two repositories) edit it in turn.
    files: dict[str, FileChange] = {}
    described: list[tuple[Place, tuple[Change, ...]]] = []
    for place, group in by_place.items():
        path = place.file if place.layout.editable else place.generated
        if path is None:
            described.append((place, tuple(group)))
            continue
        try:
            if place.layout.editable:
                _writable(path, output_base)
            previous = files.get(path)
            before = previous.after if previous else _read(path)
            after = _edit(before, place, group, path, workspace)
        except CannotEditError as exc:
            problems.append(str(exc))
            continue
        if after == before:
            continue
        files[path] = FileChange(place, path, previous.before if previous else before, after,
                                 (previous.changes if previous else ()) + tuple(group))
    ordered = sorted(files.values(), key=lambda f: (not f.editable, f.path))
    return Plan(tuple(ordered), tuple(described), tuple(dict.fromkeys(problems)),
                tuple(dict.fromkeys(notes)))


def _edit(text: str, place: Place, changes: Sequence[Change], path: str,
          workspace: str) -> str:
    name = _shown(path, workspace)
    if place.layout is not Layout.BUILD_FILE_CONTENT:
        return _edit_build(starlark.Source.parse(text, name), changes).text
    ws = starlark.Source.parse(text, name)
    call = ws.rule(place.name_in_file)
    assert call is not None     # locate found it in this very file
    kw = starlark.keyword(call, "build_file_content")
    assert kw is not None
    body = starlark.string_literal_body(ws, kw.value)
    value = starlark.string_attr(call, "build_file_content")
    if body is None or value is None:
        raise CannotEditError(f"{name}:{kw.value.lineno}: build_file_content of "
                              f"@{place.repository} is not one string literal; nothing "
                              "changed")
    inner = starlark.Source.parse(value, f"build_file_content of @{place.repository} "
                                         f"({name} line {kw.value.lineno})")
    new_value = _edit_build(inner, changes).text
    span, _mark = body
    raw = ws.data[span.start: span.end].decode("utf-8", "surrogateescape")
    if raw == value and "\\" not in new_value:
        # Written as it reads (a triple-quoted string, say): edit in place, if that holds.
        candidate = ws.replace(span, new_value)
        again = candidate.rule(place.name_in_file)
        if again is not None and starlark.string_attr(
                again, "build_file_content") == new_value:
            return candidate.text
    whole = ws.replace(ws.span(kw.value), starlark.quote(new_value))
    return whole.text


def _edit_build(source: starlark.Source, changes: Sequence[Change]) -> starlark.Source:
    for change in changes:
        name = change.label.rsplit(":", 1)[-1]
        call = source.rule(name)
        if call is None:
            raise CannotEditError(
                f"{source.name}: no call with name = {starlark.quote(name)} at the top level "
                f"(is {change.label} made by a macro or a loop?); nothing changed")
        function = starlark.function_name(call)
        if change.attribute in ("shared_library", "interface_library") \
                and function != "cc_import":
            raise CannotEditError(
                f"{source.name}:{call.lineno}: {change.label} is made by the macro "
                f"`{function}`, not by cc_import: change what the macro passes on; nothing "
                "changed")
        now = starlark.string_attr(call, change.attribute)
        if change.old is not None and now is not None and now not in _spellings(
                change.old, change.label):
            raise CannotEditError(
                f"{source.name}:{call.lineno}: {change.label} has {change.attribute} = "
                f"{starlark.quote(now)}, which is not the file {change.old} itself (a label "
                "of another rule?); change it by hand; nothing changed")
        if change.kind is Kind.SET:
            source = starlark.set_string(source, call, change.attribute, change.value,
                                         after="shared_library")
        else:
            source = starlark.add_to_list(source, call, change.attribute, change.value)
    return source


def _spellings(path: str, label: str) -> set[str]:
    """How a BUILD file may name a file of its own package: ``lib/x.so``, ``:lib/x.so``,
    ``//pkg:lib/x.so`` (``@repo//pkg:...`` too)."""
    package = label.rsplit(":", 1)[0]
    return {path, f":{path}", f"{package}:{path}", f"{package.split('//', 1)[-1]}:{path}",
            f"//{package.split('//', 1)[-1]}:{path}"}


def _read(path: str) -> str:
    return read_source(path).text


def _writable(path: str, output_base: str | None) -> None:
    real = os.path.realpath(path)
    if output_base:
        base = os.path.realpath(output_base)
        if real == base or real.startswith(base + os.sep):
            raise CannotEditError(f"{path} is under the output_base ({output_base}), which "
                                  "Bazel rewrites; nothing changed")
    if not os.path.isfile(real):
        raise CannotEditError(f"{path} does not exist; nothing changed")
    # The mode bits as well as access(2): root may write anything, but a file made
    # read-only says it is not to be edited.
    if not os.access(real, os.W_OK) or not os.stat(real).st_mode & 0o222 \
            or not os.access(os.path.dirname(real), os.W_OK):
        raise CannotEditError(f"{path} is read-only (the file or its directory); nothing "
                              "changed")


def _shown(path: str, workspace: str) -> str:
    rel = os.path.relpath(path, workspace)
    return path if rel.startswith("..") else rel


# -- writing --------------------------------------------------------------------------------

def write(files: Sequence[FileChange], output_base: str | None) -> list[str]:
    """Write every editable file, each through a temporary file and a rename.

    Every file is checked first (still as read, still writable, not under output_base);
    if one rename fails, the files already replaced get their old text back.
    """
    todo = [f for f in files if f.editable]
    for f in todo:
        _writable(f.path, output_base)
        if _read(f.path) != f.before:
            raise CannotEditError(f"{f.path} changed since it was read; nothing written")
    done: list[FileChange] = []
    try:
        for f in todo:
            _replace(os.path.realpath(f.path), f.after)
            done.append(f)
    except OSError as exc:
        for f in done:
            _replace(os.path.realpath(f.path), f.before)
        raise CannotEditError(f"cannot write {exc.filename}: {exc.strerror}; nothing "
                              "changed") from None
    return [f.path for f in done]


def _replace(path: str, text: str) -> None:
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".bazel-ldfix-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8", "surrogateescape"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def to_text(result: Plan, workspace: str) -> str:
    """Diffs of the files it edits, then what it only describes, then the notes."""
    out: list[str] = []
    for f in result.files:
        if not f.editable:
            out.append(f"# not edited: {f.place.describe(workspace)}.\n"
                       f"# The change it needs, shown on the file the rule wrote:")
        out.append(f.diff(workspace).rstrip("\n"))
    for place, changes in result.described:
        out.append(f"# not edited: {place.describe(workspace)}. The change it needs:")
        out += [f"#   {c.label}: {_change_words(c)}" for c in changes]
    out += [f"# cannot fix: {p}" for p in result.problems]
    out += [f"# note: {n}" for n in result.notes]
    return "\n".join(out)


def _change_words(change: Change) -> str:
    if change.kind is Kind.SET:
        return f"{change.attribute} = {starlark.quote(change.value)}"
    return f"add {starlark.quote(change.value)} to {change.attribute}"

"""What to change for each library a test cannot load, checked before it is proposed.

Input is the repair's answer (which tests miss which sonames, and what needs them); the
``cc_import`` behind each name is read from the test's ``_solib_`` directories
(``declaredinputs.imports_of``, which leaves out what earlier builds left there). The cases:

- the test links an import whose file is unversioned: import the file named like its SONAME
  (``shared_library``), or keep the unversioned one as ``interface_library`` beside it;
- no file is named like the SONAME (``libfoo-3.17.0.so`` whose SONAME is ``libfoo.so.3``):
  a rule beside the import makes one (skylib's ``copy_file``, else a ``genrule``), and the
  # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
  import imports it. A SONAME that names no shared object (TensorRT's builder resource
  says ``do_not_link_against_...``) is never made a file: that library is not to be linked;
- the name is needed by another library (``libA.so.11`` needs ``libB.so.13``) and an import
  of the configuration stages it, but nothing the test links depends on it: a RUNPATH does
  not apply to its object's dependencies' dependencies, but glibc reuses an object already
  loaded under the same SONAME, so what links the library that needs the name is made to
  load it too (a ``deps`` edge). The edge goes into the BUILD file of every prebuilt
  library that needs the name, the test's or not (a diamond: ``libA`` and ``libC`` both
  need ``libB``), in the order of their labels; where none of the test's can carry it,
  on the C/C++ target that links what needs it (``hermetic.carrier`` says which);
- no import stages the name: nothing to edit; ``diagnose`` explains it;
- the name is the CUDA driver's (``libcuda.so.1``): the system provides it, so the import
  links against the toolkit's stub and stages nothing (``driver.decide``); it never
  imports a stub or a compat driver the host cannot use, and says when this host has no
  driver. A test whose import stages a stub under the driver's name is planned too.
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from bazel_ldfix import elf
from bazel_ldfix.bazel import buildtext, declaredinputs, solib
from bazel_ldfix.bazel.repocall import RepositoryCall
from bazel_ldfix.buildfix import driver, providers, staging, unfetched
from bazel_ldfix.buildfix.change import Change, Kind, Plan
from bazel_ldfix.buildfix.definitions import locate
from bazel_ldfix.buildfix.edit import edit_plan
from bazel_ldfix.diagnosis import fixes, hermetic
from bazel_ldfix.errors import BadInputError, CannotEditError
from bazel_ldfix.loader.cuda import DRIVER_SONAMES, NO_HOST_DRIVER, HostDriver
from bazel_ldfix.loader.verify import verify


class Shape(enum.Enum):
    VERSIONED = "versioned"     # shared_library = "lib/libX.so.N"
    INTERFACE = "interface"     # interface_library = "lib/libX.so" + the versioned shared_library


@dataclass(frozen=True)
class TestMissing:
    label: str
    executable: str
    missing: tuple[str, ...]
    # soname -> the files that need it (the repair's model); used to find the C/C++
    # target that links what needs a name the test's own imports do not stage.
    needed_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The programs of its runfiles the test starts (a cc_binary in its data), where
    # Bazel built them: each is checked as Bazel would stage it, as the test's own
    # executable is, by what the test's runfiles manifest declares.
    programs: tuple[str, ...] = ()

    @property
    def executables(self) -> tuple[str, ...]:
        """Every file the test runs as a program: its own, then those of its runfiles."""
        return (self.executable, *self.programs)


def plan_fix(tests: Sequence[TestMissing], workspace: str, output_base: str | None,
         shape: Shape = Shape.VERSIONED,
         candidates: Callable[[str], Sequence[str]] = lambda s: (),
         library_path: str | None = None, *, skylib: bool = False,
         cuda: HostDriver = NO_HOST_DRIVER,
         fetch: Callable[[str], unfetched.Found] | None = None,
         ask: Callable[[str], RepositoryCall | None] | None = None) -> Plan:
    """The changes that make every test load what it misses (see the module docstring).

    ``candidates(soname)`` are known copies (the repair's choice), looked at after the
    import's own directory. Each proposed import is checked with the loader model first
    (``_refuse``), and so is each test as Bazel would stage it after the change
    (``staging.missing_after``, with ``library_path`` as the test's LD_LIBRARY_PATH).
    ``skylib``: the workspace can load ``@bazel_skylib`` (else a copy is a ``genrule``).
    ``cuda``: the host's NVIDIA driver, for the CUDA rules (``driver``).
    ``fetch(soname)``: what the repositories WORKSPACE declares and Bazel has not fetched
    say of a name no import provides (:class:`unfetched.Fetcher`). ``ask(name)``: where
    Bazel says a macro makes a repository no call in WORKSPACE names (for its words).

    The plan covers the whole closure: each library a change gives the test is read in
    turn, and what it needs that nothing else gives is planned too, through every level.
    """
    changes: list[Change] = []
    notes: list[str] = []
    problems: list[str] = []
    unprovided: list[str] = []
    later: list[str] = []       # in a repository not fetched yet, maybe
    editable: dict[tuple[str, str], bool] = {}
    sdk = _Consumers()
    # One test after another, by label: the plan is the same whatever order Bazel
    # reported them in.
    for test in sorted(tests, key=lambda t: t.label):
        header = _header(test)
        # What an earlier build left in bazel-out is no import of this build's.
        imports = declaredinputs.imports_of(test.executable)
        own, other = list(imports.own), list(imports.other)
        added: list[tuple[str, str]] = []       # what Bazel would stage after the change
        settled: set[str] = set()               # names the model need not find afterwards
        versioned: set[str] = set()             # names whose import was planned already
        done: set[tuple[str, str | None]] = set()
        # (name, the import whose library needs it (None: read from the repair's answer),
        # whether the test loads what needs it; else only another library of the SDK does)
        pending: list[tuple[str, solib.SolibImport | None, bool]] = [
            (n, None, True) for n in test.missing]
        pending += [(i.file, None, True) for i in driver.staged_unusable(own, cuda)]
        known: list[solib.SolibImport] = list(own) + list(other)
        while pending:
            soname, needer, mine = pending.pop(0)
            key = (soname, None if needer is None else needer.label)
            if key in done:
                continue
            done.add(key)
            settled.add(soname)
            if soname in DRIVER_SONAMES:
                decided = driver.decide(soname, test.label, test.executable,
                                        next((i for i in own if i.soname == soname), None),
                                        cuda, soname in test.missing, candidates(soname))
                changes += [decided.change] if decided.change else []
                problems += [decided.problem] if decided.problem else []
                unprovided += [decided.unprovided] if decided.unprovided else []
                continue
            imp = next((i for i in own if i.soname == soname), None)
            if imp is not None:
                # The test links it: its file named like the SONAME, then, where a library
                # needs it too, the edge from each library of the SDK that needs it.
                if imp.file != soname and soname not in versioned:
                    versioned.add(soname)
                    found = _import(imp, soname, test.label, header, shape, candidates,
                                    problems, skylib, cuda)
                    if found is not None:
                        changes += found[0]
                        added.append((_staged_as(imp, soname), found[1]))
                        pending += [(n, imp, True) for n in sdk.unmet(found[1])]
                if needer is not None:
                    for consumer, change in sdk.edges(soname, imp, known, output_base,
                                                      workspace, editable):
                        changes.append(change)
                        pending += _versioned(consumer, own, header, shape, candidates,
                                              skylib, changes, notes, sdk)
                continue
            if needer is None:
                needer = _needer(soname, test, known)
            imp = next((i for i in other if i.soname == soname), None) or \
                providers.declared_import(soname, _copies(soname, needer, candidates),
                                          output_base)
            found_later = None
            if imp is None and fetch is not None:
                found_later = fetch(soname)
                imp = providers.declared_import(soname, found_later.copies, output_base)
            if imp is None:
                what = f"{needer.label}'s library" if needer else "what the test loads"
                if not mine:
                    notes.append(f"{needer.shown_label if needer else test.label} needs "
                                 f"{soname}, and no cc_import provides it")
                elif found_later is not None and found_later.unfetched:
                    later.append(_not_fetched(test.label, soname, what, found_later))
                else:
                    unprovided.append(
                        f"{test.label} needs {soname} ({what} needs it), and no cc_import "
                        "of the build or of a fetched repository provides it: no BUILD "
                        "change can give it (bazel-ldfix diagnose explains what to add)")
                continue
            known.append(imp)
            # Every library of the SDK that needs it gets the edge, in its own BUILD file.
            edges = sdk.edges(soname, imp, known, output_base, workspace, editable)
            for consumer, change in edges:
                changes.append(change)
                pending += _versioned(consumer, own, header, shape, candidates, skylib,
                                      changes, notes, sdk)
            if mine and (needer is None or needer.label not in {c.label for c, _ in edges}):
                # No BUILD file of the library that needs it can carry it: the C/C++
                # target of the test that links that library does.
                edge = _edge(imp, soname, needer, test, output_base, workspace, editable)
                if edge is None:
                    problems.append(f"{test.label} needs {soname}, which {imp.label} "
                                    "provides, but no rule in an editable file can link it")
                    continue
                changes.append(edge)
            library = imp.target
            if imp.file != soname and soname not in versioned:
                versioned.add(soname)
                found = _import(imp, soname, test.label, header, shape, candidates,
                                problems if mine else notes, skylib, cuda)
                if found is None:
                    continue
                changes += found[0]
                library = found[1]
            elif imp.file != soname:
                continue
            pending += [(n, imp, mine) for n in sdk.unmet(library)]
        if added:
            # What the change stages must then be found, and nothing new may go missing
            # (a dependency edge's name is settled: the edge is not in the staged tree).
            fixed_here = {os.path.basename(a[0]) for a in added}
            for program in test.executables:
                left = staging.missing_after(program, added, library_path,
                                             declarer=test.executable) or ()
                bad = [n for n in dict.fromkeys(left) if n in fixed_here or n not in settled]
                if bad:
                    whose = "" if program == test.executable else \
                        f" (for {os.path.basename(program)}, which it runs)"
                    problems.append(f"{test.label}: the loader model still misses "
                                    f"{', '.join(bad)}{whose} with the change staged as "
                                    "Bazel would stage it")
    return edit_plan(_unique(changes, problems), workspace, output_base, problems, notes,
                     unprovided, later, ask)


def _not_fetched(label: str, soname: str, what: str, found: unfetched.Found) -> str:
    """A name that a repository not fetched yet may provide, with the command that
    fetches it, in words."""
    names = ", ".join(f"@{n}" for n in found.unfetched)
    failed = f" (fetching failed: {'; '.join(found.failed)})" if found.failed else ""
    return (f"{label} needs {soname} ({what} needs it); no cc_import of the build or of a "
            f"fetched repository provides it, and WORKSPACE declares {names}, not fetched "
            f"yet{failed}: `{found.command}` fetches "
            + ("it" if len(found.unfetched) == 1 else "them") + ", then run fix again")


def _header(test: TestMissing) -> elf.ElfHeader | None:
    """The class and machine of what the test runs: its executable's, else (a script)
    its first program's; None: a script that starts no ELF program (its libraries' class
    is the host's)."""
    for path in test.executables:
        try:
            return elf.read_elf(path).header
        except BadInputError:
            continue
    return None


class _Consumers:
    """The libraries of the SDK that need a name: each gets the dependency edge in its own
    BUILD file, so that every target that links one of them loads what it needs, not only
    the tests of this run (a diamond: ``liba.so.1`` and ``libb.so.1`` both need
    ``libcommon.so.2``). What one file needs, and one package holds, is read once per
    plan."""

    def __init__(self) -> None:
        self._unmet: dict[str, tuple[str, ...]] = {}
        self._needed: dict[str, tuple[str, ...]] = {}
        self._packages: dict[tuple[str, str], providers.Package] = {}

    def unmet(self, library: str) -> tuple[str, ...]:
        """:func:`_unmet`, once per file."""
        found = self._unmet.get(library)
        if found is None:
            found = self._unmet[library] = _unmet(library)
        return found

    def needs(self, imp: solib.SolibImport, soname: str) -> bool:
        """Whether ``imp``'s library needs ``soname`` and finds it nowhere by itself."""
        library = _library_of(imp)
        needed = self._needed.get(library)
        if needed is None:
            try:
                needed = elf.read_elf(library).needed
            except BadInputError:
                needed = ()
            self._needed[library] = needed
        return soname in needed and soname in self.unmet(library)

    def package(self, imp: solib.SolibImport) -> providers.Package:
        key = (imp.repository, imp.package)
        found = self._packages.get(key)
        if found is None:
            found = self._packages[key] = providers.package_of(imp)
        return found

    def of(self, soname: str, provider: solib.SolibImport,
           known: Sequence[solib.SolibImport]) -> list[solib.SolibImport]:
        """Every ``cc_import`` whose library needs ``soname`` and finds it nowhere by
        itself, by label: of the packages of the build's imports (``known``), those the
        build links and those no test of this run links yet. Only an import its BUILD file
        declares with a file of its own is one (not a library Bazel built, nor one a macro
        makes): that is what an edge can wrap."""
        out: dict[str, solib.SolibImport] = {}
        for imp in known:
            for declared_here in self.package(imp).imports:
                out.setdefault(declared_here.label, declared_here)
        return sorted((i for label, i in out.items()
                       if label != provider.label and self.needs(i, soname)),
                      key=lambda i: i.label)

    def edges(self, soname: str, provider: solib.SolibImport,
              known: Sequence[solib.SolibImport], output_base: str | None, workspace: str,
              editable: dict[tuple[str, str], bool]
              ) -> list[tuple[solib.SolibImport, Change]]:
        """The edge to ``provider`` in the BUILD file of each library that needs
        ``soname`` (:meth:`of`) and that ``fix`` can edit, in the order of their labels.
        An import an earlier ``fix`` wrapped gets it in its wrapper, unless the wrapper
        has it already."""
        out = []
        for consumer in self.of(soname, provider, known):
            if not _editable(consumer, output_base, workspace, editable):
                continue
            label = consumer.label
            wrapper = self.package(consumer).wrappers.get(consumer.name)
            value = _relative(provider.label, label)
            if wrapper is not None:
                if value in wrapper[1]:
                    continue
                label = f"{label.rsplit(':', 1)[0]}:{wrapper[0]}"
            why = (f"{consumer.soname or consumer.file} needs {soname}, and has no RUNPATH "
                   f"that reaches it: whatever links {consumer.shown_label} must load "
                   f"{provider.label} too")
            out.append((consumer, Change(label, Kind.WRAP, "deps", value, why)))
        return out


def _library_of(imp: solib.SolibImport) -> str:
    """The file an import's library is read from: the one named like its SONAME beside
    the imported file when there is one (what a versioned import will stage)."""
    versioned = os.path.join(os.path.dirname(imp.target), imp.soname or imp.file)
    return versioned if os.path.isfile(versioned) else imp.target


def _versioned(consumer: solib.SolibImport, own: Sequence[solib.SolibImport],
               header: elf.ElfHeader | None, shape: Shape,
               candidates: Callable[[str], Sequence[str]], skylib: bool,
               changes: list[Change], notes: list[str], sdk: _Consumers
               ) -> list[tuple[str, solib.SolibImport, bool]]:
    """What else a library that gets an edge needs, to be planned in turn. One that the
    test does not link imports, from now on, the file named like its SONAME, as the
    test's own do, so that a test of it alone loads it; where that cannot be done safely,
    it is left as it is, with a note."""
    mine = any(i.label == consumer.label for i in own)
    if mine or not consumer.soname or consumer.file == consumer.soname:
        return [(n, consumer, mine) for n in sdk.unmet(_library_of(consumer))]
    refused: list[str] = []
    found = _import(consumer, consumer.soname, f"whatever links {consumer.shown_label}",
                    header, shape, candidates, refused, skylib)
    if found is None:
        notes += refused
        return []
    changes += found[0]
    return [(n, consumer, False) for n in sdk.unmet(found[1])]


def _unmet(library: str) -> tuple[str, ...]:
    """What ``library`` needs that the loader model finds nowhere for it alone: not through
    its own RPATH or RUNPATH, the cache or the system directories (no LD_LIBRARY_PATH)."""
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    from bazel_ldfix.loader.closure import Options, resolve_file

    try:
        return resolve_file(library, Options()).missing
    except BadInputError:
        return ()


def _needer(soname: str, test: TestMissing, known: Sequence[solib.SolibImport]
            ) -> solib.SolibImport | None:
    """The prebuilt import whose library needs ``soname``: one the repair names, else the
    first of ``known`` whose library lists it in DT_NEEDED; None when only the test's own
    program, or a library Bazel built, needs it."""
    by_file = {os.path.realpath(i.target): i for i in known}
    for path in test.needed_by.get(soname, ()):
        found = by_file.get(os.path.realpath(path))
        if found is not None:
            return found
    for imp in known:
        versioned = os.path.join(os.path.dirname(imp.target), imp.soname or imp.file)
        try:
            needed = elf.read_elf(versioned if os.path.isfile(versioned)
                                  else imp.target).needed
        except BadInputError:
            continue
        if soname in needed:
            return imp
    return None


def _copies(soname: str, needer: solib.SolibImport | None,
            candidates: Callable[[str], Sequence[str]]) -> list[str]:
    """Where a file named ``soname`` may be: beside the library that needs it (an SDK ships
    its libraries together), then the repair's choice."""
    out = []
    if needer is not None:
        beside = os.path.join(os.path.dirname(needer.target), soname)
        if os.path.isfile(beside):
            out.append(beside)
    return out + [c for c in candidates(soname) if c not in out]


def _edge(imp: solib.SolibImport, soname: str, needer: solib.SolibImport | None,
          test: TestMissing, output_base: str | None, workspace: str,
          editable: dict[tuple[str, str], bool]) -> Change | None:
    """The dependency that makes ``imp`` load wherever it is needed.

    Where a prebuilt library needs it and that import's BUILD file can be edited, the
    edge goes there (a wrap: every target that links the library gets what it needs, not
    only the tests selected). Else the C/C++ target that links what needs it carries it
    (``hermetic.carrier``): glibc reuses an object already loaded under the same SONAME.
    """
    if needer is not None and _editable(needer, output_base, workspace, editable):
        why = (f"{needer.soname or needer.file} needs {soname}, and has no RUNPATH that "
               f"reaches it: whatever links {needer.shown_label} must load {imp.label} too")
        return Change(needer.label, Kind.WRAP, "deps", _relative(imp.label, needer.label),
                      why)
    carrier = hermetic.carrier(test.label, test.executable, test.needed_by, output_base,
                               soname, test.programs)
    target = carrier.label or test.label
    if target.startswith("@"):
        return None
    why = (f"{soname} is needed by a library {test.label} loads; a RUNPATH does not "
           "reach a dependency's dependency, so "
           + (f"{target} ({carrier.why}) " if carrier.why else "the test ")
           + "loads it itself (glibc reuses it by SONAME)")
    return Change(target, Kind.ADD, "deps", imp.label, why)


def _editable(imp: solib.SolibImport, output_base: str | None, workspace: str,
              seen: dict[tuple[str, str], bool]) -> bool:
    key = (imp.repository, imp.package)
    if key not in seen:
        try:
            seen[key] = locate(imp.repository, imp.package, workspace,
                               output_base).layout.editable
        except CannotEditError:
            seen[key] = False
    return seen[key]


def _relative(label: str, at: str) -> str:
    """``label`` as a BUILD file of ``at``'s package writes it (``@//x:y`` for the main
    repository's ``//x:y`` from inside another repository)."""
    repository, _, rest = label.partition("//")
    here, _, there = at.partition("//")
    if repository != here:
        return label if repository else "@" + label
    package, _, name = rest.partition(":")
    return ":" + name if package == there.partition(":")[0] else "//" + rest


def _staged_as(imp: solib.SolibImport, soname: str) -> str:
    """``_solib_<cpu>/<dir>/<soname>``: the import's directory keeps its name."""
    directory = os.path.dirname(imp.staged)
    return "/".join([os.path.basename(os.path.dirname(directory)),
                     os.path.basename(directory), soname])


# A SONAME that names no shared object: a library that says it is not to be linked
# (TensorRT's builder resources: do_not_link_against_nvinfer_builder_resource).
_LIBRARY_NAME = re.compile(r"^[^/]+\.so(\.[0-9A-Za-z_-]+)*$")


def _import(imp: solib.SolibImport, soname: str, test: str, header: elf.ElfHeader | None,
            shape: Shape, candidates: Callable[[str], Sequence[str]],
            problems: list[str], skylib: bool, cuda: HostDriver = NO_HOST_DRIVER
            ) -> tuple[list[Change], str] | None:
    """Import the file named like the SONAME (the name the loader asks for), if it will do,
    or a copy made under that name: the changes and the file the staged name leads to."""
    if not _LIBRARY_NAME.match(soname) or soname.startswith("do_not_link_against"):
        problems.append(f"{imp.label} imports {imp.attribute_value}, whose SONAME "
                        f"{soname} names no shared object: that library is not to be "
                        f"linked (it is opened by its file name); take it out of what "
                        f"{test} links (give it as data)")
        return None
    versioned = fixes.versioned_in_repository(imp, soname, candidates(soname))
    if versioned is None:
        return _copied(imp, soname, test, header, problems, skylib, cuda)
    path = os.path.join(os.path.dirname(imp.target), os.path.basename(versioned))
    reason = _refuse(path, soname, header, cuda)
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


def _copied(imp: solib.SolibImport, soname: str, test: str, header: elf.ElfHeader | None,
            problems: list[str], skylib: bool, cuda: HostDriver = NO_HOST_DRIVER
            ) -> tuple[list[Change], str] | None:
    """No file is named like the SONAME: a rule makes one from the imported file, and the
    # Here: at the top, CPU ms before Bazel starts: fix +123 (benchmarks/START.md).
    import imports it (its ``shared_library`` then names the rule's output)."""
    reason = _refuse(imp.target, soname, header, cuda)
    directory = os.path.dirname(imp.attribute_value)
    out = os.path.join(directory, soname) if directory else soname
    beside = os.path.join(os.path.dirname(imp.target), soname)
    if reason is None and os.path.lexists(beside):
        reason = f"{beside} exists but is no file the loader would take"
    if reason is not None:
        problems.append(f"{imp.label} imports {imp.attribute_value} (SONAME {soname}), and "
                        f"no file named {soname} is in its package; a copy of it will not "
                        f"do: {reason}")
        return None
    name = re.sub(r"[^A-Za-z0-9_]", "_", f"{imp.name}_{soname}")
    if skylib:
        text = (f"copy_file(\n"
                f"    name = {buildtext.string(name)},\n"
                f"    src = {buildtext.string(imp.attribute_value)},\n"
                f"    out = {buildtext.string(out)},\n"
                f"    allow_symlink = True,\n"
                f")")
        function, load = "copy_file", ("@bazel_skylib//rules:copy_file.bzl", "copy_file")
    else:
        text = (f"genrule(\n"
                f"    name = {buildtext.string(name)},\n"
                f"    srcs = [{buildtext.string(imp.attribute_value)}],\n"
                f"    outs = [{buildtext.string(out)}],\n"
                f"    cmd = \"cp -f $< $@\",\n"
                f")")
        function, load = "genrule", None
    why = (f"{test} needs {soname}, the SONAME of {imp.attribute_value}, and no file is "
           "named so; Bazel stages a file under the name it is imported by, so a rule "
           "makes that file")
    changes = [Change(imp.label, Kind.RULE, function, text, why, load=load),
               Change(imp.label, Kind.SET, "shared_library", out, why, imp.attribute_value)]
    return changes, imp.target


def _refuse(path: str, soname: str, header: elf.ElfHeader | None,
            cuda: HostDriver = NO_HOST_DRIVER) -> str | None:
    """Why the loader model would not take ``path`` for ``soname`` (None: it would), or
    why a test could not use it: a CUDA stub, or a compat driver this host (``cuda``)
    cannot use (``driver.refuse``).

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
        verdict = verify(path, header)
        if not verdict.accepted:
            return verdict.reason or "the loader would not take it"
    return driver.refuse(path, cuda)


def _unique(changes: Sequence[Change], problems: list[str]) -> list[Change]:
    """Drop repeats; two different values for one attribute of one rule are a conflict.
    The rest by label, and the edges of one rule by what they add: one text, whatever
    order the tests and libraries were met in."""
    out: dict[tuple[str, str, str], Change] = {}
    for change in changes:
        key = (change.label, change.attribute,
               change.value if change.kind in (Kind.ADD, Kind.RULE, Kind.WRAP) else "")
        seen = out.get(key)
        if seen is None:
            out[key] = change
        elif seen.value != change.value:
            problems.append(f"conflicting fixes for {change.label}: {change.attribute} = "
                            f"{buildtext.string(seen.value)} ({seen.why}) and "
                            f"{buildtext.string(change.value)} ({change.why})")
    return sorted(out.values(), key=lambda c: (
        c.label, c.kind is Kind.WRAP, c.value if c.kind in (Kind.ADD, Kind.WRAP) else ""))

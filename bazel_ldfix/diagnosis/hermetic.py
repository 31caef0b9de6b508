"""The hermetic fix of a failure: which ``cc_import`` to change, or add, and where.

Bazel stages a ``cc_import``'s file under its own name in ``_solib_*``; the loader asks for
the SONAME. The fix names the target that stages the library (read from the ``_solib_*``
directories, decoded labels said to be decoded) and the target whose ``deps`` can carry it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from bazel_ldfix import elf
from bazel_ldfix.bazel import runfiles, solib
from bazel_ldfix.bazel.solib import SolibImport
from bazel_ldfix.diagnosis import fixes
from bazel_ldfix.diagnosis.testfacts import TestContext, same_file, versions
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.outputbase import index


def build_fix(test: TestContext, soname: str, found: Sequence[str],
              version: str | None = None) -> str | None:
    """The hermetic fix: which cc_import to change (or add), and how.

    For a version error, only a file that defines the version will do.
    """
    def usable(path: str) -> bool:
        return version is None or version in versions(path)

    for imp in (i for i in test.imports if i.soname == soname):
        if imp.file == soname:
            if usable(imp.staged):
                return None     # staged under the right name already (see the notes)
            return _verified(imp, (
                f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) stages a "
                f"{soname} that does not define {version}. Import a newer one"
                + (f", such as {found[0]}" if found else "") + ".\n"))
        versioned = fixes.versioned_in_repository(imp, soname, found, usable)
        if versioned is not None:
            return _verified(imp, fixes.import_versioned(imp, soname, versioned))
        return _verified(imp, (
            f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) imports "
            f"{imp.attribute_value}, whose SONAME is {soname}, and Bazel stages only "
            f"{imp.file}; but no usable file named {soname} is in that package. The "
            f"repository must provide one (a symlink {soname} -> {imp.file} made by its "
            "repository rule, or a copy_file/genrule) for the cc_import to import as "
            "shared_library.\n"))
    carrier = _carrier(test, soname)
    for imp in (i for i in test.other_imports if i.soname == soname):
        text = fixes.add_dependency(imp, carrier.label, carrier.why)
        if imp.file != soname:
            versioned = fixes.versioned_in_repository(imp, soname, found, usable)
            if versioned is None:
                continue
            text = fixes.import_versioned(imp, soname, versioned) + "\n" + text
        elif not usable(imp.staged):
            continue
        return _verified(imp, text)
    if found:
        return fixes.new_import(soname, found[0], test.output_base, carrier.label,
                                carrier.why)
    return None


def _carrier(test: TestContext, soname: str) -> fixes.Carrier:
    return carrier(test.label, test.executable,
                   {name: m.needed_by for name, m in test.missing.items()},
                   test.output_base, soname)


def carrier(label: str | None, executable: str | None,
            needed_by: Mapping[str, Sequence[str]], output_base: str | None,
            soname: str, programs: Sequence[str] = ()) -> fixes.Carrier:
    """The target whose deps can carry a dependency on ``soname``'s import.

    Bazel stages a cc_import's library for the C/C++ target that depends on it; a
    py_test or sh_test takes no cc_import in its deps. So the dependency goes on the
    target that links the object needing ``soname``: the test itself when its executable
    needs it, else the C/C++ target that built that object (read from where Bazel put
    it), going up through prebuilt libraries (``libvendor.so.3`` needs
    ``libvendor_core.so.3``: whatever links ``libvendor.so.3`` carries both).
    ``needed_by`` maps each name the test misses to the files that need it (those of
    other tests are left out: only the test's objects count, its executable and the
    shared objects its runfiles manifest stages, and the ``programs`` of its runfiles it
    starts); who needs a prebuilt library that was found is read from those objects'
    DT_NEEDED. A program Bazel built (a ``cc_binary`` in the test's ``data``) carries what
    it needs itself. A test with no such target gets the test's own label (which ``fix``
    then writes only on a C/C++ rule).
    """
    seen: set[str] = set()
    wanted = [soname]
    listed = _objects(executable)
    objects = listed or []
    if listed is not None:
        objects += [real for real in map(os.path.realpath, programs) if real not in objects]
    mine = set(objects)         # empty: no manifest to tell this test's files by
    while wanted:
        name = wanted.pop(0)
        if name in seen:
            continue
        seen.add(name)
        # Of the files that need it, this test's own (``needed_by`` may pool the tests).
        needers = [n for n in needed_by.get(name, ()) if os.path.realpath(n) in mine] \
            if mine else list(needed_by.get(name, ()))
        if not needers:
            needers = [o for o in objects if name in _needed(o)]
        for needer in needers:
            if executable and same_file(needer, executable):
                return fixes.Carrier(label, None if name == soname else
                                     f"it links {name}, which needs {soname}")
            try:
                needer_soname = elf.read_elf(needer).soname
            except BadInputError:
                needer_soname = None
            if needer_soname in needed_by or _is_prebuilt(needer, output_base):
                if needer_soname:
                    wanted.append(needer_soname)
                continue
            built = solib.label_of_output(needer)
            if built is not None:
                what = f"which needs {soname}" if name == soname else \
                    f"which needs {name}, which needs {soname}"
                return fixes.Carrier(built, f"the C/C++ target that builds "
                                            f"{os.path.basename(needer)}, {what}")
    return fixes.Carrier(label, None)


def _objects(executable: str | None) -> list[str] | None:
    """The test's executable and the shared objects its runfiles manifest stages, by real
    path, each once; None without a manifest."""
    if not executable:
        return None
    entries = runfiles.read_manifest(runfiles.manifest_of(executable))
    if entries is None:
        return None
    out = [os.path.realpath(executable)]
    for entry in entries:
        name = os.path.basename(entry.path)
        if entry.target and index.looks_like_library(name):
            real = os.path.realpath(entry.target)
            if real not in out:
                out.append(real)
    return out


def _needed(path: str) -> tuple[str, ...]:
    try:
        return elf.read_elf(path).needed
    except (BadInputError, OSError):
        return ()


def _is_prebuilt(path: str, output_base: str | None) -> bool:
    """A library Bazel did not build: staged from a cc_import, or under external/."""
    real = os.path.realpath(path)
    return "/_solib_" in path or "/bazel-out/" not in real or bool(
        output_base and real.startswith(os.path.join(output_base, "external") + "/"))


def _verified(imp: SolibImport, text: str) -> str:
    if imp.verified:
        return text
    return text + (f"(the label {imp.shown_label} is decoded from {os.path.dirname(imp.staged)}; "
                   "its repository path did not lead back to the staged file, so check it "
                   "with `bazel query`)\n")

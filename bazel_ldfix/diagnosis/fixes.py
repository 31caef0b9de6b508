"""The three fixes for a library a test cannot load, as text ready to paste.

1. Now: ``bazel-ldfix test`` or ``bazel test --test_env=LD_LIBRARY_PATH=...``.
2. For every run on this machine: the same flag as a line of ``user.bazelrc``, a file that
   is not committed, which ``try-import %workspace%/user.bazelrc`` in ``.bazelrc`` reads. It
   names directories under this machine's output_base, so it does not travel.
3. Hermetic (remote execution, other machines, no output_base): the BUILD change. A
   ``cc_import(shared_library = "lib/libX.so")`` links the test against the unversioned file;
   the linker records its SONAME ``libX.so.N``; Bazel stages only ``libX.so`` in the test's
   ``_solib_<cpu>`` directory, so the loader never finds ``libX.so.N``. Importing the file
   whose name is the SONAME stages that name.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bazel_ldfix import PROG, pathlist, quoting
from bazel_ldfix.bazel import buildfile, buildtext
from bazel_ldfix.bazel.solib import SolibImport, package_relative
from bazel_ldfix.errors import CannotEditError
from bazel_ldfix.given import Given

BAZELRC_CAVEAT = ("# machine-specific: absolute paths of this machine (an output_base moves "
                  "with the user, the workspace path and `bazel clean --expunge`)")


@dataclass(frozen=True)
class Fix:
    """One way each, or None where that way cannot help."""

    command: str | None     # `bazel-ldfix test //t:x`, or `bazel test //t:x --test_env=...`
    flag: str | None        # --test_env=LD_LIBRARY_PATH=...
    bazelrc: str | None     # the caveat as a comment, then `test --test_env=...`
    build: str | None       # the BUILD change, with where it goes
    value: str | None = None    # the LD_LIBRARY_PATH the flag gives


# -- the three fixes ----------------------------------------------------------------------

def library_path_value(base: Sequence[str], append: Sequence[str],
                       prepend: Sequence[str] = ()) -> str | None:
    """The LD_LIBRARY_PATH a test needs: ``prepend``, the value it had, then ``append``;
    None when a directory cannot be an entry of it (':' or ';': the BUILD fix remains)."""
    if (not append and not prepend) or not all(map(pathlist.listable, (*append, *prepend))):
        return None
    after = Given(tuple(base), tuple(append)).entries
    return Given(after, tuple(prepend), prepend=True).ld_library_path


def flag(value: str | None) -> str | None:
    return None if value is None else Given.of_value(value).flag


def command(label: str | None, value: str | None, *, ldfix: bool,
            prog: str = PROG) -> str | None:
    """The command to run now: ``bazel-ldfix test`` when its model finds everything (the
    tool run as ``prog``, how the user runs it)."""
    target = quoting.shell(label) if label else "<your test targets>"
    if value is None:
        return None     # no value gives it: the repair would not either
    if ldfix:
        return f"{prog} test {target}"
    return f"bazel test {target} {quoting.shell(Given.of_value(value).flag)}"


def bazelrc(value: str | None) -> str | None:
    """The rc line, quoted for Bazel's rc tokenizer; None for a value it cannot carry."""
    if value is None:
        return None
    try:
        line = Given.of_value(value).bazelrc_line()
    except quoting.UnquotableError:
        return None
    return f"{BAZELRC_CAVEAT}\n{line}"


def _lit(text: str) -> str:
    """``text`` as a Starlark string literal for the BUILD snippets."""
    try:
        return buildtext.string(text)
    except CannotEditError:
        return f"{buildtext.string(ascii(text))}  # not UTF-8: rename the file first"


def where(imp: SolibImport) -> str:
    """The BUILD file a cc_import lives in, in words."""
    if not imp.repository:
        return f"{imp.package or '.'}/BUILD in this workspace"
    shown = imp.shown_label.split("//", 1)[0] or "@"
    text = (f"the BUILD file of {shown}"
            + (f" (package {imp.package})" if imp.package else ""))
    root = imp.repository_root
    package_dir = os.path.join(root, imp.package) if root and imp.package else root
    for name in ("BUILD.bazel", "BUILD"):
        if package_dir and os.path.isfile(os.path.join(package_dir, name)):
            text += f", now {os.path.join(package_dir, name)}"
            break
    return text + (": change it where its repository rule gets it (build_file, "
                   "build_file_content, a patch, or the rule that writes it; the `fix` "
                   "command of bazel-ldfix finds that place and makes the change)")


def import_versioned(imp: SolibImport, soname: str, versioned: str) -> str:
    """Replace the unversioned file of a cc_import by the file named like its SONAME."""
    return (
        f"{imp.shown_label} (a cc_import, in {where(imp)}) imports {imp.attribute_value}, whose "
        f"SONAME is {soname}; Bazel stages only {imp.file} beside the test, so the loader "
        f"never finds {soname}. Import the file the loader asks for:\n"
        "\n"
        "    cc_import(\n"
        f"        name = {_lit(imp.name)},\n"
        f"        shared_library = {_lit(versioned)},  # was {_lit(imp.attribute_value)}\n"
        "        # ... its other attributes unchanged\n"
        "    )\n"
        "\n"
        "or keep linking against the unversioned file and ship the versioned one:\n"
        "\n"
        "    cc_import(\n"
        f"        name = {_lit(imp.name)},\n"
        f"        interface_library = {_lit(imp.attribute_value)},\n"
        f"        shared_library = {_lit(versioned)},\n"
        "    )\n")


def versioned_in_repository(imp: SolibImport, soname: str, candidates: Sequence[str] = (),
                            usable: Callable[[str], bool] = os.path.isfile) -> str | None:
    """The package-relative path of a file named ``soname`` in the import's package.

    First beside the imported file, else any candidate that lies in the same package;
    ``usable`` may refuse some (a version error needs a file that defines the version).
    """
    beside = os.path.join(os.path.dirname(imp.target), soname)
    if os.path.isfile(beside) and usable(beside):
        return package_relative(os.path.join(imp.library_dir, soname), imp.package)
    root = imp.repository_root
    if root is None:
        return None
    package_dir = os.path.join(root, imp.package) if imp.package else root
    for path in candidates:
        if path.startswith(package_dir + "/") and os.path.basename(path) == soname \
                and usable(path):
            return os.path.relpath(path, package_dir)
    return None


@dataclass(frozen=True)
class Carrier:
    """The target whose deps get a new dependency, and why that one (None: the test)."""

    label: str | None
    why: str | None = None

    def deps(self) -> str:
        where = f"the deps of {self.label}" if self.label else "the test's deps"
        return f"{where} ({self.why})" if self.why else where


def existing_import(soname: str, repository_dir: str) -> tuple[str, str] | None:
    """``(name, shared_library)`` of a cc_import in the repository's top-level BUILD file
    that imports ``soname``'s file under its unversioned (or its own) name."""
    for build in ("BUILD.bazel", "BUILD"):
        path = os.path.join(repository_dir, build)
        if not os.path.lexists(path):
            continue
        for call in buildfile.read_calls(path) or ():
            if buildfile.function_name(call) != "cc_import":
                continue
            name = buildfile.string_attr(call, "name")
            lib = buildfile.string_attr(call, "shared_library")
            # Plain strings only: what is printed back into BUILD text needs no escaping
            # (no quote, backslash or line break).
            if not name or not lib or any(c in name + lib for c in '"\\\n'):
                continue
            base = os.path.basename(lib)
            if base == soname or soname.startswith(base + "."):
                return name, lib
        return None
    return None


def new_import(soname: str, path: str, output_base: str | None, test: str | None,
               why: str | None = None) -> str:
    """Import a file no cc_import of the test stages (a dependency of a dependency).

    ``test`` is the target whose deps get it (the C/C++ target that links what needs it,
    see ``why``).
    """
    stem = _target_name(soname)
    external = os.path.join(output_base, "external") + "/" if output_base else None
    deps = Carrier(test, why).deps()
    if external and path.startswith(external):
        repository, _, rel = path[len(external):].partition("/")
        present = existing_import(soname, external + repository)
        if present is not None:
            name, imported = present
            label = f"@{repository}//:{name}"
            if os.path.basename(imported) == soname:
                return f"Add {_lit(label)} (the cc_import of {soname}) to {deps}.\n"
            versioned = os.path.join(os.path.dirname(imported), soname)
            return (
                f"{label} (a cc_import in the BUILD file of @{repository}) imports "
                f"{imported}, whose SONAME is {soname}; nothing the test depends on stages "
                "it. Import the file the loader asks for:\n"
                "\n"
                "    cc_import(\n"
                f"        name = {_lit(name)},\n"
                f"        shared_library = {_lit(versioned)},  # was {_lit(imported)}\n"
                "    )\n"
                "\n"
                f"and add {_lit(label)} to {deps}.\n")
        return (
            f"No cc_import the test depends on stages {soname}. It is in @{repository}; in "
            f"the BUILD file of @{repository} (guessed: its top-level package), add\n"
            "\n"
            "    cc_import(\n"
            f"        name = {_lit(stem)},\n"
            f"        shared_library = {_lit(rel)},\n"
            "        visibility = [\"//visibility:public\"],\n"
            "    )\n"
            "\n"
            f"and add {_lit(f'@{repository}//:{stem}')} to {deps}.\n")
    return (
        f"No cc_import the test depends on stages {soname}. Import {path} with a cc_import "
        f"(shared_library = the file named {soname}) in the package that holds it, and add "
        f"that target to {deps}.\n")


def dlopen_by_name(soname: str, path: str | None, output_base: str | None,
                   test: str | None) -> str:
    """A library a test dlopen()s by name, which no ELF file of the test names."""
    label = None
    external = os.path.join(output_base, "external") + "/" if output_base else None
    if path and external and path.startswith(external):
        repository, _, rel = path[len(external):].partition("/")
        label = f"@{repository}//:{rel}"
    where_to = f"the data of {test}" if test else "the test's data"
    return (
        f"dlopen(\"{soname}\") searches LD_LIBRARY_PATH, ld.so.cache and the system "
        "directories (and the caller's own RUNPATH), never the test's runfiles. Put the file "
        f"in {where_to}"
        + (f" (guessed label, @{label.split('//')[0][1:]}'s top-level package):\n\n"
           f"    data = [{_lit(label)}],\n\n" if label else ",\n")
        + "and open it by its runfiles path (the runfiles library of the test's language "
          "finds it), or let a cc_library or cc_binary that links it bring it in, so that "
          "Bazel stages it on that object's RUNPATH.\n")


def add_dependency(imp: SolibImport, test: str | None, why: str | None = None) -> str:
    return (f"The test does not depend on {imp.shown_label}; add {_lit(imp.shown_label)} to "
            f"{Carrier(test, why).deps()}.\n")


def _target_name(soname: str) -> str:
    stem = soname.split(".so", 1)[0]
    return stem[3:] if stem.startswith("lib") and len(stem) > 3 else stem

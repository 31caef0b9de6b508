"""The three fixes for a library a test cannot load, as text ready to paste.

1. Now: ``bazel-ldfix test`` or ``bazel test --test_env=LD_LIBRARY_PATH=...``.
2. For every run on this machine: the same flag as a ``.bazelrc`` line. It names directories
   under this machine's output_base, so it does not travel.
3. Hermetic (remote execution, other machines, no output_base): the BUILD change. A
   ``cc_import(shared_library = "lib/libX.so")`` links the test against the unversioned file;
   the linker records its SONAME ``libX.so.N``; Bazel stages only ``libX.so`` in the test's
   ``_solib_<cpu>`` directory, so the loader never finds ``libX.so.N``. Importing the file
   whose name is the SONAME stages that name.

Which ``cc_import`` staged a file is read from the name of its ``_solib_<cpu>`` directory,
which Bazel derives from the rule's label and the library's directory (``SolibSymlinkAction``,
``Actions.escapedPath``): ``_U@xsdk_S_S_Cxdemo___Ulib`` is ``_`` + ``@xsdk//:xdemo``, ``__``,
and ``_`` + ``lib``, with ``_`` written ``_U``, ``/`` ``_S``, ``:`` ``_C`` (seen on Bazel 4.2.3;
newer versions also write ``@`` as ``_A`` and ``\\`` as ``_B``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf, pathlist, quoting
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.search import decompose

VARIABLE = "LD_LIBRARY_PATH"
_UNESCAPE = {"U": "_", "S": "/", "C": ":", "A": "@", "B": "\\"}
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


@dataclass(frozen=True)
class SolibImport:
    """A library Bazel staged for a ``cc_import``, and what the staged name leads to."""

    label: str              # @xsdk//:xdemo, //t:local_imp (decoded from the directory name)
    library_dir: str        # the imported file's directory, relative to its repository
    file: str               # the staged name (the imported file's own name)
    staged: str             # <bin>/_solib_<cpu>/<dir>/<file> (or its runfiles twin)
    target: str             # the imported file, as Bazel's symlinks name it
    soname: str | None      # DT_SONAME of the real file
    verified: bool          # the decoded repository path leads to the same file
    # The label as the main repository writes it (``@nvsdk//:x`` for ``@@+ext+nvsdk//:x``,
    # from the runfiles repository mapping); None when no mapping names it.
    apparent: str | None = None

    @property
    def shown_label(self) -> str:
        """The label to print: canonical names do not resolve from the main repository."""
        return self.apparent or self.label

    @property
    def repository(self) -> str:
        """``xsdk`` for ``@xsdk//:x``, ``""`` for the main repository."""
        return self.label.split("//", 1)[0].lstrip("@")

    @property
    def package(self) -> str:
        return self.label.split("//", 1)[1].split(":", 1)[0]

    @property
    def name(self) -> str:
        return self.label.rsplit(":", 1)[1]

    @property
    def attribute_value(self) -> str:
        """The ``shared_library`` value as written in the BUILD file (package-relative)."""
        return _package_relative(os.path.join(self.library_dir, self.file), self.package)


def decode_solib_dir(name: str) -> tuple[str, str] | None:
    """``(label, library dir)`` from a ``_solib_<cpu>`` subdirectory name, or None.

    >>> decode_solib_dir("_U@xsdk_S_S_Cxdemo___Ulib")
    ('@xsdk//:xdemo', 'lib')
    """
    parts: list[list[str]] = [[]]
    at = 0
    while at < len(name):
        char = name[at]
        if char != "_":
            parts[-1].append(char)
            at += 1
            continue
        code = name[at + 1: at + 2]
        if code in _UNESCAPE:
            parts[-1].append(_UNESCAPE[code])
        elif code == "_" and len(parts) == 1:
            parts.append([])          # the "__" between the label and the directory
        else:
            return None               # not a name Bazel's escaping produces
        at += 2
    if len(parts) != 2:
        return None
    label, directory = "".join(parts[0]), "".join(parts[1])
    if not label.startswith("_") or "//" not in label or not directory.startswith("_"):
        return None
    return label[1:], directory[1:]


def solib_imports(directories: Iterable[str],
                  apparent: Callable[[str], str] | None = None) -> list[SolibImport]:
    """Every library staged in these ``_solib_<cpu>/<dir>`` directories; ``apparent`` maps
    a decoded (canonical) label to the one the main repository writes."""
    out: list[SolibImport] = []
    seen: set[str] = set()
    staged_as: set[tuple[str, str]] = set()
    for directory in directories:
        directory = os.path.normpath(directory)
        decoded = decode_solib_dir(os.path.basename(directory))
        if decoded is None and _HASHED_NAME.match(os.path.basename(directory)):
            decoded = (_HASHED, "")     # read from the staged file's symlink below
        if decoded is None or directory in seen or not os.path.isdir(directory):
            continue
        seen.add(directory)
        label, library_dir = decoded
        for entry in sorted(os.listdir(directory)):
            guessed = False
            if decoded[0] == _HASHED:
                found = _hashed_import(directory, entry)
                if found is None:
                    continue
                label, library_dir, guessed = found
            staged = os.path.join(directory, entry)
            if not os.path.isfile(staged) or (label, entry) in staged_as:
                continue    # the runfiles tree stages again what the RUNPATH reaches
            staged_as.add((label, entry))
            try:
                soname = elf.read_elf(staged).soname
            except BadInputError:
                soname = None
            target = _import_target(staged)
            shown = apparent(label) if apparent is not None else None
            out.append(SolibImport(label, library_dir, entry, staged, target, soname,
                                   not guessed and _verify(target, label, library_dir, entry),
                                   shown if shown and shown != label else None))
    return out


# rules_cc hashes a _solib_ entry whose escaped name is longer than a file name may be
# (cc/private/link/dynamic_library_symlink.bzl, _get_mangled_name, through
# cc_internal.maybe_hash_preserve_extension): the SHA-256 of the name in hex, keeping what
# follows its last "." as an extension.
_HASHED_NAME = re.compile(r"^[0-9a-f]{64}(\.[^/]*)?$")
_HASHED = "\0hashed"
MAX_FILE_NAME = 255


def hashed_name(name: str) -> str:
    """The name rules_cc gives a _solib_ entry named ``name`` (itself when short enough)."""
    if len(name) <= MAX_FILE_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
    _, dot, extension = name.rpartition(".")
    return f"{digest}.{extension}" if dot and extension else digest


def escaped_path(text: str) -> str:
    """Bazel's escaping of a label or path into one file name (Actions.escapedPath)."""
    return "".join({"_": "_U", "/": "_S", "\\": "_B", ":": "_C", "@": "_A"}.get(c, c)
                   for c in text)


def _hashed_import(directory: str, entry: str) -> tuple[str, str, bool] | None:
    """``(label, library dir, guessed)`` of the import behind a hashed ``_solib_`` directory.

    The staged symlink leads to the imported file, ``.../external/<repo>/<dir>/<file>``;
    each ``cc_import`` name in the BUILD files of that repository's packages above the file
    is tried, and the one whose escaped name hashes to the directory's name is the import.
    When none does, the label is a guess from the file (its name part is the file's stem),
    which the BUILD fix says (it is not verified).
    """
    staged = os.path.join(directory, entry)
    target = _import_target(staged)
    at = target.rfind("/external/")
    if at < 0:
        return None
    repository, _, rest = target[at + len("/external/"):].partition("/")
    if not repository or "/" not in rest:
        return None
    root = target[: at + len("/external/")] + repository
    library_dir = os.path.dirname(rest)
    wanted = os.path.basename(directory)
    parts = library_dir.split("/")
    for depth in range(len(parts), -1, -1):
        package = "/".join(parts[:depth])
        for name in _target_names(os.path.join(root, package)):
            for at_signs in ("@@", "@"):
                label = f"{at_signs}{repository}//{package}:{name}"
                escaped = escaped_path("_" + label) + "__" + escaped_path("_" + library_dir)
                if hashed_name(escaped) == wanted:
                    return label, library_dir, False
    stem = entry.split(".so", 1)[0]
    name = stem[3:] if stem.startswith("lib") and len(stem) > 3 else stem
    return f"@@{repository}//:{name}", library_dir, True


_NAME_ATTR = re.compile(r"""\bname\s*=\s*["']([^"'\n]{1,200})["']""")
_MAX_BUILD = 4 << 20


def _target_names(package_dir: str) -> list[str]:
    """The ``name = "..."`` values of a package's BUILD file (bounded; nothing on error)."""
    for build in ("BUILD.bazel", "BUILD"):
        path = os.path.join(package_dir, build)
        try:
            with open(path, "rb") as fh:
                text = fh.read(_MAX_BUILD).decode("utf-8", "replace")
        except OSError:
            continue
        return list(dict.fromkeys(_NAME_ATTR.findall(text)))
    return []


def _import_target(staged: str) -> str:
    """Where Bazel's symlinks lead, up to the first path outside bazel-out.

    A runfiles entry points at the execroot's ``_solib_`` entry, which points at the
    imported file (``<output_base>/external/<repo>/...`` or the source tree).
    """
    path = staged
    for _ in range(8):
        if not os.path.islink(path) or ("/bazel-out/" not in path and ".runfiles/" not in path):
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return path


def _verify(target: str, label: str, library_dir: str, file: str) -> bool:
    """Does the file Bazel linked agree with the decoded name?

    It is ``<output_base>/external/<repo>/<dir>/<file>`` for an external repository, and
    ``<workspace>/<dir>/<file>`` for the main one.
    """
    repository = label.split("//", 1)[0].lstrip("@")
    suffix = "/".join(p for p in (library_dir, file) if p)
    if repository:
        suffix = f"external/{repository}/{suffix}"
    return target.endswith("/" + suffix)


def solib_dirs_of(executable: str) -> list[str]:
    """The ``_solib_`` directories a test reaches: its RUNPATH/RPATH, and its runfiles."""
    out: list[str] = []
    try:
        info = elf.read_elf(executable)
    except BadInputError:
        info = None
    if info is not None:
        origin = os.path.dirname(os.path.realpath(executable))
        for value in (info.runpath, info.rpath):
            if value:
                out += [d for d in decompose(value.split(":"), {"ORIGIN": origin},
                                              lambda p: p)
                        if "/_solib_" in d]
    runfiles = executable + ".runfiles"
    if os.path.isdir(runfiles):
        for repo in sorted(os.listdir(runfiles)):
            top = os.path.join(runfiles, repo)
            for solib in sorted(_listdir(top)):
                if solib.startswith("_solib_"):
                    out += [os.path.join(top, solib, d)
                            for d in sorted(_listdir(os.path.join(top, solib)))]
    return out


def every_solib_dir(executable: str) -> list[str]:
    """All ``_solib_<cpu>/<dir>`` directories of the configuration that built ``executable``."""
    real = os.path.realpath(executable)
    at = real.find("/bin/")
    if at < 0:
        return []
    bindir = real[: at + len("/bin")]
    out = []
    for solib in sorted(_listdir(bindir)):
        if solib.startswith("_solib_"):
            out += [os.path.join(bindir, solib, d)
                    for d in sorted(_listdir(os.path.join(bindir, solib)))]
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _package_relative(path: str, package: str) -> str:
    path = os.path.normpath(path)
    if package and path.startswith(package + "/"):
        return path[len(package) + 1:]
    return path


# -- the three fixes ----------------------------------------------------------------------

def library_path_value(base: Sequence[str], append: Sequence[str],
                       prepend: Sequence[str] = ()) -> str | None:
    """The LD_LIBRARY_PATH a test needs: ``prepend``, the value it had, then ``append``;
    None when a directory cannot be an entry of it (':' or ';': the BUILD fix remains)."""
    if (not append and not prepend) or not all(map(pathlist.listable, (*append, *prepend))):
        return None
    return pathlist.join(pathlist.merge(pathlist.merge(base, append), prepend, prepend=True))


def flag(value: str | None) -> str | None:
    return None if value is None else f"--test_env={VARIABLE}={value}"


def command(label: str | None, value: str | None, *, ldfix: bool) -> str | None:
    """The command to run now: ``bazel-ldfix test`` when its model finds everything."""
    target = quoting.shell(label) if label else "<your test targets>"
    if ldfix:
        return f"bazel-ldfix test {target}"
    if value is None:
        return None
    return f"bazel test {target} {quoting.shell(f'--test_env={VARIABLE}={value}')}"


def bazelrc(value: str | None) -> str | None:
    """The rc line, quoted for Bazel's rc tokenizer; None for a value it cannot carry."""
    if value is None:
        return None
    try:
        word = quoting.bazelrc_word(f"--test_env={VARIABLE}={value}")
    except quoting.UnquotableError:
        return None
    return f"{BAZELRC_CAVEAT}\ntest {word}"


def _lit(text: str) -> str:
    """``text`` as a Starlark string literal for the BUILD snippets."""
    try:
        return quoting.starlark_string(text)
    except quoting.UnquotableError:
        return f"{quoting.starlark_string(ascii(text))}  # not UTF-8: rename the file first"


def where(imp: SolibImport) -> str:
    """The BUILD file a cc_import lives in, in words."""
    if not imp.repository:
        return f"{imp.package or '.'}/BUILD in this workspace"
    shown = imp.shown_label.split("//", 1)[0] or "@"
    text = (f"the BUILD file of {shown}"
            + (f" (package {imp.package})" if imp.package else ""))
    root = _repository_root(imp)
    package_dir = os.path.join(root, imp.package) if root and imp.package else root
    for name in ("BUILD.bazel", "BUILD"):
        if package_dir and os.path.isfile(os.path.join(package_dir, name)):
            text += f", now {os.path.join(package_dir, name)}"
            break
    return text + (": change it where its repository rule gets it (build_file, "
                   "build_file_content, a patch, or the rule that writes it; "
                   "`bazel-ldfix fix` finds that place and makes the change)")


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
        return _package_relative(os.path.join(imp.library_dir, soname), imp.package)
    root = _repository_root(imp)
    if root is None:
        return None
    package_dir = os.path.join(root, imp.package) if imp.package else root
    for path in candidates:
        if path.startswith(package_dir + "/") and os.path.basename(path) == soname \
                and usable(path):
            return os.path.relpath(path, package_dir)
    return None


def _repository_root(imp: SolibImport) -> str | None:
    """The directory the import's repository-relative paths start from."""
    suffix = os.path.join(imp.library_dir, imp.file) if imp.library_dir else imp.file
    target = os.path.normpath(imp.target)
    if target.endswith("/" + suffix):
        return target[: -len(suffix) - 1]
    return None


@dataclass(frozen=True)
class Carrier:
    """The target whose deps get a new dependency, and why that one (None: the test)."""

    label: str | None
    why: str | None = None

    def deps(self) -> str:
        where = f"the deps of {self.label}" if self.label else "the test's deps"
        return f"{where} ({self.why})" if self.why else where


def label_of_output(path: str) -> str | None:
    """The label of the rule that built ``path``, a file Bazel put under ``bazel-out/*/bin``
    (directly or through a runfiles symlink), when its package can be told.

    The package is the longest directory of the path that holds a BUILD file, in the
    execroot (whose top-level entries lead to the source tree) or the external repository.
    """
    real = os.path.realpath(path)
    at = real.find("/bazel-out/")
    if at < 0:
        return None
    execroot = real[:at]
    rest = real[at + len("/bazel-out/"):].split("/", 2)
    if len(rest) < 3 or rest[1] != "bin":
        return None
    rel = rest[2]
    repository, top = "", execroot
    if rel.startswith("external/"):
        repository, _, rel = rel[len("external/"):].partition("/")
        top = os.path.join(os.path.dirname(os.path.dirname(execroot)), "external", repository)
    parts = rel.split("/")
    for cut in range(len(parts) - 1, -1, -1):
        package = "/".join(parts[:cut])
        if any(os.path.isfile(os.path.join(top, package, b)) for b in ("BUILD.bazel", "BUILD")):
            prefix = f"@{repository}" if repository else ""
            return f"{prefix}//{package}:{'/'.join(parts[cut:])}"
    return None


def existing_import(soname: str, repository_dir: str) -> tuple[str, str] | None:
    """``(name, shared_library)`` of a cc_import in the repository's top-level BUILD file
    that imports ``soname``'s file under its unversioned (or its own) name."""
    for build in ("BUILD.bazel", "BUILD"):
        path = os.path.join(repository_dir, build)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read(1 << 20)
        except OSError:
            continue
        for call in re.finditer(r"cc_import\s*\((.*?)\)", text, re.S):
            # Plain string literals only: what is printed back into BUILD text needs no
            # escaping (no quote, backslash or line break).
            name = re.search(r"\bname\s*=\s*\"([^\"\\\n]+)\"", call.group(1))
            lib = re.search(r"\bshared_library\s*=\s*\"([^\"\\\n]+)\"", call.group(1))
            if name and lib:
                base = os.path.basename(lib.group(1))
                if base == soname or soname.startswith(base + "."):
                    return name.group(1), lib.group(1)
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

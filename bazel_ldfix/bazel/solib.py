"""Where Bazel stages the shared libraries a C/C++ rule imports or builds.

Bazel links each one into ``bazel-out/<configuration>/bin/_solib_<cpu>/<mangled
package>/`` under the execroot, and the tests' RUNPATH and runfiles lead there; what those
entries lead to is where the repair looks first for a versioned file (``index.test_dirs``).

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.paths import decompose

_UNESCAPE = {"U": "_", "S": "/", "C": ":", "A": "@", "B": "\\"}


def staged(output_base: str) -> list[str]:
    """Every entry of every ``_solib_*`` directory of every configuration under
    ``output_base``'s execroot, in sorted order (what the workspace's tests import)."""
    out: list[str] = []
    execroot = os.path.join(output_base, "execroot")
    for workspace in _names(execroot):
        bazel_out = os.path.join(execroot, workspace, "bazel-out")
        for configuration in _names(bazel_out):
            bin_dir = os.path.join(bazel_out, configuration, "bin")
            for solib in _names(bin_dir):
                if not solib.startswith("_solib_"):
                    continue
                for package in _names(os.path.join(bin_dir, solib)):
                    directory = os.path.join(bin_dir, solib, package)
                    out += [os.path.join(directory, name) for name in _names(directory)]
    return out


def _names(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


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
    def repository_root(self) -> str | None:
        """The directory the import's repository-relative paths start from: the imported
        file's path less ``library_dir/file`` (None when it does not end so)."""
        suffix = os.path.join(self.library_dir, self.file) if self.library_dir else self.file
        target = os.path.normpath(self.target)
        if target.endswith("/" + suffix):
            return target[: -len(suffix) - 1]
        return None

    @property
    def attribute_value(self) -> str:
        """The ``shared_library`` value as written in the BUILD file (package-relative)."""
        return package_relative(os.path.join(self.library_dir, self.file), self.package)


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


def package_relative(path: str, package: str) -> str:
    path = os.path.normpath(path)
    if package and path.startswith(package + "/"):
        return path[len(package) + 1:]
    return path


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

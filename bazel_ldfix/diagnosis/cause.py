"""Why a test misses a library, as one short fact a screen can group by: which
``cc_import`` causes it (one that imports the unversioned file, one the test does not depend
on), or which loaded file lacks what an object needs.

The brief diagnosis prints one line per missing library under the cause it shares with
others; the BUILD change itself (:mod:`.hermetic`) is printed with ``-v``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass

from bazel_ldfix.diagnosis import fixes
from bazel_ldfix.diagnosis.testfacts import TestContext
from bazel_ldfix.errors import LdfixError
from bazel_ldfix.loader import cuda


class CauseKind(str, enum.Enum):
    """What makes the loader miss a library."""

    IMPORTS_UNVERSIONED = "imports_unversioned"   # a cc_import of libX.so, SONAME libX.so.N
    NOT_A_DEPENDENCY = "not_a_dependency"         # a cc_import the test does not depend on
    NO_IMPORT = "no_import"                       # no cc_import stages it
    DLOPEN = "dlopen_by_name"                     # opened by name, which no ELF file says
    LACKS_VERSION = "lacks_version"               # the copy loaded lacks a needed version
    LACKS_SYMBOL = "lacks_symbol"                 # no object loaded defines a symbol
    WRONG_CLASS = "wrong_class"                   # only copies of the other ELF class
    BROKEN_FILE = "broken_file"                   # the file found is not a usable library
    LEFTOVER = "leftover"                         # only a file an earlier build left
    NO_DRIVER = "no_driver"                       # a CUDA stub staged; the host has no driver
    OTHER = "other"


@dataclass(frozen=True)
class Cause:
    """One cause; ``subject`` is what it is about (an import's label, a file), None for
    the kinds that are about no one thing."""

    kind: CauseKind
    subject: str | None
    words: str              # the header of its group, for people

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.kind.value, self.subject)


def of_missing(test: TestContext, soname: str, found: Sequence[str]) -> Cause:
    """The cc_import behind a library the loader did not find (as the BUILD fix reads it)."""
    for imp in test.imports:
        if imp.soname == soname and _stub(imp.target):
            # Linked against a stub (system_provided, or imported by mistake): only the
            # host's NVIDIA driver can give the name at run time (docs/cuda.md).
            return Cause(CauseKind.NO_DRIVER, imp.shown_label,
                         f"{imp.shown_label} stages a stub of {soname}, the NVIDIA "
                         "driver's, which the system provides: this host has none")
        if imp.soname == soname and imp.file != soname:
            return Cause(CauseKind.IMPORTS_UNVERSIONED, imp.shown_label,
                         f"{imp.shown_label} imports {imp.attribute_value}, not the file "
                         "named like its SONAME")
    for imp in test.other_imports:
        if imp.soname == soname:
            return _not_a_dependency(imp.shown_label)
    external = os.path.join(test.output_base, "external") + "/" if test.output_base else None
    if found and external and found[0].startswith(external):
        repository = found[0][len(external):].split("/", 1)[0]
        present = fixes.existing_import(soname, external + repository)
        if present is not None:
            return _not_a_dependency(f"@{repository}//:{present[0]}")
    return Cause(CauseKind.NO_IMPORT, None, "no cc_import of the tests stages it")


def _stub(path: str) -> bool:
    try:
        return cuda.is_stub(path, os.path.realpath(path))
    except (OSError, LdfixError):
        return False


def _not_a_dependency(label: str) -> Cause:
    return Cause(CauseKind.NOT_A_DEPENDENCY, label,
                 f"{label} is not a dependency of the tests that need it")


def dlopen() -> Cause:
    return Cause(CauseKind.DLOPEN, None, "opened with dlopen by name, which no file the "
                 "repair reads names")


def leftover(path: str) -> Cause:
    return Cause(CauseKind.LEFTOVER, path, f"found here only at {path}, a leftover of an "
                 "earlier build in bazel-out: no rule declares it for the test now, so a "
                 "sandbox, a remote executor and `bazel clean` take it away")


def lacks_version(lacking: str, defined: Sequence[str]) -> Cause:
    has = (f"defines only {', '.join(defined[-4:])}" if defined
           else "defines no versions")
    return Cause(CauseKind.LACKS_VERSION, lacking,
                 f"the loader took {lacking}, which {has}")


def lacks_symbol(needer: str, lacking: str | None = None) -> Cause:
    if lacking is not None:
        return Cause(CauseKind.LACKS_SYMBOL, lacking,
                     f"the loader took {lacking}, which lacks a symbol "
                     f"{os.path.basename(needer)} uses")
    return Cause(CauseKind.LACKS_SYMBOL, needer,
                 f"{needer} uses a symbol no object loaded with it defines")


def wrong_class() -> Cause:
    return Cause(CauseKind.WRONG_CLASS, None,
                 "only copies of the other ELF class where the loader searched")


def broken_file(path: str) -> Cause:
    return Cause(CauseKind.BROKEN_FILE, path, f"{path} is not a usable library")


def other() -> Cause:
    return Cause(CauseKind.OTHER, None, "other errors of the loader")

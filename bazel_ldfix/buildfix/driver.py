"""What ``fix`` does with CUDA files: never import a stub, nor a compat driver this host
cannot use; leave the driver to the system (docs/cuda.md).

The driver's libraries (``libcuda.so.1``, ``libnvidia-ml.so.1``) come with the kernel
module, and a test must load the host's own. So the import that gives one links against
the toolkit's stub and stages nothing: ``interface_library`` the stub, ``system_provided =
1`` (:attr:`Kind.SYSTEM`). Bazel then adds no directory of it to the test's RUNPATH, and the
loader finds the host's driver through ``ld.so.cache``. Where this host has no driver, no
BUILD change can give the name, and the plan says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.bazel import declaredinputs, runfiles, solib
from bazel_ldfix.buildfix.change import Change, Kind
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader import cuda
from bazel_ldfix.loader.cuda import DRIVER_SONAMES, HostDriver

# The names Bazel takes as an interface_library (cc_import's allowed file types); a
# versioned name (libcuda.so.1) is refused at analysis.
_INTERFACE_ENDINGS = (".so", ".ifso", ".tbd", ".lib", ".dylib")
_VERSION = re.compile(r"(\.so)(\.[0-9]+)+$")


@dataclass(frozen=True)
class Decision:
    """What the plan gets for one driver name of one test."""

    change: Change | None = None
    problem: str | None = None
    unprovided: str | None = None       # why no change gives the name, in words


def refuse(path: str, host: HostDriver) -> str | None:
    """Why the file ``path`` is none to import: a CUDA stub, or a compat driver this host
    cannot use (None: neither)."""
    found = cuda.classify(path, os.path.realpath(path), host)
    return None if found is None or found.usable else found.reason


def staged_unusable(imports: Iterable[solib.SolibImport], host: HostDriver
                    ) -> list[solib.SolibImport]:
    """The imports that stage a driver's name, leading to a stub or to a compat driver this
    host cannot use: the test loads it ahead of the host's driver, and every call fails."""
    return [i for i in imports if i.file in DRIVER_SONAMES and refuse(i.target, host)]


def stages_unusable(executable: str, host: HostDriver) -> bool:
    """Whether a ``_solib_`` directory the test reaches holds a driver's name that leads to
    a file :func:`refuse` refuses (what an earlier build left there aside)."""
    stale: frozenset[str] | None = None
    for directory in solib.solib_dirs_of(executable):
        for name in DRIVER_SONAMES:
            path = os.path.join(directory, name)
            if not os.path.isfile(path) or refuse(path, host) is None:
                continue
            if stale is None:
                stale = declaredinputs.undeclared(executable)
            if not declaredinputs.among(path, stale):
                return True
    return False


def decide(soname: str, test: str, executable: str, imp: solib.SolibImport | None,
           host: HostDriver, missing: bool, found: Sequence[str]) -> Decision:
    """The change for ``soname``, a driver's name ``test`` needs; ``imp``: the test's own
    import of a file with that SONAME (None: none); ``missing``: the test finds no file
    of that name now; ``found``: the copies the repair would give it at run time."""
    change, problem = None, None
    if imp is not None and not _linked_only(imp, executable):
        change, problem = _system(imp, soname, test, host)
    return Decision(change, problem, _unprovided(soname, test, host, missing, found))


def _linked_only(imp: solib.SolibImport, executable: str) -> bool:
    """Whether ``imp`` is staged for linking only: system-provided already. Bazel puts
    such an import's interface_library in ``_solib_`` too, but not in the test's runfiles
    (False when the test has no manifest to say so)."""
    entries = runfiles.read_manifest(runfiles.manifest_of(executable))
    at = imp.staged.rfind("/_solib_")
    if not entries or at < 0:
        return False
    return imp.staged[at + 1:] not in {e.path.partition("/")[2] for e in entries}


def _system(imp: solib.SolibImport, soname: str, test: str, host: HostDriver
            ) -> tuple[Change | None, str | None]:
    interface = _interface(imp, soname)
    if interface is None:
        return None, (f"{imp.label} imports {imp.attribute_value} for {soname}, the NVIDIA "
                      "driver's, which the system provides; no file of its package beside "
                      f"it ends in .so to link against as interface_library")
    what = refuse(imp.target, host) or "a driver file"
    why = (f"{test} needs {soname}, which the NVIDIA driver installs: the host's own must "
           f"be loaded, and {imp.attribute_value} is {what}; so it is only linked against, "
           "and Bazel stages nothing of it")
    return Change(imp.label, Kind.SYSTEM, "interface_library", interface, why,
                  imp.attribute_value), None


def _interface(imp: solib.SolibImport, soname: str) -> str | None:
    """The package-relative file to link against: the imported one, or the unversioned
    name beside it (``libcuda.so`` for ``libcuda.so.1``) when it has the same SONAME."""
    value = imp.attribute_value
    if value.endswith(_INTERFACE_ENDINGS):
        return value
    name = _VERSION.sub(r"\1", os.path.basename(value))
    beside = os.path.join(os.path.dirname(imp.target), name)
    try:
        if name == os.path.basename(value) or elf.read_elf(beside).soname != soname:
            return None
    except BadInputError:
        return None
    directory = os.path.dirname(value)
    return f"{directory}/{name}" if directory else name


def _unprovided(soname: str, test: str, host: HostDriver, missing: bool,
                found: Sequence[str]) -> str | None:
    start = (f"{test} needs {soname}, which the NVIDIA driver installs and the system "
             "provides at run time")
    if host.absent:
        return (f"{start}; this host has no NVIDIA driver (no kernel module in "
                "/proc/driver/nvidia/version, no libcuda.so.1 in ld.so.cache), so no BUILD "
                "change can give it: the test can pass only on a host with the driver")
    if not missing:
        return None
    if found:
        return (f"{start}; this host's loader finds none, and no BUILD change should "
                f"import one: bazel-ldfix test gives {found[0]} at run time")
    return (f"{start}; this host's loader finds no usable copy (is the driver's user-mode "
            "part installed, and in ld.so.cache?), so no BUILD change can give it")

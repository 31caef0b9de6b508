"""CUDA driver files that load but cannot run CUDA: stubs, and compat drivers too old.

The loader maps both without complaint, so its own checks never refuse them. A program
then fails at its first CUDA call. The rules are NVIDIA's (the CUDA Compatibility guide
and the CUDA Driver API reference); see docs/cuda.md.

- A stub (``stubs/libcuda.so``) is for linking only. Every function it exports returns
  CUDA_ERROR_STUB_LIBRARY (34). A file is a stub by where it is, or by what it holds:
  a ``stubs`` directory on the path it was found at or on its real path (the toolkit
  installs its stubs there, and the ``libcuda.so.1 -> libcuda.so`` link is made there
  too); or, wherever it lies, the code of a stub (:func:`is_stub_code`).
- A compat driver (``compat/libcuda.so.<version>``) is the forward-compatibility package.
  It only helps on a host whose installed driver is older. On a host with the same or a
  newer driver it fails with CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803). On a host with no
  NVIDIA kernel driver it cannot work either: the package holds only user-mode files.

The host's driver version is an argument (:class:`HostDriver`); the edges read it from
``/proc/driver/nvidia/version`` (:func:`parse_proc_version`) or from the file name of the
host's own ``libcuda.so.<version>`` (:func:`version_in_name`).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.machines import EM_X86_64

Version = tuple[int, ...]

#: The driver's own libraries: the system provides them at run time, from the driver
#: installed with the kernel module. The toolkit ships a stub of each to link against.
DRIVER_SONAMES = ("libcuda.so.1", "libnvidia-ml.so.1")

#: The user-mode driver files a toolkit's ``compat`` directory holds.
_COMPAT_NAMES = ("libcuda.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so",
                 "libnvidia-pkcs11", "libcudadebugger.so", "libnvidia-gpucomp.so")
_VERSION_IN_NAME = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..."
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build ..."
_PROC_VERSION = re.compile(r"NVRM version:.*?Kernel Module.*?\s(\d+(?:\.\d+)+)(?:\s|$)",
                           re.MULTILINE)


class CudaKind(str, enum.Enum):
    """What a CUDA driver file is, where the loader's checks see no difference."""

    STUB = "stub"                  # a link-time stub: every call fails (error 34)
    COMPAT_DRIVER = "compat"       # a forward-compatibility driver from a compat directory


@dataclass(frozen=True)
class HostDriver:
    """The host's NVIDIA driver, as far as choosing CUDA files goes.

    ``version`` is the installed driver's version; None when the host has none.
    ``allow_compat``: the user asked for compat drivers whatever the host has.
    """

    version: Version | None = None
    allow_compat: bool = False

    @property
    def absent(self) -> bool:
        """No driver was found here, and none was vouched for: the host has none."""
        return self.version is None and not self.allow_compat


#: No host driver known: compat drivers are refused, as on a host without the kernel module.
NO_HOST_DRIVER = HostDriver()


@dataclass(frozen=True)
class CudaFile:
    """A CUDA driver file the loader would take, and whether a program could use it."""

    kind: CudaKind
    version: Version | None        # a compat driver's version, from its file name
    usable: bool
    reason: str                    # words for people


def parse_version(text: str) -> Version | None:
    """``"535.104.05"`` -> ``(535, 104, 5)``; None when it is not dotted numbers."""
    parts = text.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def show_version(version: Version) -> str:
    """As NVIDIA writes it: ``535.104.05``, the third part in two digits."""
    return ".".join(str(p) if at < 2 else f"{p:02d}" for at, p in enumerate(version))


def version_in_name(path: str) -> Version | None:
    """The version a driver file's name carries: ``libcuda.so.535.104.05`` -> (535, 104, 5).

    ``libcuda.so.1`` carries none (one number is the soname's, not the driver's)."""
    found = _VERSION_IN_NAME.search(os.path.basename(path))
    return parse_version(found.group(1)) if found else None


def parse_proc_version(text: str) -> Version | None:
    """The kernel module's version from the text of ``/proc/driver/nvidia/version``."""
    found = _PROC_VERSION.search(text)
    return parse_version(found.group(1)) if found else None


def host_driver(proc_text: str | None, libcuda: str | None,
                allow_compat: bool = False) -> HostDriver:
    """The host's driver from what the edges read: the text of
    ``/proc/driver/nvidia/version`` (None: no kernel module), else the real path of the
    ``libcuda.so.1`` the host's loader finds outside a test (None: none)."""
    version = parse_proc_version(proc_text) if proc_text else None
    if version is None and libcuda is not None and not is_stub(libcuda, libcuda):
        version = version_in_name(libcuda)
    return HostDriver(version, allow_compat)


def _parts(path: str) -> tuple[str, ...]:
    return tuple(os.path.normpath(os.path.dirname(path)).split(os.sep))


def is_stub_path(path: str, real: str) -> bool:
    """Whether ``path`` (as found) or ``real`` (its real path) lies in a ``stubs`` directory."""
    return "stubs" in _parts(path) or "stubs" in _parts(real)


# The code of a stub's function, by machine: ``mov $0x22,%eax; ret`` on x86-64, which
# returns 34 (CUDA_ERROR_STUB_LIBRARY). NVIDIA's stubs are made of nothing else, and
# ``int f(void){return 34;}`` compiles to it at -O2. ``endbr64`` may come first: a compiler
# that protects indirect branches (-fcf-protection) starts every function with it.
_STUB_CODE = {EM_X86_64: b"\xb8\x22\x00\x00\x00\xc3"}
_LANDING_PADS = {EM_X86_64: (b"", b"\xf3\x0f\x1e\xfa")}
# The C runtime's own entry points, which a linker may export beside the stub's functions.
_RUNTIME_FUNCTIONS = ("_init", "_fini")
# A stub's table is small (NVIDIA's: 679 functions in 11 KB of code for libcuda, 756 in
# 12 KB for libcublas); beyond these bounds a file is not read further, and not a stub.
_MAX_STUB_SYMBOLS = 1 << 16
_MAX_STUB_SPAN = 1 << 20


def is_stub_code(path: str, info: elf.ElfInfo | None = None) -> bool:
    """Whether ``path`` holds a stub's code, wherever it lies (see docs/cuda.md).

    The rule: a shared object for x86-64 with no DT_NEEDED at all, that exports at least
    one function (``_init`` and ``_fini`` aside), every one of which begins with
    ``mov $0x22,%eax; ret``. The dynamic symbols are read as the loader reads them
    (:func:`elf.exported_functions`), so ``strip`` changes nothing. Nothing is run.

    A real driver needs libc, libm, libdl, libpthread and librt, so its dynamic entries
    alone clear it: its symbols are never read. ``info``: the file's dynamic facts, when
    the caller has read them already. An unreadable file is no stub.
    """
    try:
        info = info or elf.read_elf(path)
    except BadInputError:
        return False
    body = _STUB_CODE.get(info.machine)
    if body is None or info.header.type != elf.ET_DYN or info.needed:
        return False
    pads = _LANDING_PADS.get(info.machine, (b"",))
    try:
        functions = elf.exported_functions(path, code=max(map(len, pads)) + len(body),
                                           limit=_MAX_STUB_SYMBOLS, span=_MAX_STUB_SPAN)
    except BadInputError:
        return False
    own = [f for f in functions or () if f.name not in _RUNTIME_FUNCTIONS]
    return bool(own) and all(any(f.code.startswith(pad + body) for pad in pads) for f in own)


def is_stub(path: str, real: str, info: elf.ElfInfo | None = None) -> bool:
    """A stub by where it lies (:func:`is_stub_path`) or by its code (:func:`is_stub_code`)."""
    return is_stub_path(path, real) or is_stub_code(real, info)


def is_compat_path(path: str, real: str) -> bool:
    """A user-mode driver file in a ``compat`` directory (as found, or really)."""
    name = os.path.basename(path)
    if not name.startswith(_COMPAT_NAMES):
        return False
    return "compat" in _parts(path) or "compat" in _parts(real)


def classify(path: str, real: str, host: HostDriver = NO_HOST_DRIVER,
             info: elf.ElfInfo | None = None) -> CudaFile | None:
    """What ``path`` is, as a CUDA driver file (None: not a stub, not a compat driver).

    ``real`` is its real path: the version of ``compat/libcuda.so.1`` is in the name of
    the file the link leads to. The file is read only as :func:`is_stub_code` reads it
    (``info``: its dynamic facts, when the caller has them).
    """
    if is_stub(path, real, info):
        return CudaFile(CudaKind.STUB, None, False,
                        "a CUDA stub, for linking only: every call fails "
                        "(CUDA_ERROR_STUB_LIBRARY)")
    if not is_compat_path(path, real):
        return None
    version = version_in_name(real) or version_in_name(path)
    shown = f" {show_version(version)}" if version else ""
    if host.allow_compat:
        return CudaFile(CudaKind.COMPAT_DRIVER, version, True,
                        f"a compat driver{shown}, allowed by request")
    if host.version is None:
        return CudaFile(CudaKind.COMPAT_DRIVER, version, False,
                        f"a compat driver{shown}: this host has no NVIDIA driver for it "
                        "to extend")
    if version is not None and version > host.version:
        return CudaFile(CudaKind.COMPAT_DRIVER, version, True,
                        f"a compat driver{shown}, newer than the host's "
                        f"{show_version(host.version)}")
    return CudaFile(CudaKind.COMPAT_DRIVER, version, False,
                    f"a compat driver{shown or ' of unknown version'}, not newer than the "
                    f"host's {show_version(host.version)} "
                    "(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)")


def kind_of(path: str, real: str, info: elf.ElfInfo | None = None) -> CudaKind | None:
    """What ``path`` is, whatever the host: a stub, a compat driver, or neither."""
    if is_stub(path, real, info):
        return CudaKind.STUB
    return CudaKind.COMPAT_DRIVER if is_compat_path(path, real) else None


@dataclass(frozen=True)
class CudaNote:
    """A loaded object that is a CUDA stub or a compat driver, and what that means here."""

    soname: str
    path: str
    file: CudaFile

    @property
    def words(self) -> str:
        return f"{self.soname} => {self.path} is {self.file.reason}"


def notes_for(objects: Iterable[tuple[str, str | None]],
              host: HostDriver = NO_HOST_DRIVER) -> tuple[CudaNote, ...]:
    """The CUDA notes for loaded objects given as (soname, path) pairs."""
    out = []
    for soname, path in objects:
        if path is None:
            continue
        found = classify(path, os.path.realpath(path), host)
        if found is not None:
            out.append(CudaNote(soname, path, found))
    return tuple(out)

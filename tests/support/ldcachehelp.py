"""The real ld.so cache tools of this machine, shared by the tests of the cache, its flags,
the loader's parameters and the sysroot scan: where ldconfig and ld.so are, how to run them
with a clean environment, and tiny libraries built with gcc."""

from __future__ import annotations

import functools
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from bazel_ldfix.loader.cacheflags import FLAG_ELF_LIBC6, FLAG_X8664_LIB64
from bazel_ldfix.loader.profile import LoaderProfile, parse_diagnostics

LDSO = "/lib64/ld-linux-x86-64.so.2"
SYSTEM_CACHE = "/etc/ld.so.cache"
X86_64 = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
LDCONFIG = shutil.which("ldconfig") or next(
    (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
)
GCC = shutil.which("gcc")

needs_ldso = pytest.mark.skipif(not os.path.exists(LDSO), reason="no x86_64 ld.so")
needs_system_cache = pytest.mark.skipif(
    not os.path.exists(SYSTEM_CACHE), reason="no /etc/ld.so.cache"
)
needs_ldconfig = pytest.mark.skipif(LDCONFIG is None, reason="no ldconfig")
needs_gcc = pytest.mark.skipif(GCC is None, reason="no gcc")


def clean_env() -> dict[str, str]:
    """The loader consults the cache only after LD_LIBRARY_PATH, so drop anything that
    changes its search."""
    env = dict(os.environ)
    for name in ("LD_LIBRARY_PATH", "LD_PRELOAD", "GLIBC_TUNABLES", "LD_DEBUG"):
        env.pop(name, None)
    return env


def run(*cmd: str) -> str:
    return subprocess.run(
        cmd, check=True, capture_output=True, text=True, env=clean_env()
    ).stdout


@functools.cache
def host_profile() -> LoaderProfile:
    return parse_diagnostics(run(LDSO, "--list-diagnostics"))


def elf_ident(path: str) -> tuple[int, int, int] | None:
    try:
        with open(path, "rb") as handle:
            header = handle.read(64)
    except OSError:
        return None
    if header[:4] != b"\x7fELF" or len(header) < 52:
        return None
    elf_class, data = header[4], header[5]
    order = "<" if data == 1 else ">"
    (machine,) = struct.unpack_from(order + "H", header, 18)
    (e_flags,) = struct.unpack_from(order + "I", header, 48 if elf_class == 2 else 36)
    return elf_class, machine, e_flags


def build_lib(path: Path, soname: str | None, value: int = 1, *extra: str) -> None:
    assert GCC is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    soname_flag = [f"-Wl,-soname,{soname}"] if soname else []
    subprocess.run(
        [GCC, "-shared", "-fPIC", *extra, *soname_flag, "-o", str(path), "-x", "c", "-"],
        input=f"int f_{abs(hash(str(path))) % 100000}(void){{return {value};}}\n",
        text=True,
        check=True,
    )


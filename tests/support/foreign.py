"""Real shared objects of other machines and classes, and other files named like libraries.

An aarch64 library is linked by GNU binutils for aarch64 (Debian's
``binutils-aarch64-linux-gnu``, which ``scripts/test.sh`` installs); a 32-bit x86 one by
the system compiler with ``-m32 -nostdlib`` (no 32-bit C library needed). Both are what
those toolchains really write, not patched headers.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

AARCH64_AS = "aarch64-linux-gnu-as"
AARCH64_LD = "aarch64-linux-gnu-ld"
LINKER_SCRIPT = "/* GNU ld script\n   Use the shared library, but some functions are only in\n" \
                "   the static library.  */\nGROUP ( libc.so.6 libc_nonshared.a )\n"


def aarch64_lib(out: Path, soname: str) -> Path:
    """An aarch64 shared library with one function, linked by aarch64 binutils."""
    return _aarch64_link(out, "-shared", "-soname", soname)


def aarch64_program(out: Path) -> Path:
    """An aarch64 position-independent executable naming aarch64 glibc's loader."""
    return _aarch64_link(out, "-pie", "-e", "f", "-dynamic-linker",
                         "/lib/ld-linux-aarch64.so.1")


def _aarch64_link(out: Path, *flags: str) -> Path:
    if shutil.which(AARCH64_AS) is None or shutil.which(AARCH64_LD) is None:
        raise RuntimeError("aarch64 binutils are missing: apt-get install "
                           "binutils-aarch64-linux-gnu (scripts/test.sh installs it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    obj = out.with_name(out.name + ".o")
    subprocess.run([AARCH64_AS, "-o", str(obj), "-"], check=True, capture_output=True,
                   input=b".text\n.globl f\n.type f, %function\nf:\n mov w0, #0\n ret\n")
    subprocess.run([AARCH64_LD, *flags, "-o", str(out), str(obj)], check=True,
                   capture_output=True)
    obj.unlink()
    return out


def i386_lib(out: Path, soname: str) -> Path:
    """A 32-bit x86 shared library with one function."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-m32", "-fPIC", "-nostdlib", "-shared", f"-Wl,-soname,{soname}",
                    "-o", str(out), "-x", "c", "-"], input=b"int f(void){return 0;}",
                   check=True, capture_output=True)
    return out


def linker_script(out: Path) -> Path:
    """What glibc installs as ``libc.so``: a text file only the linker reads."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(LINKER_SCRIPT)
    return out


def text_file(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("not a library: an HTML error page saved under the library's name\n")
    return out

"""Tiny real ELF files for tests, compiled with the system C compiler.

Every helper returns the path it wrote, so a test reads as the layout it builds:
``lib(tmp / "a" / "libx.so.1")``, ``program(tmp / "app", needs=[libx], runpath="$ORIGIN/a")``.
Decoys that the loader must skip or stop at are made by patching a real library's header,
because a cross compiler is not something a test machine can be assumed to have.
"""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path

LIB_SRC = "int f(void){return 0;}"
MAIN_SRC = "int main(void){return 0;}"
# The first lines of a Git LFS pointer: what a checkout without `git lfs pull` leaves behind.
LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 12345\n"
)

# e_ident and ELF header offsets (the same for both classes up to e_machine).
EI_CLASS, EI_DATA = 4, 5
E_MACHINE = 18
PT_DYNAMIC = 2
DT_SONAME, DT_RPATH, DT_RUNPATH = 14, 15, 29


def cc(out: Path, *flags: str, src: str = LIB_SRC, cwd: Path | None = None) -> Path:
    """Compile ``src`` into ``out`` with ``flags``; DT_NEEDED entries are kept even if unused.

    Typical flags: ``-shared``, ``-Wl,-soname,libx.so.1``, ``-Wl,-rpath,$ORIGIN`` (with
    ``-Wl,--enable-new-dtags`` for DT_RUNPATH, ``--disable-new-dtags`` for DT_RPATH),
    ``-Wl,-z,nodefaultlib``, ``-L dir -l:libx.so.1``.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["cc", "-fPIC", "-Wl,--no-as-needed", "-Wl,--allow-shlib-undefined", *flags,
           "-o", str(out), "-x", "c", "-"]
    subprocess.run(cmd, input=src.encode(), check=True, capture_output=True, cwd=cwd)
    return out


def _link_flags(needs: Sequence[Path], rpath: str | None, runpath: str | None,
                nodeflib: bool) -> list[str]:
    flags: list[str] = []
    for dep in needs:
        flags += ["-L", str(dep.parent), f"-l:{dep.name}"]
    if rpath is not None and runpath is not None:
        raise ValueError("the linker writes one of DT_RPATH and DT_RUNPATH, not both")
    if rpath is not None:
        flags += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
    if runpath is not None:
        flags += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
    if nodeflib:
        flags.append("-Wl,-z,nodefaultlib")
    return flags


def lib(out: Path, *, soname: str | None = None, needs: Sequence[Path] = (),
        rpath: str | None = None, runpath: str | None = None, nodeflib: bool = False,
        extra: Sequence[str] = ()) -> Path:
    """A shared library; ``soname`` defaults to the file name (pass "" for none)."""
    flags = ["-shared"]
    name = out.name if soname is None else soname
    if name:
        flags.append(f"-Wl,-soname,{name}")
    return cc(out, *flags, *_link_flags(needs, rpath, runpath, nodeflib), *extra)


def program(out: Path, *, needs: Sequence[Path] = (), rpath: str | None = None,
            runpath: str | None = None, nodeflib: bool = False,
            extra: Sequence[str] = ()) -> Path:
    """A position-independent executable linked against ``needs`` (and libc)."""
    return cc(out, *_link_flags(needs, rpath, runpath, nodeflib), *extra, src=MAIN_SRC)


# What NVIDIA's CUDA stubs are made of (docs/cuda.md): no DT_NEEDED at all, and every
# exported function returns 34 (CUDA_ERROR_STUB_LIBRARY): ``mov $0x22,%eax; ret`` at -O2.
STUB_FUNCTIONS = ("cuInit", "cuDriverGetVersion", "cuDeviceGetCount")


def cuda_stub(out: Path, *, soname: str = "libcuda.so.1",
              functions: Sequence[str] = STUB_FUNCTIONS, extra: Sequence[str] = ()) -> Path:
    """A look-alike of the toolkit's ``stubs/libcuda.so``, wherever ``out`` is."""
    src = "".join(f"int {name}(void){{return 34;}}\n" for name in functions)
    return cc(out, "-O2", "-shared", "-nostdlib", f"-Wl,-soname,{soname}", *extra, src=src)


def cuda_driver(out: Path, *, soname: str = "libcuda.so.1") -> Path:
    """A look-alike of a working driver (a compat driver, say): it needs libc, as the real
    one needs libc, libm, libdl, libpthread and librt, and cuInit returns 0 (CUDA_SUCCESS)."""
    src = "".join(f"int {name}(void){{return 0;}}\n" for name in STUB_FUNCTIONS)
    return cc(out, "-O2", "-shared", f"-Wl,-soname,{soname}", src=src)


def _patch(path: Path, offset: int, data: bytes) -> Path:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(data)
    return path


def patch_machine(path: Path, e_machine: int) -> Path:
    """Change e_machine (little-endian): 183 (aarch64) makes a wrong-machine decoy."""
    return _patch(path, E_MACHINE, e_machine.to_bytes(2, "little"))


def patch_class(path: Path, elf_class: int) -> Path:
    """Change EI_CLASS: 1 (ELFCLASS32) makes a wrong-class decoy out of a 64-bit library."""
    return _patch(path, EI_CLASS, bytes([elf_class]))


def patch_data(path: Path, encoding: int) -> Path:
    """Change EI_DATA: 2 (ELFDATA2MSB) makes a big-endian decoy of the right class."""
    return _patch(path, EI_DATA, bytes([encoding]))


def retag(path: Path, old: int, new: int) -> Path:
    """Change the first dynamic entry tagged ``old`` to ``new`` (64-bit little-endian only).

    The linker writes DT_RPATH or DT_RUNPATH, never both; retagging DT_SONAME (14) to
    DT_RUNPATH (29) makes an object with both, its RUNPATH being the SONAME string.
    """
    data = bytearray(path.read_bytes())
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for index in range(phnum):
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + index * phentsize)
        if p_type != PT_DYNAMIC:
            continue
        for at in range(p_offset, p_offset + p_filesz, 16):
            tag, = struct.unpack_from("<q", data, at)
            if tag == old:
                struct.pack_into("<q", data, at, new)
                path.write_bytes(bytes(data))
                return path
    raise ValueError(f"{path}: no dynamic entry with tag {old}")


def truncated(out: Path, source: Path, size: int) -> Path:
    """The first ``size`` bytes of ``source``, as a download cut short leaves it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(source.read_bytes()[:size])
    return out


def lfs_pointer(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(LFS_POINTER)
    return out


def empty(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"")
    return out

"""The flags ldconfig writes for a library and the rule the loader accepts rows by
(sysdeps/generic/ldconfig.h, dl-cache.c), checked against the real system cache."""

from __future__ import annotations

import os

from elftools.elf.elffile import ELFFile
from ldcachehelp import SYSTEM_CACHE, elf_ident, needs_system_cache

from bazel_ldfix.loader.cacheflags import (
    FLAG_AARCH64_LIB64,
    FLAG_ARM_LIBHF,
    FLAG_ELF,
    FLAG_ELF_LIBC6,
    FLAG_X8664_LIBX32,
    expected_flags,
    loader_flag_rule,
)
from bazel_ldfix.loader.ldcache import read_cache
from bazel_ldfix.machines import EM_386, EM_AARCH64, EM_ARM, EM_PPC64, EM_RISCV, EM_S390, EM_X86_64


def _uses_glibc(path: str) -> bool:
    """Whether ldconfig counts ``path`` as a libc6 object: it needs libc.so.6 or libm.so.6,
    or names a glibc program interpreter (read with pyelftools, not the project's reader)."""
    with open(path, "rb") as handle:
        elf = ELFFile(handle)
        dynamic = elf.get_section_by_name(".dynamic")
        needed = ({t.needed for t in dynamic.iter_tags("DT_NEEDED")}
                  if dynamic is not None else set())
        interp = next((seg.get_interp_name() for seg in elf.iter_segments()
                       if seg["p_type"] == "PT_INTERP"), "")
    return bool(needed & {"libc.so.6", "libm.so.6"}) or os.path.basename(interp).startswith(
        ("ld-linux", "ld64.so", "ld.so"))


@needs_system_cache
def test_system_cache_flags_are_what_expected_flags_predicts() -> None:
    checked = 0
    for entry in read_cache(SYSTEM_CACHE).entries:
        ident = elf_ident(entry.path)
        if ident is None:
            continue
        assert expected_flags(*ident, libc6=_uses_glibc(entry.path)) == entry.flags, entry
        checked += 1
    assert checked > 0


def test_expected_flags_and_loader_rules() -> None:
    assert expected_flags(2, EM_X86_64) == 0x0303
    assert expected_flags(1, EM_X86_64) == FLAG_ELF_LIBC6 | FLAG_X8664_LIBX32
    assert expected_flags(1, EM_386) == FLAG_ELF_LIBC6
    assert expected_flags(1, EM_386, libc6=False) == FLAG_ELF
    assert expected_flags(2, EM_X86_64, libc6=False) == 0x0303  # x86 always adds its ABI
    assert expected_flags(2, EM_AARCH64) == FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
    assert expected_flags(1, EM_ARM, 0x400) == FLAG_ELF_LIBC6 | FLAG_ARM_LIBHF
    assert expected_flags(1, EM_ARM) == FLAG_ELF_LIBC6
    assert expected_flags(2, EM_PPC64) == 0x0503
    assert expected_flags(2, EM_S390) == 0x0403
    assert expected_flags(2, EM_RISCV, 0x4) == 0x1003
    assert expected_flags(2, 0x9999) == FLAG_ELF_LIBC6
    x86 = loader_flag_rule(2, EM_X86_64)
    assert x86(0x0303) and not x86(0x0003) and not x86(0x0001)
    i386 = loader_flag_rule(1, EM_386)
    assert i386(1) and i386(3) and not i386(0x0303)
    armhf = loader_flag_rule(1, EM_ARM, 0x400)
    assert armhf(0x0903) and armhf(3) and not armhf(0x0B03)


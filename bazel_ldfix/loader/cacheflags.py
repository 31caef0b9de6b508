"""The ``FLAG_*`` of ld.so.cache rows: what ldconfig records for an object, and what each
loader accepts (glibc 2.36: sysdeps/generic/ldconfig.h, elf/cache.c, and the
per-architecture dl-cache.h files, ``_dl_cache_check_flags``)."""

from __future__ import annotations

import functools
import os
import re
import struct
from dataclasses import dataclass

from bazel_ldfix import machines
from bazel_ldfix.machines import (
    EF_ARM_ABI_FLOAT_HARD,
    EF_ARM_ABI_FLOAT_SOFT,
    EF_LARCH_ABI_DOUBLE_FLOAT,
    EF_LARCH_ABI_MODIFIER_MASK,
    EF_LARCH_ABI_SOFT_FLOAT,
    EF_MIPS_ABI2,
    EF_MIPS_NAN2008,
    EF_RISCV_FLOAT_ABI,
    EF_RISCV_FLOAT_ABI_DOUBLE,
    ELFCLASS64,
    EM_AARCH64,
    EM_ARM,
    EM_IA_64,
    EM_LOONGARCH,
    EM_MIPS,
    EM_PPC64,
    EM_RISCV,
    EM_S390,
    EM_SPARCV9,
    EM_X86_64,
)

# --- flags (sysdeps/generic/ldconfig.h) --------------------------------------------------
# The low byte is the library type. The high byte says which ABI variant the object needs.
FLAG_ELF = 0x0001
FLAG_ELF_LIBC6 = 0x0003
FLAG_SPARC_LIB64 = 0x0100
FLAG_IA64_LIB64 = 0x0200
FLAG_X8664_LIB64 = 0x0300
FLAG_S390_LIB64 = 0x0400
FLAG_POWERPC_LIB64 = 0x0500
FLAG_MIPS64_LIBN32 = 0x0600
FLAG_MIPS64_LIBN64 = 0x0700
FLAG_X8664_LIBX32 = 0x0800
FLAG_ARM_LIBHF = 0x0900
FLAG_AARCH64_LIB64 = 0x0A00
FLAG_ARM_LIBSF = 0x0B00
FLAG_MIPS_LIB32_NAN2008 = 0x0C00
FLAG_MIPS64_LIBN32_NAN2008 = 0x0D00
FLAG_MIPS64_LIBN64_NAN2008 = 0x0E00
FLAG_RISCV_FLOAT_ABI_SOFT = 0x0F00
FLAG_RISCV_FLOAT_ABI_DOUBLE = 0x1000
FLAG_LARCH_FLOAT_ABI_SOFT = 0x1100
FLAG_LARCH_FLOAT_ABI_DOUBLE = 0x1200


@dataclass(frozen=True)
class FlagRule:
    """``_dl_cache_check_flags`` for one loader, plus its ``_DL_CACHE_DEFAULT_ID``.

    The default matters because the loader stops scanning equal keys at a plain row whose
    flags equal it exactly. In the old format, a row that is merely acceptable does not stop
    the scan, so a later acceptable row replaces it.
    """

    default: int
    also: tuple[int, ...] = ()

    def __call__(self, flags: int) -> bool:
        return flags == self.default or flags in self.also


_GENERIC_RULE = FlagRule(FLAG_ELF_LIBC6, (FLAG_ELF,))


# The machine numbers and e_flags bits are in :mod:`bazel_ldfix.machines`.


def expected_flags(elf_class: int, machine: int, e_flags: int = 0, *,
                   libc6: bool = True) -> int:
    """The flags ldconfig records for a shared object with this ELF class, e_machine and
    e_flags (e.g. x86_64 -> 0x0303, i386 -> 0x0003, aarch64 -> 0x0a03).

    Architectures without their own ldconfig rule get the generic type: ``FLAG_ELF_LIBC6``
    for an object that uses glibc (it needs ``libc.so.6`` or ``libm.so.6``, or names a
    glibc program interpreter), plain ``FLAG_ELF`` otherwise (``libc6=False``: i386's
    ``ld-linux.so.2`` itself, say). The generic loader rule accepts both.
    """
    arch = _arch_flag(elf_class, machine, e_flags)
    if arch is not None:
        return FLAG_ELF_LIBC6 | arch
    return FLAG_ELF_LIBC6 if libc6 else FLAG_ELF


def _arch_flag(elf_class: int, machine: int, e_flags: int) -> int | None:
    """High-byte ``FLAG_*`` for an object, or None where glibc uses the generic rule."""
    wide = elf_class == ELFCLASS64
    if machine == EM_X86_64:
        return FLAG_X8664_LIB64 if wide else FLAG_X8664_LIBX32
    if machine == EM_AARCH64 and wide:
        return FLAG_AARCH64_LIB64
    if machine == EM_PPC64 and wide:
        return FLAG_POWERPC_LIB64
    if machine == EM_S390 and wide:
        return FLAG_S390_LIB64
    if machine == EM_SPARCV9 and wide:
        return FLAG_SPARC_LIB64
    if machine == EM_IA_64 and wide:
        return FLAG_IA64_LIB64
    if machine == EM_ARM:
        if e_flags & EF_ARM_ABI_FLOAT_HARD:
            return FLAG_ARM_LIBHF
        if e_flags & EF_ARM_ABI_FLOAT_SOFT:
            return FLAG_ARM_LIBSF
        return None
    if machine == EM_MIPS:
        nan2008 = bool(e_flags & EF_MIPS_NAN2008)
        if wide:
            return FLAG_MIPS64_LIBN64_NAN2008 if nan2008 else FLAG_MIPS64_LIBN64
        if e_flags & EF_MIPS_ABI2:
            return FLAG_MIPS64_LIBN32_NAN2008 if nan2008 else FLAG_MIPS64_LIBN32
        return FLAG_MIPS_LIB32_NAN2008 if nan2008 else None
    if machine == EM_RISCV:
        double = (e_flags & EF_RISCV_FLOAT_ABI) == EF_RISCV_FLOAT_ABI_DOUBLE
        return FLAG_RISCV_FLOAT_ABI_DOUBLE if double else FLAG_RISCV_FLOAT_ABI_SOFT
    if machine == EM_LOONGARCH:
        modifier = e_flags & EF_LARCH_ABI_MODIFIER_MASK
        if modifier == EF_LARCH_ABI_DOUBLE_FLOAT:
            return FLAG_LARCH_FLOAT_ABI_DOUBLE
        if modifier == EF_LARCH_ABI_SOFT_FLOAT:
            return FLAG_LARCH_FLOAT_ABI_SOFT
        return None
    return None


def loader_flag_rule(elf_class: int, machine: int, e_flags: int = 0) -> FlagRule:
    """``_dl_cache_check_flags`` for the loader of an object with this class and machine.

    Most 64-bit ports accept only their exact ID. The generic rule (i386, ppc32, s390,
    sparc32, mips o32 and any port without its own dl-cache.h) accepts 1 or 3. ARM also
    accepts unmarked objects (3) next to its float-ABI ID; an ARM object with no float-ABI
    bit is treated as hard-float.
    """
    if machine == EM_ARM:
        soft = bool(e_flags & EF_ARM_ABI_FLOAT_SOFT)
        float_abi = FLAG_ARM_LIBSF if soft else FLAG_ARM_LIBHF
        return FlagRule(FLAG_ELF_LIBC6, (FLAG_ELF_LIBC6 | float_abi,))
    arch = _arch_flag(elf_class, machine, e_flags)
    return _GENERIC_RULE if arch is None else FlagRule(FLAG_ELF_LIBC6 | arch)


@functools.cache
def host_flag_rule() -> FlagRule:
    """The flag rule of the loader that runs this interpreter (by ``uname -m`` and pointer
    size). This is the default when :meth:`LdCache.lookup` gets no ``flags_ok``."""
    machine = os.uname().machine.lower()
    wide = struct.calcsize("P") == 8
    for row in machines.HOST_MACHINES:
        if re.fullmatch(row.uname, machine):
            return loader_flag_rule(*(row.wide if wide else row.narrow))
    return _GENERIC_RULE



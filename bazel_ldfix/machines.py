"""The one table of machines: ELF class and e_machine, their names, their loaders.

The ELF reader names a file's machine, the host probe picks the standard program
interpreter of a class and machine, and the cache reader maps the running loader's name
and ``uname -m`` to the ABI flags ldconfig records. All of them read this table.
The numbers are the ELF specification's; the paths are glibc's (each port's
``sysdeps/unix/sysv/linux/*/ldsodefs.h`` and ``shlib-versions``).
"""

from __future__ import annotations

from dataclasses import dataclass

ELFCLASS32, ELFCLASS64 = 1, 2

EM_SPARC = 2
EM_386 = 3
EM_MIPS = 8
EM_SPARC32PLUS = 18
EM_PPC = 20
EM_PPC64 = 21
EM_S390 = 22
EM_ARM = 40
EM_SPARCV9 = 43
EM_IA_64 = 50
EM_X86_64 = 62
EM_AARCH64 = 183
EM_RISCV = 243
EM_LOONGARCH = 258

EF_ARM_ABI_FLOAT_SOFT = 0x200
EF_ARM_ABI_FLOAT_HARD = 0x400
EF_MIPS_ABI2 = 0x20
EF_MIPS_NAN2008 = 0x400
EF_RISCV_FLOAT_ABI = 0x6
EF_RISCV_FLOAT_ABI_DOUBLE = 0x4
EF_LARCH_ABI_MODIFIER_MASK = 0x7
EF_LARCH_ABI_DOUBLE_FLOAT = 0x3
EF_LARCH_ABI_SOFT_FLOAT = 0x1

NAMES = {EM_SPARC: "sparc", EM_386: "i386", EM_MIPS: "mips", EM_SPARC32PLUS: "sparc32plus",
         EM_PPC: "ppc", EM_PPC64: "ppc64", EM_S390: "s390", EM_ARM: "arm",
         EM_SPARCV9: "sparcv9", EM_IA_64: "ia64", EM_X86_64: "x86-64",
         EM_AARCH64: "aarch64", EM_RISCV: "riscv", EM_LOONGARCH: "loongarch"}


def name(machine: int) -> str:
    """A person's name for an e_machine value."""
    return NAMES.get(machine, f"machine {machine}")


@dataclass(frozen=True)
class Loader:
    """glibc's program interpreter for one class, machine and float ABI."""

    path: str
    elf_class: int
    machine: int
    e_flags: int = 0

    @property
    def soname(self) -> str:
        return self.path.rsplit("/", 1)[-1]


# The first row of a class and machine is its standard loader.
LOADERS: tuple[Loader, ...] = (
    Loader("/lib64/ld-linux-x86-64.so.2", ELFCLASS64, EM_X86_64),
    Loader("/libx32/ld-linux-x32.so.2", ELFCLASS32, EM_X86_64),
    Loader("/lib/ld-linux.so.2", ELFCLASS32, EM_386),
    Loader("/lib/ld-linux-aarch64.so.1", ELFCLASS64, EM_AARCH64),
    Loader("/lib/ld-linux-armhf.so.3", ELFCLASS32, EM_ARM, EF_ARM_ABI_FLOAT_HARD),
    Loader("/lib/ld-linux.so.3", ELFCLASS32, EM_ARM, EF_ARM_ABI_FLOAT_SOFT),
    Loader("/lib64/ld64.so.2", ELFCLASS64, EM_PPC64),
    Loader("/lib/ld-linux-riscv64-lp64d.so.1", ELFCLASS64, EM_RISCV,
           EF_RISCV_FLOAT_ABI_DOUBLE),
    Loader("/lib/ld-linux-riscv64-lp64.so.1", ELFCLASS64, EM_RISCV),
    Loader("/lib64/ld-linux-loongarch-lp64d.so.1", ELFCLASS64, EM_LOONGARCH,
           EF_LARCH_ABI_DOUBLE_FLOAT),
)


def standard_loader(elf_class: int, machine: int) -> Loader | None:
    """The usual program interpreter of objects of this class and machine, if known."""
    return next((ld for ld in LOADERS if (ld.elf_class, ld.machine) == (elf_class, machine)),
                None)


def loader_named(soname: str) -> Loader | None:
    """The loader whose file is called ``soname`` (``ld-linux-x86-64.so.2``), if known."""
    return next((ld for ld in LOADERS if ld.soname == soname), None)


@dataclass(frozen=True)
class HostMachine:
    """What a ``uname -m`` pattern runs natively, for 64-bit and 32-bit processes."""

    uname: str              # a regular expression over ``uname -m``, lower case
    wide: tuple[int, int, int]     # (class, machine, e_flags) of a 64-bit process
    narrow: tuple[int, int, int]   # of a 32-bit one


HOST_MACHINES: tuple[HostMachine, ...] = (
    HostMachine(r"x86_64|amd64", (ELFCLASS64, EM_X86_64, 0), (ELFCLASS32, EM_386, 0)),
    HostMachine(r"i[3-6]86|x86", (ELFCLASS32, EM_386, 0), (ELFCLASS32, EM_386, 0)),
    HostMachine(r"aarch64|arm64", (ELFCLASS64, EM_AARCH64, 0), (ELFCLASS32, EM_ARM, 0)),
    HostMachine(r"arm.*", (ELFCLASS32, EM_ARM, EF_ARM_ABI_FLOAT_HARD),
                (ELFCLASS32, EM_ARM, EF_ARM_ABI_FLOAT_HARD)),
    HostMachine(r"ppc64.*", (ELFCLASS64, EM_PPC64, 0), (ELFCLASS32, EM_PPC, 0)),
    HostMachine(r"ppc|powerpc", (ELFCLASS32, EM_PPC, 0), (ELFCLASS32, EM_PPC, 0)),
    HostMachine(r"s390x?", (ELFCLASS64, EM_S390, 0), (ELFCLASS32, EM_S390, 0)),
    HostMachine(r"riscv.*", (ELFCLASS64, EM_RISCV, EF_RISCV_FLOAT_ABI_DOUBLE),
                (ELFCLASS32, EM_RISCV, EF_RISCV_FLOAT_ABI_DOUBLE)),
    HostMachine(r"loongarch.*", (ELFCLASS64, EM_LOONGARCH, EF_LARCH_ABI_DOUBLE_FLOAT),
                (ELFCLASS32, 0, 0)),
    HostMachine(r"sparc.*", (ELFCLASS64, EM_SPARCV9, 0), (ELFCLASS32, EM_SPARC, 0)),
    HostMachine(r"mips.*", (ELFCLASS64, EM_MIPS, 0), (ELFCLASS32, EM_MIPS, 0)),
)

"""The running loader's own parameters for cache lookups, from ``ld.so --list-diagnostics``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bazel_ldfix import machines
from bazel_ldfix.loader.cacheflags import FlagRule, host_flag_rule, loader_flag_rule
from bazel_ldfix.loader.ldcache import _U64, NO_LEGACY_HWCAPS, LegacyHwcaps
from bazel_ldfix.machines import ELFCLASS64, EM_PPC64, EM_S390

if TYPE_CHECKING:
    from bazel_ldfix.loader.ldcache import LdCache


@dataclass(frozen=True)
class LoaderProfile:
    """Everything :meth:`LdCache.lookup` needs to answer like one particular ld.so."""

    hwcaps_active: tuple[str, ...] = ()
    isa_1: int | None = None
    legacy: LegacyHwcaps = NO_LEGACY_HWCAPS
    flags_ok: FlagRule = field(default_factory=lambda: host_flag_rule())
    version: str | None = None

    def lookup(self, cache: LdCache, soname: str) -> str | None:
        """``cache.lookup`` with this loader's parameters."""
        return cache.lookup(
            soname,
            flags_ok=self.flags_ok,
            hwcaps_active=self.hwcaps_active,
            isa_1=self.isa_1,
            legacy_hwcaps=self.legacy,
        )


_DIAG_LINE = re.compile(r'^([A-Za-z0-9_.\[\]]+)=(?:"(.*)"|(\S+))$')


def parse_diagnostics(text: str) -> LoaderProfile:
    """Build a :class:`LoaderProfile` from ``ld.so --list-diagnostics`` output (glibc >= 2.33).

    ``dl_hwcaps_subdirs`` lists the subdirectories in preference order. Bit *i* of
    ``dl_hwcaps_subdirs_active`` enables element *i*. The legacy hwcap mask is taken as
    ``dl_hwcap & dl_hwcap_important``, the default of the ``glibc.cpu.hwcap_mask`` tunable.
    A ``GLIBC_TUNABLES`` override does not show in this output.
    """
    strings: dict[str, str] = {}
    numbers: dict[str, int] = {}
    for line in text.splitlines():
        match = _DIAG_LINE.match(line.strip())
        if not match:
            continue
        key, quoted, bare = match.groups()
        if quoted is not None:
            strings[key] = quoted
        else:
            try:
                numbers[key] = int(bare, 0)
            except ValueError:
                strings[key] = bare
    subdirs = [s for s in strings.get("dl_hwcaps_subdirs", "").split(":") if s]
    mask = numbers.get("dl_hwcaps_subdirs_active", 0)
    active = tuple(name for i, name in enumerate(subdirs) if mask >> i & 1)
    machine = strings.get("uname.machine", "")
    x86 = bool(re.fullmatch(r"x86_64|i[3-6]86", machine))
    raw_platform = numbers.get("dl_string_platform", _U64) & _U64
    legacy = LegacyHwcaps(
        hwcap=numbers.get("dl_hwcap", 0) & numbers.get("dl_hwcap_important", 0),
        platform_mask=(0xF << 48) if x86 else 0,
        platform=None if raw_platform == _U64 else raw_platform,
    )
    rule = host_flag_rule()
    ld_name = strings.get("dso.ld", "")
    known = machines.loader_named(ld_name)
    if known is not None:
        rule = loader_flag_rule(known.elf_class, known.machine, known.e_flags)
    else:
        if ld_name == "ld64.so.1":
            rule = loader_flag_rule(
                ELFCLASS64, EM_S390 if machine.startswith("s390") else EM_PPC64, 0
            )
    return LoaderProfile(
        hwcaps_active=active,
        isa_1=numbers.get("x86.cpu_features.isa_1"),
        legacy=legacy,
        flags_ok=rule,
        version=strings.get("version.version"),
    )

"""The running loader's parameters, read from ``ld.so --list-diagnostics``."""

from __future__ import annotations

import re

from ldcachehelp import LDSO, X86_64, host_profile, needs_ldso, run

from bazel_ldfix.loader.cacheflags import FlagRule
from bazel_ldfix.loader.ldcache import LegacyHwcaps
from bazel_ldfix.loader.profile import parse_diagnostics


def test_parse_diagnostics_reads_the_active_subdirectories() -> None:
    text = (
        'dl_hwcap=0x2\ndl_hwcap_important=0x6\ndl_hwcaps_subdirs="a:b:c"\n'
        "dl_hwcaps_subdirs_active=0x6\ndl_string_platform=0x32\n"
        'dso.ld="ld-linux.so.2"\nuname.machine="i686"\nversion.version="2.36"\n'
    )
    profile = parse_diagnostics(text)
    assert profile.hwcaps_active == ("b", "c")
    assert profile.legacy == LegacyHwcaps(hwcap=0x2, platform_mask=0xF << 48, platform=0x32)
    assert profile.flags_ok(3) and profile.flags_ok(1)
    assert profile.isa_1 is None
    assert profile.version == "2.36"


@needs_ldso
def test_parse_diagnostics_of_this_loader() -> None:
    profile = host_profile()
    out = run(LDSO, "--list-diagnostics")
    subdirs = re.search(r'^dl_hwcaps_subdirs="([^"]*)"', out, re.M)
    assert subdirs is not None
    assert set(profile.hwcaps_active) <= set(subdirs.group(1).split(":"))
    assert profile.flags_ok == FlagRule(X86_64)
    assert profile.version is not None


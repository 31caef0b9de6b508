"""ld.so.conf and the sysroot scan, checked against what the real ``ldconfig -r`` writes."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from ldcachehelp import (
    LDCONFIG,
    LDSO,
    build_lib,
    host_profile,
    needs_gcc,
    needs_ldconfig,
    run,
)

from bazel_ldfix.loader import host
from bazel_ldfix.loader.ldcache import CacheFormat, read_cache
from bazel_ldfix.loader.ldconfig import conf_dirs, scan_sysroot, search_dirs


def _soname_of(path: str) -> str | None:
    """The ELF hook scan_sysroot wants. pyelftools stands in for the project's elf.py."""
    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            if elf.elfclass != 64 or elf["e_machine"] != "EM_X86_64":
                return None
            if elf["e_type"] != "ET_DYN":
                return None
            for segment in elf.iter_segments():
                if isinstance(segment, DynamicSegment):
                    for tag in segment.iter_tags():
                        if tag.entry.d_tag == "DT_SONAME":
                            return str(tag.soname)
                    return ""
            return None
    except (OSError, ELFError):
        return None


def _make_sysroot(root: Path) -> None:
    etc = root / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True)
    (etc / "sub").mkdir()
    (etc / "ld.so.conf").write_text(
        "# comment line\n"
        "include /etc/ld.so.conf.d/*.conf\n"
        "  /opt/one/   # trailing slash, spaces and a comment\n"
        "/opt/alias\n"
        "hwcap 0 nosegneg\n"
        "HWCAP\t1 other\n"
        "/opt/missing\n"
        "/opt/typed=libc6\n"
        "include\tsub/*.conf  /etc/none/*.conf\n"
        "\n"
    )
    (etc / "ld.so.conf.d" / "b.conf").write_text("/opt/one\n")
    (etc / "ld.so.conf.d" / "a.conf").write_text("/opt/two\n")
    (etc / "ld.so.conf.d" / ".hidden.conf").write_text("/opt/hidden\n")
    (etc / "ld.so.conf.d" / "c.txt").write_text("/opt/hidden\n")
    (etc / "sub" / "x.conf").write_text("/opt/three\n")

    one, two = root / "opt/one", root / "opt/two"
    build_lib(one / "libfoo.so.1.2.3", "libfoo.so.1")
    build_lib(one / "libfoo.so.1.2.0", "libfoo.so.1")
    (one / "libfoo.so.1").symlink_to("libfoo.so.1.2.3")
    (one / "libfoo.so").symlink_to("libfoo.so.1")
    build_lib(one / "libnoso.so", None)
    (one / "libnotelf.so.1").write_text("INPUT(-lfoo)\n")
    (one / "libabs.so.1").symlink_to("/opt/two/libreal.so.1")
    (one / "libdangling.so.1").symlink_to("/opt/nowhere/libx.so.1")
    (one / "notalib.so.1").write_bytes((one / "libfoo.so.1.2.3").read_bytes())
    (one / "libtmp.so.1.dpkg-new").write_bytes((one / "libfoo.so.1.2.3").read_bytes())
    build_lib(one / "glibc-hwcaps/x86-64-v2/libfoo.so.1.2.3", "libfoo.so.1")
    build_lib(one / "glibc-hwcaps/x86-64-v3/libfoo-fast.so.7", "libfoo.so.1")
    build_lib(two / "libreal.so.1", "libreal.so.1")
    build_lib(two / "libbar.so.2", "libbar.so.2")
    build_lib(two / "libbar.so.10", "libbar.so.10")
    build_lib(two / "libfoo.so.1", "libfoo.so.1")
    (root / "opt/alias").symlink_to("/opt/two")
    build_lib(root / "opt/typed/libtyped.so.1", "libtyped.so.1")
    build_lib(root / "opt/three/libthree.so.1", "libthree.so.1")
    build_lib(root / "usr/lib/x86_64-linux-gnu/libsys.so.1", "libsys.so.1")
    build_lib(root / "usr/lib/libold.so.5", "libold.so.5")
    (root / "lib").symlink_to("usr/lib")  # merged /usr: /lib/* aliases /usr/lib/*


def test_conf_dirs_order_includes_and_noise(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    etc = root / "etc"
    etc.mkdir()
    (etc / "ld.so.conf").write_text(
        "include /etc/ld.so.conf.d/*.conf\n/opt/one/\n/opt/one\n#/opt/commented\n"
        "hwcap 1 x\n/opt/typed=libc5\ninclude rel/*.conf\n/opt/with space  \n"
    )
    (etc / "ld.so.conf.d").mkdir()
    (etc / "ld.so.conf.d" / "10-b.conf").write_text("/opt/b\n")
    (etc / "ld.so.conf.d" / "01-a.conf").write_text("/opt/a\ninclude /etc/ld.so.conf\n")
    (etc / "rel").mkdir()
    (etc / "rel" / "r.conf").write_text("/opt/r\n")
    assert conf_dirs(str(root)) == (
        "/opt/a", "/opt/b", "/opt/one", "/opt/typed", "/opt/r", "/opt/with space",
    )
    assert conf_dirs(str(root), "etc/nothing.conf") == ()


def test_conf_dirs_follows_symlinks_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "one.conf").write_text("/opt/from-link\n")
    (root / "etc").mkdir()
    (root / "etc" / "conf.d").symlink_to("/real")  # absolute: must stay inside root
    (root / "etc" / "ld.so.conf").write_text("include /etc/conf.d/*.conf\n")
    assert conf_dirs(str(root)) == ("/opt/from-link",)


def _builtin_dirs() -> tuple[str, ...]:
    """ldconfig's built-in directories: this machine's loader's system search path."""
    return host.probe(LDSO).system_dirs


def _hwcaps_runs_sorted(paths: list[str]) -> list[str]:
    out: list[str] = []
    for is_hwcaps, group in itertools.groupby(paths, key=lambda p: "/glibc-hwcaps/" in p):
        run = list(group)
        out.extend(sorted(run) if is_hwcaps else run)
    return out


@needs_gcc
@needs_ldconfig
def test_scan_sysroot_builds_what_ldconfig_writes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _make_sysroot(root)
    assert LDCONFIG is not None
    verbose = run(LDCONFIG, "-v", "-N", "-X", "-r", str(root))
    scanned_dirs = re.findall(r"^(/.*?): \((?:hwcap:|from) ", verbose, re.M)
    # ldconfig lists a directory's glibc-hwcaps subdirectories in readdir order, and we list
    # them by name. Rows are sorted by hwcaps name anyway, so only the grouping is compared.
    ours = search_dirs(str(root), trusted_dirs=_builtin_dirs())
    assert _hwcaps_runs_sorted([d.path for d in ours]) == _hwcaps_runs_sorted(scanned_dirs)

    run(LDCONFIG, "-X", "-r", str(root))
    real = read_cache(root / "etc" / "ld.so.cache")
    built = scan_sysroot(str(root), soname_of=_soname_of, trusted_dirs=_builtin_dirs(),
                         flags=host_profile().flags_ok.default)
    assert [(e.soname, e.path, e.flags, e.hwcaps) for e in built.entries] == [
        (e.soname, e.path, e.flags, e.hwcaps) for e in real.entries
    ]
    assert built.hwcaps_subdirs == real.hwcaps_subdirs
    assert [e.hwcap for e in built.entries] == [e.hwcap for e in real.entries]
    assert built.format is CacheFormat.SCANNED
    for soname in {e.soname for e in real.entries} | {"libmissing.so.1"}:
        for active in ((), ("x86-64-v3", "x86-64-v2"), ("x86-64-v2",)):
            assert built.lookup(soname, hwcaps_active=active) == real.lookup(
                soname, hwcaps_active=active
            ), (soname, active)

    # Spot checks of ldconfig's rules, now that the two tables are known to be equal.
    rows = {(e.soname, e.path) for e in built.entries}
    assert ("libfoo.so", "/opt/one/libfoo.so") in rows  # the dev link gets its own row
    assert ("libnoso.so", "/opt/one/libnoso.so") in rows  # no SONAME: keyed by file name
    assert ("libreal.so.1", "/opt/one/libreal.so.1") in rows  # a foreign link counts as a file
    assert ("libfoo.so.1", "/opt/one/glibc-hwcaps/x86-64-v3/libfoo-fast.so.7") in rows
    assert not any("alias" in path or "notelf" in path for _, path in rows)
    assert built.lookup("libfoo.so.1") == "/opt/two/libfoo.so.1"  # conf.d came first
    assert "/opt/one" in built.directories()


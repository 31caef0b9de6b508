"""Tests for bazel_ldfix.loader.ldcache against real files, the real ldconfig and the real ld.so.

Ground truth comes from the system wherever possible. ``ldconfig -p`` checks the parser,
``ld.so --list`` checks lookup, and ``ldconfig -r ROOT`` checks the sysroot scanner. To make
the real loader read a private cache, we bind-mount that cache over /etc/ld.so.cache inside
a private mount namespace (``unshare -m``). The host never sees the mount. Those tests are
skipped when namespaces are unavailable.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSegment
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ldcachehelp import (
    GCC,
    LDCONFIG,
    LDSO,
    SYSTEM_CACHE,
    X86_64,
    build_lib,
    elf_ident,
    host_profile,
    needs_gcc,
    needs_ldconfig,
    needs_ldso,
    needs_system_cache,
    run,
)

from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.cacheflags import FLAG_ELF, FLAG_ELF_LIBC6, FlagRule
from bazel_ldfix.loader.ldcache import (
    DL_CACHE_HWCAP_EXTENSION,
    NO_LEGACY_HWCAPS,
    CacheEntry,
    CacheFormat,
    LdCache,
    LegacyHwcaps,
    libcmp,
    parse_cache,
    read_cache,
)
from bazel_ldfix.machines import EM_386, EM_X86_64

# --- helpers ----------------------------------------------------------------------------


_LDCONFIG_ROW = re.compile(r"^\t(\S+) \((.*)\) => (.*)$")


def _ldconfig_listing(cache: str | None = None) -> list[tuple[str, str, str | None]]:
    """(soname, path, hwcaps name) rows in the order ``ldconfig -p`` prints them (file order)."""
    assert LDCONFIG is not None
    out = run(LDCONFIG, "-p", *(("-C", cache) if cache else ()))
    rows = []
    for line in out.splitlines():
        match = _LDCONFIG_ROW.match(line)
        if match:
            hwcaps = re.search(r'hwcap: "([^"]*)"', match.group(2))
            rows.append((match.group(1), match.group(3), hwcaps.group(1) if hwcaps else None))
    return rows


_LIST_ROW = re.compile(r"^\t(\S+) => (\S+) \(0x[0-9a-f]+\)$")


def _loader_list(program: str, cache: str | None = None) -> dict[str, str]:
    """``ld.so --list`` as {soname: path}. With ``cache``, the loader runs in a private mount
    namespace where that file is bind-mounted over /etc/ld.so.cache."""
    if cache is None:
        out = run(LDSO, "--list", program)
    else:
        script = 'mount --bind "$1" /etc/ld.so.cache && exec "$2" --list "$3"'
        out = run("unshare", "-m", "sh", "-c", script, "sh", cache, LDSO, program)
    return {m.group(1): m.group(2) for m in map(_LIST_ROW.match, out.splitlines()) if m}


@functools.cache
def _can_bind_mount_cache() -> bool:
    if shutil.which("unshare") is None or not os.path.exists(SYSTEM_CACHE):
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$1"', "sh", SYSTEM_CACHE],
        capture_output=True,
    )
    return probe.returncode == 0


needs_private_loader = pytest.mark.skipif(
    not _can_bind_mount_cache(), reason="cannot bind-mount a private cache (needs unshare -m)"
)


def _build_program(path: Path, libs: list[Path]) -> None:
    """A program whose DT_NEEDED lists each library's SONAME. It has no RPATH, so ld.so
    falls through to the cache."""
    assert GCC is not None
    link = [arg for lib in libs for arg in (f"-L{lib.parent}", f"-l:{lib.name}")]
    subprocess.run(
        [GCC, "-o", str(path), "-x", "c", "-", "-Wl,--no-as-needed", *link],
        input="int main(void){return 0;}\n",
        text=True,
        check=True,
    )


class MirrorRoot:
    """A sysroot for ``ldconfig -r`` whose library paths are also valid host paths.

    Files live in ``root/<host>/...``, and ``<host>`` is a symlink to that subtree. ldconfig
    (chrooted) records ``<host>/...`` paths, and the host loader can open them.
    """

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "root"
        self.host = tmp / "libs"
        self.inner = Path(str(self.root) + str(self.host))
        self.inner.mkdir(parents=True)
        self.host.symlink_to(self.inner)
        (self.root / "etc").mkdir()

    def lib(self, rel: str, soname: str | None, *extra: str) -> Path:
        build_lib(self.inner / rel, soname, 1, *extra)
        return self.host / rel

    def conf(self, *dirs: str) -> None:
        text = "".join(f"{self.host / d}\n" for d in dirs)
        (self.root / "etc" / "ld.so.conf").write_text(text)

    def ldconfig(self, *args: str) -> str:
        assert LDCONFIG is not None
        run(LDCONFIG, "-X", "-r", str(self.root), *args)
        return str(self.root / "etc" / "ld.so.cache")


# --- the real system cache ---------------------------------------------------------------


@needs_system_cache
@needs_ldconfig
def test_system_cache_matches_ldconfig_listing() -> None:
    cache = read_cache(SYSTEM_CACHE)
    ours = [(e.soname, e.path, e.hwcaps) for e in cache.entries]
    assert ours == _ldconfig_listing()
    assert cache.path == SYSTEM_CACHE
    generated = re.search(r"^Cache generated by: (.*)$", run(LDCONFIG or "", "-p"), re.M)
    assert cache.generator == (generated.group(1) if generated else None)


@needs_system_cache
def test_system_cache_is_sorted_the_way_libcmp_orders_keys() -> None:
    keys = [os.fsencode(e.soname) for e in read_cache(SYSTEM_CACHE).entries]
    assert all(libcmp(a, b) >= 0 for a, b in itertools.pairwise(keys))


def _programs_without_rpath() -> Iterator[str]:
    for program in ("/bin/ls", "/usr/bin/python3", "/usr/bin/ssh", "/usr/bin/curl",
                    "/usr/bin/git", "/usr/bin/gcc", "/usr/bin/perl"):
        if not os.path.exists(program):
            continue
        with open(program, "rb") as handle:
            tags = {
                tag.entry.d_tag
                for segment in ELFFile(handle).iter_segments()
                if isinstance(segment, DynamicSegment)
                for tag in segment.iter_tags()
            }
        if not tags & {"DT_RPATH", "DT_RUNPATH"}:
            yield program


@needs_ldso
@needs_system_cache
@pytest.mark.parametrize("program", list(_programs_without_rpath()))
def test_lookup_agrees_with_the_real_loader(program: str) -> None:
    cache = read_cache(SYSTEM_CACHE)
    profile = host_profile()
    listed = _loader_list(program)
    assert listed, "ld.so --list printed no libraries"
    for soname, path in listed.items():
        assert profile.lookup(cache, soname) == path, soname
        # Every row on this system is plain, so the default parameters must agree as well.
        assert cache.lookup(soname) == path, soname


@needs_ldconfig
@needs_system_cache
def test_lookup_misses_and_flag_mismatch() -> None:
    cache = read_cache(SYSTEM_CACHE)
    assert cache.lookup("libdefinitely-not-here.so.42") is None
    assert cache.lookup("") is None
    libc = cache.lookup("libc.so.6", flags_ok=X86_64)
    assert libc is not None
    assert (elf_ident(libc) or (0, 0, 0))[:2] == (2, EM_X86_64)
    # An i386 loader's rule selects only an i386 row: this system's 32-bit libc, if any.
    i386 = cache.lookup("libc.so.6", flags_ok=FLAG_ELF_LIBC6)
    assert i386 is None or (elf_ident(i386) or (0, 0, 0))[:2] == (1, EM_386)
    # A filter that takes every row picks the first libc.so.6 row in file order, whichever
    # ABI that is here (x32 sorts first once libc6-x32 is installed).
    first = next(path for soname, path, _ in _ldconfig_listing() if soname == "libc.so.6")
    assert cache.lookup("libc.so.6", flags_ok=lambda flags: True) == first


# --- private caches checked against the real loader --------------------------------------


@needs_gcc
@needs_ldconfig
@needs_ldso
@needs_private_loader
def test_hwcaps_priority_and_first_directory_win_like_the_loader(tmp_path: Path) -> None:
    m = MirrorRoot(tmp_path)
    m.lib("a/libfoo.so.1", "libfoo.so.1")
    v2 = m.lib("a/glibc-hwcaps/x86-64-v2/libfoo.so.1", "libfoo.so.1")
    v3 = m.lib("a/glibc-hwcaps/x86-64-v3/libfoo.so.1", "libfoo.so.1")
    odd = m.lib("a/glibc-hwcaps/x86-64-v9/libfoo.so.1", "libfoo.so.1")
    m.lib("b/libfoo.so.1", "libfoo.so.1")
    bar_a = m.lib("a/libbar.so.1", "libbar.so.1")
    m.lib("b/libbar.so.1", "libbar.so.1")
    only_b = m.lib("b/libonly.so.3", "libonly.so.3")
    m.conf("a", "b")
    cache_file = m.ldconfig()
    cache = read_cache(cache_file)

    assert [(e.soname, e.path, e.hwcaps) for e in cache.entries] == _ldconfig_listing(cache_file)
    assert cache.hwcaps_subdirs == ("x86-64-v2", "x86-64-v3", "x86-64-v9")

    program = tmp_path / "prog"
    _build_program(program, [bar_a, only_b, m.inner / "a/libfoo.so.1"])
    listed = _loader_list(str(program), cache_file)
    profile = host_profile()
    for soname in ("libfoo.so.1", "libbar.so.1", "libonly.so.3"):
        assert profile.lookup(cache, soname) == listed[soname], soname

    # The rules, spelled out. The highest-priority active subdirectory wins; if none is
    # active, the first plain row wins; among plain rows the first conf directory wins.
    expected_best = v3 if "x86-64-v3" in profile.hwcaps_active else v2
    assert listed["libfoo.so.1"] == str(expected_best)
    assert listed["libbar.so.1"] == str(bar_a)
    assert cache.lookup("libfoo.so.1") == str(m.host / "a/libfoo.so.1")
    assert cache.lookup("libfoo.so.1", hwcaps_active=["x86-64-v2"]) == str(v2)
    assert cache.lookup("libfoo.so.1", hwcaps_active=["x86-64-v2", "x86-64-v3"]) == str(v2)
    assert cache.lookup("libfoo.so.1", hwcaps_active=["x86-64-v4", "x86-64-v3"]) == str(v3)
    assert cache.lookup("libfoo.so.1", hwcaps_active=["x86-64-v9"]) == str(odd)
    assert cache.lookup("libfoo.so.1", hwcaps_active=["nope"]) == str(m.host / "a/libfoo.so.1")


@needs_gcc
@needs_ldconfig
@needs_ldso
@needs_private_loader
@pytest.mark.parametrize("with_tls", [True, False])
def test_legacy_hwcap_rows_like_the_loader(tmp_path: Path, with_tls: bool) -> None:
    m = MirrorRoot(tmp_path)
    plain = m.lib("c/libleg.so.1", "libleg.so.1")
    x86_64 = m.lib("c/x86_64/libleg.so.1", "libleg.so.1")
    haswell = m.lib("c/haswell/libleg.so.1", "libleg.so.1")
    m.lib("c/avx512_1/libleg.so.1", "libleg.so.1")
    tls = m.lib("c/tls/libleg.so.1", "libleg.so.1") if with_tls else None
    m.conf("c")
    cache_file = m.ldconfig()
    cache = read_cache(cache_file)
    assert [(e.soname, e.path, e.hwcaps) for e in cache.entries] == _ldconfig_listing(cache_file)

    program = tmp_path / "prog"
    _build_program(program, [m.inner / "c/libleg.so.1"])
    listed = _loader_list(str(program), cache_file)
    assert host_profile().lookup(cache, "libleg.so.1") == listed["libleg.so.1"]
    if tls is not None:
        assert listed["libleg.so.1"] == str(tls)
        assert cache.lookup("libleg.so.1") == str(tls)  # tls is always acceptable
    else:
        # 2.36 on x86_64: dl_hwcap has the x86_64 bit, avx512_1 is masked off, and the
        # haswell platform row is taken exactly when the loader's AT_PLATFORM is haswell
        # (which depends on this CPU: the loader's own diagnostics say which).
        platform = re.search(r'^dl_platform="(.*)"$', run(LDSO, "--list-diagnostics"), re.M)
        on_haswell = platform is not None and platform.group(1) == "haswell"
        assert listed["libleg.so.1"] == str(haswell if on_haswell else x86_64)
        assert cache.lookup("libleg.so.1", legacy_hwcaps=NO_LEGACY_HWCAPS) == str(plain)
        assert cache.lookup("libleg.so.1", legacy_hwcaps=LegacyHwcaps(hwcap=0x2)) == str(x86_64)


@needs_gcc
@needs_ldconfig
@needs_ldso
@needs_private_loader
@pytest.mark.parametrize("fmt", ["old", "compat", "new"])
def test_other_cache_formats_like_the_loader(tmp_path: Path, fmt: str) -> None:
    m = MirrorRoot(tmp_path)
    m.lib("a/libfoo.so.1", "libfoo.so.1")
    m.lib("a/glibc-hwcaps/x86-64-v2/libfoo.so.1", "libfoo.so.1")
    m.lib("a/libzed.so.10", "libzed.so.10")
    m.conf("a")
    cache_file = m.ldconfig("-c", fmt)
    cache = read_cache(cache_file)
    assert cache.format is {
        "old": CacheFormat.OLD, "compat": CacheFormat.OLD_WITH_NEW, "new": CacheFormat.NEW,
    }[fmt]
    listing = _ldconfig_listing(cache_file)
    assert [(e.soname, e.path) for e in cache.entries] == [(s, p) for s, p, _ in listing]

    program = tmp_path / "prog"
    _build_program(program, [m.inner / "a/libfoo.so.1", m.inner / "a/libzed.so.10"])
    listed = _loader_list(str(program), cache_file)
    profile = host_profile()
    for soname in ("libfoo.so.1", "libzed.so.10"):
        assert profile.lookup(cache, soname) == listed[soname], soname
    if fmt == "old":
        # Old rows have no hwcap word. The first row with the exact default flags wins,
        # even when it lives in a glibc-hwcaps directory.
        first = next(e for e in cache.entries if e.soname == "libfoo.so.1")
        assert "glibc-hwcaps" in first.path
        assert listed["libfoo.so.1"] == first.path


@needs_gcc
@needs_ldconfig
def test_isa_level_of_hwcaps_rows(tmp_path: Path) -> None:
    m = MirrorRoot(tmp_path)
    base = m.lib("a/libisa.so.1", "libisa.so.1")
    try:
        v3 = m.lib(
            "a/glibc-hwcaps/x86-64-v3/libisa.so.1", "libisa.so.1", "-march=x86-64-v3", "-mneeded"
        )
    except subprocess.CalledProcessError:
        pytest.skip("gcc cannot emit GNU_PROPERTY_X86_ISA_1_NEEDED (-mneeded)")
    m.conf("a")
    cache = read_cache(m.ldconfig())
    (row,) = [e for e in cache.entries if e.hwcaps == "x86-64-v3"]
    assert row.isa_level == 2  # highest bit of baseline|v2|v3
    assert row.hwcap == DL_CACHE_HWCAP_EXTENSION | (2 << 32) | 0
    active = ["x86-64-v3"]
    assert cache.lookup("libisa.so.1", hwcaps_active=active, isa_1=0xF) == str(v3)
    assert cache.lookup("libisa.so.1", hwcaps_active=active, isa_1=0x3) == str(base)
    assert cache.lookup("libisa.so.1", hwcaps_active=active) == str(v3)


# --- malformed input ---------------------------------------------------------------------


def _new_cache(
    rows: list[tuple[int, bytes, bytes, int]], hwcaps: tuple[bytes, ...] = ()
) -> bytes:
    """A minimal glibc-ld.so.cache1.1 file with string offsets counted from the file start."""
    header, entry = 48, 24
    strings = bytearray()
    start = header + entry * len(rows)

    def intern(text: bytes) -> int:
        strings.extend(text + b"\0")
        return start + len(strings) - len(text) - 1

    packed = [(flags, intern(key), intern(value), hwcap) for flags, key, value, hwcap in rows]
    names = [intern(name) for name in hwcaps]
    body = b"".join(struct.pack("<iIIIQ", f, k, v, 0, h) for f, k, v, h in packed)
    tail = bytes(strings)
    ext = b""
    ext_offset = 0
    if names:
        ext_offset = (start + len(tail) + 3) & ~3
        tail += b"\0" * (ext_offset - start - len(tail))
        section_at = ext_offset + 8 + 16
        ext = struct.pack("<IIIIII", 0xEAA42174, 1, 1, 0, section_at, 4 * len(names))
        ext += struct.pack(f"<{len(names)}I", *names)
    head = b"glibc-ld.so.cache1.1"
    head += struct.pack("<IIB3xI12x", len(rows), len(strings), 2, ext_offset)
    return head + body + tail + ext


def _old_cache(rows: list[tuple[int, bytes, bytes]]) -> bytes:
    strings = bytearray()
    offsets = []
    for _, key, value in rows:
        offsets.append((len(strings), len(strings) + len(key) + 1))
        strings.extend(key + b"\0" + value + b"\0")
    head = b"ld.so-1.7.0\0" + struct.pack("<I", len(rows))
    pairs = zip(rows, offsets, strict=True)
    body = b"".join(struct.pack("<iII", row[0], k, v) for row, (k, v) in pairs)
    return head + body + bytes(strings)


_NEW_HEAD = b"glibc-ld.so.cache1.1"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "empty"),
        (b"hello world, not a cache", "not an ld.so cache"),
        (b"glibc-ld.so.cache1.1", "too short"),
        (_NEW_HEAD + struct.pack("<IIB3xI12x", 1000, 0, 2, 0) + b"x" * 40, "truncated"),
        (_NEW_HEAD + struct.pack("<IIB3xI12x", 0, 0, 1, 0) + b"x", "invalid"),
        (_new_cache([(X86_64, b"libx.so.1", b"/x", 0)])[:-1], "NUL"),
        (b"ld.so-1.7.0\0" + struct.pack("<I", 5) + b"x" * 12, "truncated"),
        (_old_cache([(3, b"libx.so.1", b"/x")])[:-1], "NUL"),
    ],
)
def test_malformed_bytes_raise_bad_input(data: bytes, needle: str) -> None:
    with pytest.raises(BadInputError) as caught:
        parse_cache(data, "/some/ld.so.cache")
    message = str(caught.value)
    assert "/some/ld.so.cache" in message
    assert needle in message
    assert "\n" not in message


def test_bad_extension_directory_is_an_error() -> None:
    good = _new_cache([(X86_64, b"libx.so.1", b"/x", DL_CACHE_HWCAP_EXTENSION)], (b"v2",))
    assert parse_cache(good).entries[0].hwcaps == "v2"
    (ext_offset,) = struct.unpack_from("<I", good, 32)
    broken = good[:ext_offset] + b"\0\0\0\0" + good[ext_offset + 4 :]
    with pytest.raises(BadInputError, match="bad magic"):
        parse_cache(broken, "c")


def test_unreadable_paths_raise_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"cannot read ld\.so cache .*nope"):
        read_cache(tmp_path / "nope")
    with pytest.raises(BadInputError, match=r"cannot read ld\.so cache"):
        read_cache(tmp_path)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        read_cache(empty)


@functools.cache
def _sample_cache() -> bytes:
    if os.path.exists(SYSTEM_CACHE):
        return Path(SYSTEM_CACHE).read_bytes()
    return _new_cache(
        [(X86_64, b"libz.so.1", b"/lib/libz.so.1", 0), (X86_64, b"libc.so.6", b"/lib/c", 0)]
    )


def _parse_or_bad_input(data: bytes) -> LdCache | None:
    try:
        cache = parse_cache(data, "fuzz")
    except BadInputError as err:
        assert "\n" not in str(err)
        return None
    for name in ("libc.so.6", "libz.so.1", "a"):
        cache.lookup(name, hwcaps_active=("x86-64-v3", "x86-64-v2"), isa_1=0x7)
    return cache


_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(st.binary(max_size=600), st.sampled_from([b"", b"glibc-ld.so.cache1.1", b"ld.so-1.7.0"]))
def test_fuzz_random_bytes(tail: bytes, magic: bytes) -> None:
    _parse_or_bad_input(magic + tail)


@_FUZZ
@given(st.data())
def test_fuzz_truncations_of_a_real_cache(data: st.DataObject) -> None:
    sample = _sample_cache()
    cut = data.draw(st.integers(min_value=0, max_value=len(sample)))
    _parse_or_bad_input(sample[:cut])


@_FUZZ
@given(st.data())
def test_fuzz_corruptions_of_a_real_cache(data: st.DataObject) -> None:
    sample = bytearray(_sample_cache())
    for _ in range(data.draw(st.integers(min_value=1, max_value=8))):
        where = data.draw(st.integers(min_value=0, max_value=len(sample) - 1))
        sample[where] = data.draw(st.integers(min_value=0, max_value=255))
    _parse_or_bad_input(bytes(sample))


# --- rules on hand-built tables ----------------------------------------------------------


def test_old_format_last_acceptable_row_wins_unless_exact() -> None:
    generic = FlagRule(FLAG_ELF_LIBC6, (FLAG_ELF,))
    two_plain = _old_cache([(1, b"libx.so.1", b"/a"), (1, b"libx.so.1", b"/b")])
    assert parse_cache(two_plain).lookup("libx.so.1", flags_ok=generic) == "/b"
    exact_middle = _old_cache(
        [(1, b"libx.so.1", b"/a"), (3, b"libx.so.1", b"/b"), (1, b"libx.so.1", b"/c")]
    )
    assert parse_cache(exact_middle).lookup("libx.so.1", flags_ok=generic) == "/b"
    # The new format stops at the first acceptable plain row.
    new = _new_cache([(1, b"libx.so.1", b"/a", 0), (1, b"libx.so.1", b"/b", 0)])
    assert parse_cache(new).lookup("libx.so.1", flags_ok=generic) == "/a"


def test_hwcaps_rows_equal_priority_first_wins_and_unknown_index_is_skipped() -> None:
    ext = DL_CACHE_HWCAP_EXTENSION
    data = _new_cache(
        [
            (X86_64, b"libx.so.1", b"/bogus", ext | 7),  # index past the section
            (X86_64, b"libx.so.1", b"/v2-first", ext | 0),
            (X86_64, b"libx.so.1", b"/v2-second", ext | 0),
            (X86_64, b"libx.so.1", b"/v3", ext | 1),
            (X86_64, b"libx.so.1", b"/plain", 0),
        ],
        (b"x86-64-v2", b"x86-64-v3"),
    )
    cache = parse_cache(data)
    assert cache.entries[0].hwcaps is None
    assert cache.lookup("libx.so.1", flags_ok=X86_64, hwcaps_active=["x86-64-v2"]) == "/v2-first"
    assert cache.lookup("libx.so.1", flags_ok=X86_64, hwcaps_active=["x86-64-v3"]) == "/v3"
    assert cache.lookup("libx.so.1", flags_ok=X86_64) == "/plain"
    assert cache.lookup("libx.so.1", flags_ok=0x0803) is None


def test_libcmp_orders_versions_numerically() -> None:
    assert libcmp(b"libfoo.so.10", b"libfoo.so.9") > 0
    assert libcmp(b"libfoo.so.9", b"libfoo.so.10") < 0
    assert libcmp(b"libfoo.so.010", b"libfoo.so.10") == 0
    assert libcmp(b"libfoo.so", b"libfoo.so.1") < 0
    assert libcmp(b"libfoo.so.1", b"libfoo.so") > 0
    assert libcmp(b"lib2", b"libx") > 0  # a digit sorts after any other byte
    assert libcmp(b"libx", b"lib2") < 0
    assert libcmp(b"abc", b"abd") < 0
    assert libcmp(b"", b"") == 0


def test_entries_report_extension_bits() -> None:
    plain = CacheEntry("libx.so.1", "/x", X86_64, None)
    named = CacheEntry("libx.so.1", "/y", X86_64, "v3", DL_CACHE_HWCAP_EXTENSION | (3 << 32) | 1)
    legacy = CacheEntry("libx.so.1", "/z", X86_64, None, 1 << 63)
    assert not plain.is_hwcaps_extension and plain.isa_level == 0
    assert named.is_hwcaps_extension and named.isa_level == 3
    assert not legacy.is_hwcaps_extension

"""glibc's ``/etc/ld.so.cache``: parse it, and answer lookups the way ld.so 2.36 does.

What ldconfig would write for a sysroot without a cache is :mod:`bazel_ldfix.loader.ldconfig`;
the rows' ABI flags are :mod:`bazel_ldfix.loader.cacheflags`, the running loader's own
parameters :mod:`bazel_ldfix.loader.profile`.

Why this exists: once RPATH, LD_LIBRARY_PATH and RUNPATH have failed, the loader asks the
cache. The cache's answer is not simply "the first file with that name". The loader
binary-searches a table that ldconfig sorted with a version-aware comparison, filters the
rows by ABI flags, ranks glibc-hwcaps rows by subdirectory priority, and honours legacy
hwcap bits. To explain or predict what a test will load, we repeat that lookup step by step.

Behaviour follows glibc 2.36: elf/dl-cache.c (``search_cache``, ``_dl_cache_libcmp``,
``_dl_load_cache_lookup``), sysdeps/generic/dl-cache.h plus the per-architecture
dl-cache.h files (``_dl_cache_check_flags``, cache extensions), sysdeps/generic/ldconfig.h
(``FLAG_*``), elf/cache.c (sort order and file layout). The code here is our own; only the
file format and the rules come from glibc.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.cacheflags import FlagRule, host_flag_rule

# --- hwcap field of a new-format entry (sysdeps/generic/dl-cache.h) ----------------------
# When only this bit is set in the upper half (besides the ISA-level bits), the lower 32 bits
# are an index into the glibc-hwcaps extension section and the entry is a "named" hwcaps row.
DL_CACHE_HWCAP_EXTENSION = 1 << 62
_ISA_LEVEL_MASK = (1 << 10) - 1
_TLS_HWCAP = 1 << 63  # always acceptable: "tls" subdirectories were universal
_U64 = (1 << 64) - 1

_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_HEADER_SIZE = 48  # struct cache_file_new
_NEW_ENTRY_SIZE = 24  # struct file_entry_new
_OLD_HEADER_SIZE = 16  # struct cache_file: 11-byte magic, padding, uint32 nlibs
_OLD_ENTRY_SIZE = 12  # struct file_entry
_EXT_MAGIC = 0xEAA42174  # (uint32_t) -358342284
_EXT_TAG_GLIBC_HWCAPS = 1
_EXT_TAG_GENERATOR = 0


class CacheFormat(enum.Enum):
    """Which layout the table came from. Lookup differs only for ``OLD``, whose rows lack hwcaps."""

    NEW = "glibc-ld.so.cache1.1"
    OLD = "ld.so-1.7.0"
    OLD_WITH_NEW = "ld.so-1.7.0 + glibc-ld.so.cache1.1"
    SCANNED = "scanned (no cache file)"


@dataclass(frozen=True)
class CacheEntry:
    """One row of the cache, with the raw ``hwcap`` word kept because the lookup rules use it."""

    soname: str
    path: str
    flags: int
    hwcaps: str | None
    hwcap: int = 0

    @property
    def is_hwcaps_extension(self) -> bool:
        """True for a glibc-hwcaps row. The loader ranks these rows ahead of the plain ones."""
        return ((self.hwcap >> 32) & ~_ISA_LEVEL_MASK) == (DL_CACHE_HWCAP_EXTENSION >> 32)

    @property
    def isa_level(self) -> int:
        """x86 ISA level ldconfig stored for a glibc-hwcaps row (0 = baseline or unknown)."""
        return (self.hwcap >> 32) & _ISA_LEVEL_MASK if self.is_hwcaps_extension else 0


@dataclass(frozen=True)
class LegacyHwcaps:
    """Legacy (pre-glibc-hwcaps) hwcap bits that a 2.36 loader accepts on a plain row.

    ``hwcap`` is ``dl_hwcap & glibc.cpu.hwcap_mask``. ``platform_mask`` is the architecture's
    ``_DL_HWCAP_PLATFORM``. ``platform`` is the bit number of AT_PLATFORM, or None when
    the loader does not know the platform (it reports ``dl_string_platform=-1``).
    glibc 2.37 removed these bits. 2.36 still honours ``tls/``, ``x86_64/`` and similar.
    """

    hwcap: int = 0
    platform_mask: int = 0
    platform: int | None = None

    def __call__(self, hwcap: int) -> bool:
        allowed = self.hwcap | self.platform_mask | _TLS_HWCAP
        if hwcap & ~allowed & _U64:
            return False
        bits = hwcap & self.platform_mask
        if self.platform_mask and bits:
            wanted = -1 if self.platform is None else 1 << self.platform
            if bits != wanted:
                return False
        return True


NO_LEGACY_HWCAPS = LegacyHwcaps()


def libcmp(left: bytes, right: bytes) -> int:
    """``_dl_cache_libcmp``: sign says how ``left`` orders against ``right``.

    Runs of digits compare by numeric value, so ``libfoo.so.10`` sorts after ``libfoo.so.9``.
    A digit sorts after any non-digit. Other bytes compare as x86's signed ``char``.
    ldconfig sorts the table in *descending* order of this comparison, and the loader's
    binary search relies on that order.
    """

    def signed(byte: int) -> int:
        return byte - 256 if byte >= 128 else byte

    i = j = 0
    n, m = len(left), len(right)
    while i < n:
        a = left[i]
        b = right[j] if j < m else 0
        if 0x30 <= a <= 0x39:
            if not 0x30 <= b <= 0x39:
                return 1
            start = i
            while i < n and 0x30 <= left[i] <= 0x39:
                i += 1
            value_left = int(left[start:i])
            start = j
            while j < m and 0x30 <= right[j] <= 0x39:
                j += 1
            value_right = int(right[start:j])
            if value_left != value_right:
                return value_left - value_right
        elif 0x30 <= b <= 0x39:
            return -1
        elif a != b:
            return signed(a) - signed(b)
        else:
            i += 1
            j += 1
    return -signed(right[j]) if j < m else 0


def _hwcaps_priorities(section: Sequence[bytes | None], active: Sequence[str]) -> tuple[int, ...]:
    """Priority of each extension-section name. 0 means unusable; lower is preferred.

    The loader merges the section (sorted by ldconfig) with the active subdirectory names,
    which it also sorts by name, with priority = 1-based position in preference order. A name
    the merge does not pair up, for example because the section is out of order, gets 0. We
    repeat the merge instead of using a dict lookup so that such files behave as they do in
    ld.so.
    """
    ranked = sorted((os.fsencode(name), priority) for priority, name in enumerate(active, 1))
    result: list[int] = []
    i = j = 0
    while i < len(section) and j < len(ranked):
        name = section[i]
        if name is None:
            result.append(0)
            i += 1
        elif name == ranked[j][0]:
            result.append(ranked[j][1])
            i += 1
            j += 1
        elif name < ranked[j][0]:
            result.append(0)
            i += 1
        else:
            j += 1
    result.extend(0 for _ in range(len(section) - i))
    return tuple(result)


def _isa_compatible(hwcap: int, isa_1: int) -> bool:
    level = (hwcap >> 32) & _ISA_LEVEL_MASK
    if level >= 32:  # ldconfig never writes this; in C the shift would be undefined
        return False
    need = 1 << level
    return (need & isa_1) == need


@dataclass(frozen=True)
class LdCache:
    """A parsed (or synthesized) cache. ``entries`` keeps file order, which lookup depends on."""

    path: str
    entries: tuple[CacheEntry, ...]
    format: CacheFormat = CacheFormat.NEW
    hwcaps_subdirs: tuple[str | None, ...] = ()
    generator: str | None = None
    _keys: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    _section: tuple[bytes | None, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keys", tuple(os.fsencode(e.soname) for e in self.entries))
        object.__setattr__(
            self,
            "_section",
            tuple(None if s is None else os.fsencode(s) for s in self.hwcaps_subdirs),
        )

    def lookup(
        self,
        soname: str,
        *,
        flags_ok: Callable[[int], bool] | int | None = None,
        hwcaps_active: Sequence[str] = (),
        isa_1: int | None = None,
        legacy_hwcaps: Callable[[int], bool] | None = None,
    ) -> str | None:
        """What ``_dl_load_cache_lookup`` returns for ``soname``, or None.

        ``flags_ok``: an int means exactly those flags, as on x86_64 (0x0303). A
        :class:`FlagRule` also supplies the early-stop default. A plain callable only filters.
        None means this interpreter's platform (:func:`host_flag_rule`).
        ``hwcaps_active``: usable glibc-hwcaps subdirectories, most preferred first, as
        ``ld.so --list-diagnostics`` reports them (see :func:`parse_diagnostics`). Rows for
        any other subdirectory are never chosen.
        ``isa_1``: x86 only, the CPU's GNU_PROPERTY_X86_ISA_1 bits (baseline=1, v2=2, v3=4,
        v4=8), which hwcaps rows must satisfy. None skips the check, as glibc does on other
        architectures.
        ``legacy_hwcaps``: which legacy hwcap words a plain row may carry. The default,
        :data:`NO_LEGACY_HWCAPS`, accepts only hwcap 0 or ``tls``.

        Like ld.so, this does not check that the file exists. If it does not, the loader
        falls back to the default directories.
        """
        rule = _as_flag_rule(flags_ok)
        name = os.fsencode(soname).split(b"\0", 1)[0]  # C sees the string up to a NUL
        keys = self._keys
        left, right = 0, len(keys) - 1
        while left <= right:
            middle = (left + right) // 2
            cmp = libcmp(name, keys[middle])
            if cmp == 0:
                return self._pick(
                    name, middle, right, rule, hwcaps_active, isa_1,
                    NO_LEGACY_HWCAPS if legacy_hwcaps is None else legacy_hwcaps,
                )
            if cmp < 0:  # the table is sorted in descending order
                left = middle + 1
            else:
                right = middle - 1
        return None

    def _pick(
        self,
        name: bytes,
        found: int,
        right: int,
        rule: FlagRule | Callable[[int], bool],
        hwcaps_active: Sequence[str],
        isa_1: int | None,
        legacy_ok: Callable[[int], bool],
    ) -> str | None:
        """The scan over the run of equal keys in ``search_cache``, step for step."""
        keys, entries = self._keys, self.entries
        default = rule.default if isinstance(rule, FlagRule) else None
        wide = self.format is not CacheFormat.OLD
        first = found
        while first > 0 and libcmp(name, keys[first - 1]) == 0:
            first -= 1
        priorities: tuple[int, ...] | None = None
        best: str | None = None
        best_priority = 0
        for index in range(first, right + 1):
            if index > found and libcmp(name, keys[index]) != 0:
                break
            entry = entries[index]
            if not rule(entry.flags):
                continue
            named = False
            if wide:
                named = entry.is_hwcaps_extension
                if named and isa_1 is not None and not _isa_compatible(entry.hwcap, isa_1):
                    continue
                if not named and best is not None:
                    break  # hwcaps rows come first; a plain row ends the search
                if not named and not legacy_ok(entry.hwcap):
                    continue
                if named:
                    if priorities is None:
                        priorities = _hwcaps_priorities(self._section, hwcaps_active)
                    slot = entry.hwcap & 0xFFFFFFFF
                    priority = priorities[slot] if slot < len(priorities) else 0
                    if priority == 0 or (best is not None and priority >= best_priority):
                        continue
                    best_priority = priority
            best = entry.path
            if not named and entry.flags == default:
                break
        return best

    def directories(self) -> tuple[str, ...]:
        """Distinct directories the rows point into, in row order (for staleness reports)."""
        seen: dict[str, None] = {}
        for entry in self.entries:
            seen.setdefault(os.path.dirname(entry.path), None)
        return tuple(seen)


def _as_flag_rule(flags_ok: Callable[[int], bool] | int | None) -> Callable[[int], bool]:
    if flags_ok is None:
        return host_flag_rule()
    if isinstance(flags_ok, int):
        return FlagRule(flags_ok)
    return flags_ok


# --- parsing ------------------------------------------------------------------------------


class _Malformed(Exception):
    """Internal: why the bytes are not a usable cache. Re-raised as BadInputError with the path."""


# A cache with a million libraries is some 100 MB; real ones are well under 1 MB.
_MAX_CACHE_SIZE = 1 << 27


def read_cache(path: str | os.PathLike[str]) -> LdCache:
    """Read and parse a cache file (it is small, so one ``read()``).

    Only a regular file is read (opened without blocking, so a FIFO planted as a sysroot's
    cache is refused at once), and only up to a size no real cache reaches.
    """
    name = os.fspath(path)
    fd = elf.open_regular(name, "cannot read ld.so cache ")
    try:
        size = os.fstat(fd).st_size
        if size > _MAX_CACHE_SIZE:
            raise BadInputError(f"malformed ld.so cache {name}: {size} bytes is not a cache")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(_MAX_CACHE_SIZE + 1)
    except OSError as err:
        raise BadInputError(
            f"cannot read ld.so cache {name}: {err.strerror or err}"
        ) from None
    finally:
        os.close(fd)
    return parse_cache(data, name)


def parse_cache(data: bytes, path: str = "<bytes>") -> LdCache:
    """Parse cache bytes. Accepts the new format (what ldconfig 2.36 writes), the old
    format alone, and the old format with the new one appended.

    For the combined format the loader uses only the new part, so we return only the new
    part. Anything the loader would reject, or any string that runs off the end of the file,
    raises :class:`BadInputError`.
    """
    try:
        if data.startswith(_NEW_MAGIC):
            return _parse_new(data, 0, path, CacheFormat.NEW)
        if data.startswith(_OLD_MAGIC):
            return _parse_old(data, path)
    except _Malformed as err:
        raise BadInputError(f"malformed ld.so cache {path}: {err}") from None
    if not data:
        raise BadInputError(f"malformed ld.so cache {path}: the file is empty")
    raise BadInputError(f"not an ld.so cache: {path} (unknown magic {data[:20]!r})")


def _cstr(data: bytes, offset: int) -> bytes:
    if not 0 <= offset < len(data):
        raise _Malformed(f"string offset {offset} is outside the file")
    end = data.find(b"\0", offset)
    if end < 0:
        raise _Malformed(f"string at offset {offset} is not NUL-terminated")
    return data[offset:end]


def _new_byte_order(data: bytes, base: int) -> str:
    endian = data[base + 28] & 3  # cache_file_new.flags
    if endian == 1:
        raise _Malformed("ldconfig marked the cache as invalid (endianness flag 1)")
    if endian == 2:
        return "<"
    if endian == 3:
        return ">"
    # Older ldconfig left the byte as 0, so guess: use whichever order gives a count that fits.
    (count,) = struct.unpack_from("<I", data, base + 20)
    fits = (len(data) - base - _NEW_HEADER_SIZE) // _NEW_ENTRY_SIZE >= count
    return "<" if fits else ">"


def _parse_new(data: bytes, base: int, path: str, fmt: CacheFormat) -> LdCache:
    size = len(data)
    # ld.so wants more than a bare header in a new-only file, but a bare header is enough
    # for the part embedded after an old-format table.
    if size - base < _NEW_HEADER_SIZE or (base == 0 and size == _NEW_HEADER_SIZE):
        raise _Malformed("file is too short for the glibc-ld.so.cache1.1 header")
    order = _new_byte_order(data, base)
    nlibs, _len_strings = struct.unpack_from(order + "II", data, base + 20)
    (extension_offset,) = struct.unpack_from(order + "I", data, base + 32)
    if (size - base - _NEW_HEADER_SIZE) // _NEW_ENTRY_SIZE < nlibs:
        raise _Malformed(f"truncated: header promises {nlibs} entries")
    section, generator = _parse_extensions(data, order, extension_offset)
    names = tuple(None if s is None else os.fsdecode(s) for s in section)
    entries = []
    row = struct.Struct(order + "iIIIQ")
    for i in range(nlibs):
        flags, key, value, _osversion, hwcap = row.unpack_from(
            data, base + _NEW_HEADER_SIZE + i * _NEW_ENTRY_SIZE
        )
        entry = CacheEntry(
            soname=os.fsdecode(_cstr(data, base + key)),
            path=os.fsdecode(_cstr(data, base + value)),
            flags=flags,
            hwcaps=None,
            hwcap=hwcap,
        )
        if entry.is_hwcaps_extension:
            slot = hwcap & 0xFFFFFFFF
            if slot < len(names):
                entry = CacheEntry(entry.soname, entry.path, flags, names[slot], hwcap)
        entries.append(entry)
    return LdCache(path, tuple(entries), fmt, names, generator)


def _parse_extensions(
    data: bytes, order: str, offset: int
) -> tuple[tuple[bytes | None, ...], str | None]:
    """The glibc-hwcaps name table and the generator string from the extension directory.

    Offsets count from the start of the file, as in ``cache_extension_load``. Like the loader,
    we drop a hwcaps section that is empty or misaligned. Other structural damage is an error,
    because ``ldconfig -p`` also refuses such a file.
    """
    size = len(data)
    if offset == 0:
        return (), None
    if offset % 4 or offset + 8 > size:
        raise _Malformed(f"extension directory offset {offset} is misaligned or past the end")
    magic, count = struct.unpack_from(order + "II", data, offset)
    if magic != _EXT_MAGIC:
        raise _Malformed("extension directory has a bad magic number")
    if offset + 8 + 16 * count > size:
        raise _Malformed("extension directory runs past the end of the file")
    hwcaps_at: tuple[int, int] | None = None
    generator: str | None = None
    for i in range(count):
        tag, _flags, start, length = struct.unpack_from(order + "IIII", data, offset + 8 + 16 * i)
        if start + length > size:
            raise _Malformed(f"extension section {i} runs past the end of the file")
        if tag == _EXT_TAG_GENERATOR:
            generator = data[start : start + length].decode("utf-8", "replace")
        elif tag == _EXT_TAG_GLIBC_HWCAPS:
            hwcaps_at = (start, length)  # the last one wins, as in cache_extension_load
    section: tuple[bytes | None, ...] = ()
    if hwcaps_at is not None:
        start, length = hwcaps_at
        if length and not start % 4 and not length % 4:
            indices = struct.unpack_from(f"{order}{length // 4}I", data, start)
            section = tuple(_cstr(data, index) if index < size else None for index in indices)
    return section, generator


def _parse_old(data: bytes, path: str) -> LdCache:
    size = len(data)
    if size <= _OLD_HEADER_SIZE:
        raise _Malformed("file is too short for the ld.so-1.7.0 header")
    room = (size - _OLD_HEADER_SIZE) // _OLD_ENTRY_SIZE
    order = "<"
    (nlibs,) = struct.unpack_from(order + "I", data, 12)
    if nlibs > room:
        order = ">"
        (nlibs,) = struct.unpack_from(order + "I", data, 12)
        if nlibs > room:
            raise _Malformed("truncated: old-format header promises more entries than fit")
    end = _OLD_HEADER_SIZE + nlibs * _OLD_ENTRY_SIZE
    # ldconfig pads the old table to an 8-byte boundary (alignof cache_file_new on 64-bit).
    # On 32-bit hosts the boundary is 4, so try that too.
    for align in (8, 4):
        start = (end + align - 1) & ~(align - 1)
        if data.startswith(_NEW_MAGIC, start) and size - start >= _NEW_HEADER_SIZE:
            return _parse_new(data, start, path, CacheFormat.OLD_WITH_NEW)
    entries = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from(
            order + "iII", data, _OLD_HEADER_SIZE + i * _OLD_ENTRY_SIZE
        )
        entries.append(
            CacheEntry(
                soname=os.fsdecode(_cstr(data, end + key)),
                path=os.fsdecode(_cstr(data, end + value)),
                flags=flags,
                hwcaps=None,
            )
        )
    return LdCache(path, tuple(entries), CacheFormat.OLD)



"""What ``ldconfig -r ROOT`` would write, for a sysroot or image that has no ld.so.cache.

glibc keeps the cache's reader (elf/dl-cache.c, here :mod:`bazel_ldfix.loader.ldcache`) apart from
its writer (elf/ldconfig.c and elf/cache.c); so does this project. This module reads
ld.so.conf as ldconfig does (``include`` globs, comments, ``hwcap`` lines, ``dir=libtype``),
resolves paths inside the root as ldconfig's ``chroot_canon`` does, chooses the files that
become rows, and sorts them in the cache's order. The code is our own; the rules are glibc's.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.ldcache import (
    DL_CACHE_HWCAP_EXTENSION,
    CacheEntry,
    CacheFormat,
    LdCache,
    libcmp,
)

_C_SPACE = " \t\n\v\f\r"
_MAX_SYMLINKS = 40
_MAX_INCLUDE_DEPTH = 32


def _resolve_in_root(root: str, path: str) -> str | None:
    """Host path of ``path`` as seen from inside ``root``, like ldconfig's ``chroot_canon``.

    Symlinks are followed, absolute targets are re-rooted, and ``..`` stops at the root. This
    matters because an absolute link in a sysroot (``lib64 -> /usr/lib64``) must not resolve
    against the host. Returns None when a directory on the way is missing or the links loop.
    A missing last component is kept, so the caller's stat or open reports it.
    """
    base = os.path.abspath(root)
    pending = [part for part in reversed(path.split("/")) if part]
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        host = os.path.join(base, *done, part)
        try:
            info = os.lstat(host)
        except OSError:
            if pending:
                return None
            done.append(part)
            break
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > _MAX_SYMLINKS:
                return None
            try:
                target = os.readlink(host)
            except OSError:
                return None
            if target.startswith("/"):
                done = []
            pending.extend(p for p in reversed(target.split("/")) if p)
            continue
        done.append(part)
    return os.path.join(base, *done)


def _has_magic(text: str) -> bool:
    return any(c in text for c in "*?[")


def _glob_in_root(root: str, pattern: str) -> list[str]:
    """In-root paths matching ``pattern``, sorted bytewise (ldconfig sets LC_COLLATE=C)."""
    directory, _, base = pattern.rpartition("/")
    found: list[str] = []
    if _has_magic(directory):
        prefix = os.path.abspath(root).rstrip("/")
        for match in glob.glob(glob.escape(prefix) + "/" + pattern.lstrip("/")):
            found.append("/" + os.path.relpath(match, prefix or "/"))
    else:
        host_dir = _resolve_in_root(root, directory or "/")
        if host_dir is None:
            return []
        for match in glob.glob(os.path.join(glob.escape(host_dir), base)):
            found.append(f"{directory}/{os.path.basename(match)}")
    return sorted(found, key=os.fsencode)


_MAX_CONF_SIZE = 1 << 20  # a config file of a million bytes is not one ldconfig was given


def _conf_lines(root: str, conf: str, depth: int, seen: set[str]) -> Iterator[str]:
    """Directory lines of one config file, with ``include`` expanded in place, in order."""
    if depth > _MAX_INCLUDE_DEPTH or conf in seen:
        return
    seen.add(conf)
    host = _resolve_in_root(root, conf)
    if host is None:
        return
    try:
        fd = elf.open_regular(host)  # a FIFO planted as a config file is not waited on
    except BadInputError:
        return  # ldconfig skips a missing or unreadable config file (with a warning at most)
    try:
        with os.fdopen(fd, "rb") as handle:
            text = os.fsdecode(handle.read(_MAX_CONF_SIZE))
    except OSError:
        return
    for raw in text.split("\n"):
        line = raw.split("#", 1)[0].lstrip(_C_SPACE)
        if not line:
            continue
        if line.startswith("include") and line[7:8] in (" ", "\t"):
            for word in re.split(r"[ \t]", line[8:]):
                if not word:
                    continue
                pattern = word
                if not pattern.startswith("/"):
                    pattern = f"{os.path.dirname(conf) or ''}/{pattern}"
                for included in _glob_in_root(root, pattern):
                    yield from _conf_lines(root, included, depth + 1, seen)
        elif line[:5].lower() == "hwcap" and line[5:6] in (" ", "\t"):
            continue  # ignored by ldconfig since 2.33
        else:
            directory = line.split("=", 1)[0]  # "dir=libc6": the library-type suffix is dropped
            end = len(directory) - 1
            while end > 0 and directory[end] in _C_SPACE:
                end -= 1
            while end > 0 and directory[end] == "/":
                end -= 1
            directory = directory[: end + 1]
            if directory:
                yield directory


def conf_dirs(root: str = "/", conf: str = "etc/ld.so.conf") -> tuple[str, ...]:
    """Directories named by ld.so.conf under ``root``, in ldconfig's order, without repeats.

    ``conf`` is a path inside ``root``. Each result is the path as written in the file,
    that is, as seen from inside ``root``; join it with ``root`` to reach it from outside.
    ``include`` globs are expanded (relative ones against the including file's directory),
    and comments, ``hwcap`` lines and ``=libtype`` suffixes are dropped. Directories that do
    not exist are kept, since callers use this list to tell a stale cache. ldconfig itself
    also drops directories that are missing or that alias an earlier one (see
    :func:`search_dirs`). Trusted system directories are not included.
    """
    seen: dict[str, None] = {}
    for directory in _conf_lines(root, "/" + conf.lstrip("/"), 0, set()):
        seen.setdefault(directory, None)
    return tuple(seen)


@dataclass(frozen=True)
class SearchDir:
    """A directory ldconfig scans. ``hwcaps`` names the glibc-hwcaps subdirectory it is, if any."""

    path: str
    hwcaps: str | None = None


def search_dirs(
    root: str = "/",
    conf: str = "etc/ld.so.conf",
    trusted_dirs: Sequence[str] = (),
) -> tuple[SearchDir, ...]:
    """The directories ``ldconfig -r root`` scans, in order.

    These are the ld.so.conf directories, then ``trusted_dirs``: ldconfig's built-in
    directories, which are the loader's system search path (``ldconfig -v`` prints them as
    ``(from <builtin>:0)``; Debian adds its multiarch directories to both). A directory
    that does not exist, or that is the same inode as an earlier one, is skipped. Right after each
    kept directory come its ``glibc-hwcaps/<name>`` subdirectories, sorted by name. ldconfig uses
    readdir order there, but rows are sorted by hwcaps name, so the table comes out the
    same either way. Legacy hwcap subdirectories
    (``tls``, ``x86_64``, ...) are not scanned; glibc 2.37 dropped them and current
    distributions ship none.
    """
    result: list[SearchDir] = []
    seen: set[tuple[int, int]] = set()

    def add(directory: str, hwcaps: str | None) -> bool:
        host = _resolve_in_root(root, directory)
        if host is None:
            return False
        try:
            info = os.stat(host)
        except OSError:
            return False
        ident = (info.st_dev, info.st_ino)
        if ident in seen:
            return False
        seen.add(ident)
        result.append(SearchDir(directory, hwcaps))
        return True

    for directory in (*conf_dirs(root, conf), *trusted_dirs):
        if not add(directory, None):
            continue
        hwcaps_root = _resolve_in_root(root, f"{directory}/glibc-hwcaps")
        try:
            names = sorted(os.listdir(hwcaps_root)) if hwcaps_root else []
        except OSError:
            names = []
        for name in names:
            if name.startswith(".") or ":" in name:
                continue
            sub = f"{directory}/glibc-hwcaps/{name}"
            host = _resolve_in_root(root, sub)
            if host is not None and os.path.isdir(host):
                add(sub, name)
    return tuple(result)


def _is_dso_name(name: str) -> bool:
    """ldconfig's file-name filter (``_dl_is_dso``) plus its skip list for temporary files."""
    looks_like = (
        (name.startswith(("lib", "ld-")) and ".so" in name)
        or name.startswith(("ld.so.", "ld64.so."))
    )
    temporary = (
        name.endswith((".#prelink#", ".dpkg-new", ".dpkg-tmp"))
        or ".#prelink#." in name
        or ";" in name
    )
    return looks_like and not temporary


@dataclass(frozen=True)
class _Found:
    name: str
    soname: str
    is_link: bool


def _scan_dir(
    root: str, directory: SearchDir, soname_of: Callable[[str], str | None]
) -> list[tuple[str, str]]:
    """(soname, recorded path) pairs that ldconfig's ``search_dir`` adds for one directory."""
    host_dir = _resolve_in_root(root, directory.path)
    try:
        names = sorted(os.listdir(host_dir)) if host_dir else []
    except OSError:
        return []
    libs: dict[str, _Found] = {}
    for name in names:
        if not _is_dso_name(name):
            continue
        inner = f"{directory.path}/{name}"
        try:
            is_link = stat.S_ISLNK(os.lstat(os.path.join(host_dir or "", name)).st_mode)
        except OSError:
            continue
        target = _resolve_in_root(root, inner)
        try:
            if target is None or not stat.S_ISREG(os.stat(target).st_mode):
                continue
        except OSError:
            continue
        soname = soname_of(target)
        if soname is None:
            continue
        soname = soname or name  # no DT_SONAME: ldconfig keys the file by its own name
        if is_link and name != soname and not (
            name.endswith(".so") and soname.startswith(name)
        ):
            is_link = False  # a link that is neither the soname nor the dev link is a file
        if is_link:
            soname = name
        previous = libs.get(soname)
        # Prefer a real file over a link; between equals, the "newer" name by libcmp wins.
        if (
            previous is None
            or (not is_link and previous.is_link)
            or (
                is_link == previous.is_link
                and libcmp(os.fsencode(previous.name), os.fsencode(name)) < 0
            )
        ):
            libs[soname] = _Found(name, soname, is_link)
    return [
        (lib.soname, f"{directory.path}/{lib.name if directory.hwcaps else lib.soname}")
        for lib in libs.values()
    ]


def _ldconfig_order(a: tuple[bytes, CacheEntry], b: tuple[bytes, CacheEntry]) -> int:
    """elf/cache.c ``compare``: key descending, flags descending, then hwcaps rows first,
    by subdirectory name. Ties keep insertion (directory) order because the sort is stable."""
    res = libcmp(b[0], a[0])
    if res:
        return res
    if a[1].flags != b[1].flags:
        return -1 if a[1].flags > b[1].flags else 1
    ha, hb = a[1].hwcaps, b[1].hwcaps
    if (ha is None) != (hb is None):
        return -1 if ha is not None else 1
    if ha is not None and hb is not None and ha != hb:
        return -1 if os.fsencode(ha) < os.fsencode(hb) else 1
    return 0


def scan_sysroot(
    root: str,
    *,
    soname_of: Callable[[str], str | None],
    trusted_dirs: Sequence[str],
    flags: int,
    conf: str = "etc/ld.so.conf",
) -> LdCache:
    """The table ``ldconfig -r root`` would write, for a sysroot that has no cache.

    ``soname_of(host_path)`` is the ELF reader hook, kept out of this module. It returns the
    object's DT_SONAME, "" for a shared object without one (ldconfig then keys it by file
    name), or None for a file ldconfig would not record. That includes objects of another
    ELF class or machine: every row gets ``flags``, and the loader would reject a
    foreign-ABI row anyway. Rows for plain directories point at ``dir/SONAME``, the soname
    link, whether or not it exists yet. Rows in glibc-hwcaps subdirectories point at the
    file itself, as ldconfig records them. ``trusted_dirs`` are the sysroot loader's system
    directories and ``flags`` what ldconfig records for its ABI (:func:`cacheflags.expected_flags`).
    """
    directories = search_dirs(root, conf, trusted_dirs)
    rows: list[tuple[bytes, CacheEntry]] = []
    for directory in directories:
        for soname, path in _scan_dir(root, directory, soname_of):
            rows.append((os.fsencode(soname), CacheEntry(soname, path, flags, directory.hwcaps)))
    rows.sort(key=functools.cmp_to_key(_ldconfig_order))
    names = sorted({e.hwcaps for _, e in rows if e.hwcaps is not None}, key=os.fsencode)
    slot = {name: i for i, name in enumerate(names)}
    entries = tuple(
        entry
        if entry.hwcaps is None
        else CacheEntry(
            entry.soname, entry.path, entry.flags, entry.hwcaps,
            DL_CACHE_HWCAP_EXTENSION | slot[entry.hwcaps],
        )
        for _, entry in rows
    )
    return LdCache(
        os.path.join(root, "etc/ld.so.cache"), entries, CacheFormat.SCANNED, tuple(names)
    )

"""Resolving a file as this machine's loader would: the loader model wired to the host.

This is where the model meets the system: which trusted loader applies (never the program
interpreter an inspected file names: ``host.trusted_for``), what it says about its search
(``host.probe``), how it reads /etc/ld.so.cache (``ld.so --list-diagnostics``), or a
sysroot's cache. Each is asked once per process.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, LdfixError
from bazel_ldfix.fs import facts
from bazel_ldfix.fs.facts import regular_identity
from bazel_ldfix.loader import host, ldcache, profile
from bazel_ldfix.loader.resolution import Environment, Library, Resolution
from bazel_ldfix.loader.search import Loader

if TYPE_CHECKING:
    from bazel_ldfix.fs.memo import Memo

CacheLookup = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Options:
    """How to search, beyond what the files say."""

    library_path: str | None = None     # LD_LIBRARY_PATH (or --library-path)
    inhibit_cache: bool = False
    root: str = "/"
    cwd: str = "/"
    loader: str | None = None           # --loader: the loader to ask instead of the host's


def trusted_for(info: elf.ElfInfo, loader: str | None = None) -> host.Trusted:
    """The trusted loader for ``info``, with a note when its PT_INTERP is set aside."""
    return host.trusted_for(info.interp, info.elf_class, info.machine, loader)


def interp_for(info: elf.ElfInfo, loader: str | None = None) -> str:
    """The loader that models ``info``: trusted, never merely the one its PT_INTERP names."""
    return trusted_for(info, loader).path


@functools.cache
def _asked(interp: str) -> tuple[host.Host, profile.LoaderProfile]:
    found, diagnostics = host.ask(interp)
    return found, profile.parse_diagnostics(diagnostics)


def host_of(interp: str) -> host.Host:
    """How the loader at ``interp`` searches (asked once per process)."""
    return _asked(interp)[0]


def profile_of(interp: str) -> profile.LoaderProfile:
    """How the loader at ``interp`` reads the cache (hwcaps, ISA level, flags)."""
    return _asked(interp)[1]


def cache_of(root: str, interp: str) -> ldcache.LdCache | None:
    """``root``'s /etc/ld.so.cache; for a sysroot without one, what its ldconfig would write.

    That ldconfig's built-in directories are its loader's system directories and its rows
    carry that loader's flags: both are taken from the loader at ``interp``.
    """
    return _cache_as(root, interp, cache_identity(root))


def cache_identity(root: str) -> str:
    """Which file ``root``'s /etc/ld.so.cache is now, as a memo keeps it (device, inode,
    size, times; what is there instead of a regular file). A reading is kept per identity:
    the cache is read again once it is another file (ldconfig ran while Bazel built)."""
    return regular_identity(os.path.join(root, "etc/ld.so.cache"))


@functools.cache
def _cache_as(root: str, interp: str, identity: str) -> ldcache.LdCache | None:
    path = os.path.join(root, "etc/ld.so.cache")
    if os.path.exists(path):
        return ldcache.read_cache(path)
    if root == "/":
        return None
    # Here: +10 ms CPU on `resolve` at the top (benchmarks/START.md).
    from bazel_ldfix.loader import ldconfig

    return ldconfig.scan_sysroot(root, soname_of=_soname_of,
                                 trusted_dirs=host_of(interp).system_dirs,
                                 flags=profile_of(interp).flags_ok.default)


def _soname_of(path: str) -> str | None:
    try:
        info = elf.read_elf(path)
    except BadInputError:
        return None
    if info.header.type != elf.ET_DYN:
        return None
    return info.soname or ""


def cache_lookup(info: elf.ElfInfo, options: Options) -> CacheLookup | None:
    if options.inhibit_cache:
        return None
    return _lookup(options.root, interp_for(info, options.loader))[1]


def _lookup(root: str, interp: str) -> tuple[str, CacheLookup | None]:
    """The cache's identity now, and the lookup function of that reading."""
    identity = cache_identity(root)
    return identity, _lookup_in(root, interp, identity)


@functools.cache
def _lookup_in(root: str, interp: str, identity: str) -> CacheLookup | None:
    """One lookup function per reading of a cache and loader, remembering its answers (a
    reading cannot change)."""
    cache = _cache_as(root, interp, identity)
    if cache is None:
        return None
    return functools.cache(functools.partial(profile_of(interp).lookup, cache))


@dataclass(frozen=True)
class LoaderFactory:
    """This machine's loader (or the one the user named with --loader) and its cache, for
    each file the repair or the diagnosis models: the
    :class:`~bazel_ldfix.loader.search.LoaderSource` they take."""

    loader: str | None = None           # --loader; None: the trusted loader of each file
    memo: Memo | None = None            # what the command learns of files, shared

    def make_loader(self, info: elf.ElfInfo, env: Environment) -> Loader:
        interp = interp_for(info, self.loader)
        if self.memo is not None and self.memo.watching:
            # What the host's loader said, and which loader a file gets, are facts too.
            self.memo.keep("trusted", "\0".join([info.interp or "", str(info.elf_class),
                                                 str(info.machine), self.loader or ""]))
            self.memo.keep("loader", interp)
        return Loader(host_of(interp), env, self.memo)

    def cache_for(self, info: elf.ElfInfo) -> CacheLookup | None:
        identity, lookup = _lookup("/", interp_for(info, self.loader))
        if self.memo is not None and self.memo.watching:
            # The identity of the very reading the lookups use, not of the file as it is
            # when this is kept: a repair made from an older reading is never given again.
            self.memo.keep_as("key", "/etc/ld.so.cache", identity)
        return lookup

    def warm(self) -> None:
        """Ask the loader of this machine's programs now what every model of one asks
        first (its search rules, its reading of the cache, the cache): while Bazel builds,
        rather than after."""
        header = host_header()
        path = host.trusted_for(None, header.elf_class, header.machine, self.loader).path
        host_of(path)
        _lookup("/", path)


def loader_for(info: elf.ElfInfo, options: Options) -> Loader:
    env = Environment(options.library_path, options.cwd, cache_lookup(info, options),
                      options.root)
    return Loader(host_of(interp_for(info, options.loader)), env)


def resolve_file(path: str, options: Options) -> Resolution:
    """The model's load of ``path``; BadInputError for anything that is not a loadable ELF."""
    if os.path.isdir(path):
        raise BadInputError(f"{path}: is a directory")
    info = elf.read_elf(path)
    note = trusted_for(info, options.loader).note
    result = loader_for(info, options).resolve(path, info=info)
    return dataclasses.replace(result, notes=(note,)) if note else result


@functools.cache
def host_header() -> elf.ElfHeader:
    """The ELF class and machine of programs this machine runs: those of this interpreter."""
    return elf.read_header(os.path.realpath(sys.executable))


@dataclass(frozen=True)
class Unversioned:
    """A searched directory holding the unversioned file of a missing name: ``libX.so``,
    whose SONAME is the ``libX.so.N`` the loader asked for (what a cc_import of ``libX.so``
    stages), and where the file named like the SONAME is, when it is beside the target."""

    dir: str
    file: str
    soname: str
    versioned: str | None


def unversioned_files(lib: Library) -> tuple[Unversioned, ...]:
    """For a name the loader did not find: the searched directories that hold its
    unversioned twin (``libvendor.so`` with SONAME ``libvendor.so.3``)."""
    name = lib.name
    stem, dot_so, version = name.partition(".so.")
    if lib.path is not None or not dot_so or not version or "/" in name:
        return ()
    file = stem + ".so"
    out: list[Unversioned] = []
    seen: set[str] = set()
    for step in lib.steps:
        for directory in step.dirs if not step.skipped else ():
            directory = os.path.normpath(directory) if directory else directory
            path = os.path.join(directory, file)
            if not directory or directory in seen or not os.path.isfile(path):
                continue
            seen.add(directory)
            if _soname_of(path) != name:
                continue
            beside = os.path.join(os.path.dirname(_out_of_bazel_out(path)), name)
            if not os.path.isfile(beside):
                beside = os.path.join(os.path.dirname(os.path.realpath(path)), name)
            out.append(Unversioned(directory, file, name,
                                   beside if os.path.isfile(beside) else None))
    return tuple(out)


def _out_of_bazel_out(path: str) -> str:
    """Where Bazel's staging symlinks lead, up to the first path outside ``bazel-out`` and
    the runfiles: ``<output_base>/external/<repo>/...`` rather than what a local
    repository's own symlinks lead to."""
    for _ in range(8):
        if not os.path.islink(path) or ("/bazel-out/" not in path and ".runfiles/" not in path):
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
    return path


def _loader_fact(interp: str) -> str:
    """The fact a memo keeps of the loader ``interp`` names: its answers, as they are now."""
    # Here: +10 ms CPU on `resolve` at the top (benchmarks/START.md).
    import hashlib

    answers = repr((host_of(interp), profile_of(interp)))
    return hashlib.blake2b(answers.encode("utf-8", "surrogateescape"),
                           digest_size=16).hexdigest()


def _trusted_fact(question: str) -> str:
    """The fact a memo keeps of the loader trusted for a kind of program, as it is now."""
    interp, elf_class, machine, loader = question.split("\0")
    try:
        return repr(host.trusted_for(interp or None, int(elf_class), int(machine),
                                     loader or None))
    except (LdfixError, OSError, ValueError) as exc:
        return f"!{exc}"


facts.register("loader", _loader_fact)
facts.register("trusted", _trusted_fact)

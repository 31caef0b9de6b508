"""glibc's dynamic loader, simulated: which file each DT_NEEDED name loads, and why.

The answers' types are :mod:`bazel_ldfix.loader.resolution`; a candidate's checks
:mod:`bazel_ldfix.loader.verify`; ``$ORIGIN`` and search-list parsing
:mod:`bazel_ldfix.loader.paths`.

The specification is glibc 2.36's elf/dl-load.c (``_dl_map_object``, ``open_path``,
``open_verify``, ``fillin_rpath``, ``_dl_dst_substitute``, ``_dl_map_object_from_fd``),
elf/dl-deps.c (``_dl_map_object_deps``) and the listing part of elf/rtld.c. Each step below
names the part of glibc it follows. Paths are kept as the loader builds them (directory string
+ subdirectory + name, never normalised), so that they compare equal to what ``ld.so --list``
prints; ``Resolution.libraries`` is in the order it prints them."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn, Protocol

from bazel_ldfix import elf, pathlist
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.host import Host

if TYPE_CHECKING:
    from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.paths import decompose, substitute
from bazel_ldfix.loader.resolution import (
    CacheLookup,
    Environment,
    Library,
    PassedOver,
    PassReason,
    Resolution,
    SearchStep,
    VersionProblem,
    Via,
)
from bazel_ldfix.loader.verify import Verdict, absent, runs_as_program, verify_in

VDSO_NAMES = {62: "linux-vdso.so.1", 3: "linux-gate.so.1", 183: "linux-vdso.so.1"}


# open_path goes on to the next directory only after these errors; any other one (ELOOP,
# ENXIO, ...) in a directory that exists abandons the rest of that search list.
_SEARCH_ON = (errno.ENOENT, errno.EACCES, errno.ENOTDIR)




class _LoadError(Exception):
    """The loader gives up on the whole load (glibc's ``_dl_signal_error``)."""

    def __init__(self, message: str, blocked: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.blocked = blocked


@dataclass(eq=False)
class _Object:
    """A link map: an object in the namespace (mutable while loading; compared by identity)."""

    path: str                 # l_name, as built by the loader
    names: list[str]          # l_libname
    info: elf.ElfInfo | None
    loader: _Object | None    # l_loader: whose search paths found it
    origin: str | None
    file_id: tuple[int, int] | None
    via: Via | None
    depth: int
    needed_by: list[str] = field(default_factory=list)
    faked: bool = False       # a "not found" placeholder (trace mode)
    error: str | None = None
    steps: tuple[SearchStep, ...] = ()
    rejected: tuple[PassedOver, ...] = ()

    def matches(self, name: str) -> bool:
        # _dl_name_match_p, plus the SONAME that _dl_map_object adds on first use.
        if name == self.path or name in self.names:
            return True
        return self.info is not None and self.info.soname == name


_Found = tuple[str, Verdict, Via]


class _Namespace:
    """The objects of one load, in glibc's chain order, and the directories known to exist."""

    def __init__(self, main: _Object) -> None:
        self.main = main
        self.chain: list[_Object] = [main]       # l_next order, without the interpreter
        self.rtld: _Object | None = None
        self.searchlist: list[_Object] = []      # the main object's breadth-first scope
        self.dir_exists: dict[str, bool] = {}    # open_path's r_dir_status, per dir + subdir
        self.main_end = 0                        # len(chain) once the program's closure is in
        # The loaded objects of the chain by every name they match, and by file identity:
        # the first in chain order, as a walk of the chain finds them (the interpreter,
        # which such a walk meets last, is looked at apart).
        self._by_name: dict[str, _Object] = {}
        self._by_file: dict[tuple[int, int], _Object] = {}
        self._index(main)

    def add(self, obj: _Object) -> None:
        self.chain.append(obj)
        self._index(obj)

    def _index(self, obj: _Object) -> None:
        if obj.faked or obj.error is not None:
            return
        for name in (obj.path, *obj.names):
            self._by_name.setdefault(name, obj)
        if obj.info is not None and obj.info.soname is not None:
            self._by_name.setdefault(obj.info.soname, obj)
        if obj.file_id is not None:
            self._by_file.setdefault(obj.file_id, obj)

    def named(self, name: str) -> _Object | None:
        """The first loaded object that matches ``name`` (_dl_name_match_p)."""
        obj = self._by_name.get(name)
        if obj is None and self._usable_rtld() and self.rtld and self.rtld.matches(name):
            obj = self.rtld
        return obj

    def same_file(self, file_id: tuple[int, int] | None) -> _Object | None:
        if file_id is None:
            return None
        obj = self._by_file.get(file_id)
        if obj is None and self._usable_rtld() and self.rtld and self.rtld.file_id == file_id:
            obj = self.rtld
        return obj

    def add_name(self, obj: _Object, name: str) -> None:
        if name not in obj.names:
            obj.names.append(name)
            if obj is not self.rtld:
                self._by_name.setdefault(name, obj)

    def _usable_rtld(self) -> bool:
        return self.rtld is not None and not self.rtld.faked and self.rtld.error is None


class Loader:
    """Simulates one run of the loader for one program (or library) and its dependencies."""

    def __init__(self, host: Host, env: Environment, memo: Memo | None = None) -> None:
        self.host = host
        self.env = env
        self.memo = memo   # what this command already knows of files and directories

    # -- the public entry -------------------------------------------------------------------

    def resolve(self, path: str, extra: Sequence[str] = (),
                info: elf.ElfInfo | None = None) -> Resolution:
        """Load ``path`` and its DT_NEEDED closure, then ``extra`` objects as if dlopen()ed by it.

        Where ``path``'s own ``$ORIGIN`` comes from depends on who opens it
        (:func:`opened_path`): a program is started by the kernel, whose /proc/self/exe
        resolves the symlinks of a Bazel runfiles tree; a shared library is opened by name
        (dlopen, or ``ld.so FILE``), and its ``$ORIGIN`` is that name's directory.
        """
        info = info or self._read_elf(path)
        self._expect = info.header
        # The program has no file identity in the namespace (glibc leaves l_file_id zero for
        # it), so a library that names the program's file is loaded, and refused, anew.
        main = _Object(path, [path], info, None, self._main_origin(path, info), None, None, 0)
        self._ns = ns = _Namespace(main)
        self._add_fixed_objects(info)
        error = None
        try:
            ns.searchlist = self._load_closure(main)
            ns.main_end = len(ns.chain)
            for extra_path in extra:
                dep = self._map(main, extra_path, depth=1)
                self._load_closure(dep)
            versions = self._check_versions()
        except _LoadError as exc:
            error = exc.message
            versions = ()
            blocked = exc.blocked
        else:
            blocked = None
        libraries = tuple(self._libraries())
        return Resolution(path, info, libraries, error, versions, blocked=blocked,
                          program_libraries=self._program_count())

    def _program_count(self) -> int:
        """How many listed objects, from the first, belong to the program's own closure.

        The extra objects come after it in the chain (and never before the interpreter,
        which is placed by the program's search list), so the listing of the closure
        alone is a prefix of the whole listing.
        """
        ns = self._ns
        own = {id(o) for o in ns.chain[:ns.main_end or len(ns.chain)]}
        if ns.rtld is not None:
            own.add(id(ns.rtld))
        count = 0
        for obj in self._listing():
            if id(obj) not in own:
                break
            count += 1
        return count

    # -- symbol versions (dl-version.c, _dl_check_all_versions) -------------------------------

    def _check_versions(self) -> tuple[VersionProblem, ...]:
        """Every object's .gnu.version_r checked against what its dependencies define.

        As in trace mode: a dependency that was not found is skipped; a missing version is
        reported, not fatal (a real start stops at the first). An object with DT_RELR that
        needs versions but not GLIBC_ABI_DT_RELR stops the load even here (glibc 2.36).
        """
        ns = self._ns
        chain = [ns.main, *self._listing()]
        problems: list[VersionProblem] = []
        defined: dict[int, frozenset[str]] = {}
        for obj in chain:
            if obj.faked or obj.info is None or not obj.info.version_needs:
                continue
            relr_ref = False
            for need in obj.info.version_needs:
                target = next((o for o in chain if o.path == need.file or need.file in o.names
                               or (o.info is not None and o.info.soname == need.file)), None)
                if target is None or target.faked or target.info is None:
                    continue
                relr_ref |= "GLIBC_ABI_DT_RELR" in need.versions
                if not target.info.has_verdef:
                    problems.append(VersionProblem(target.path, obj.path, None))
                    continue
                if id(target) not in defined:
                    read = (self.memo.version_definitions if self.memo
                            else elf.version_definitions)
                    defined[id(target)] = frozenset(read(self._host_path(target.path)))
                for version, weak in zip(need.versions, need.weak, strict=True):
                    if version not in defined[id(target)]:
                        problems.append(VersionProblem(target.path, obj.path, version, weak))
            # glibc 2.36 asks this of objects that need libc (LIBC_SO, libc.so.6 on every
            # architecture this project runs on).
            if obj.info.has_relr and "libc.so.6" in obj.info.needed and not relr_ref:
                raise _LoadError(f"{obj.path}: DT_RELR without GLIBC_ABI_DT_RELR dependency")
        return tuple(problems)

    # -- namespace set-up (rtld.c) ----------------------------------------------------------

    def _add_fixed_objects(self, info: elf.ElfInfo) -> None:
        """The vDSO and the loader itself are in the namespace before any search."""
        vdso = VDSO_NAMES.get(info.machine)
        if vdso:
            self._ns.add(_Object(vdso, [vdso], None, None, None, None, Via.VDSO, 1))
        # The interpreter is known by the program's PT_INTERP string (or, for a library
        # given as the file, the loader's own path) and by its SONAME.
        interp = info.interp or self.host.interp
        rtld_info = None
        file_id = None
        host_path = self._rooted(interp)
        try:
            rtld_info = self._read_elf(host_path)
            st = os.stat(host_path)
            file_id = (st.st_dev, st.st_ino)
        except (BadInputError, OSError):
            pass
        self._ns.rtld = _Object(interp, [interp], rtld_info, None, os.path.dirname(interp),
                                file_id, Via.INTERPRETER, 1)

    def _listing(self) -> list[_Object]:
        """The chain as ``ld.so --list`` walks it (rtld.c, after _dl_map_object_deps).

        The interpreter is unlinked, then put back after the object that precedes it in the
        program's breadth-first search list (not-found entries are not in that list); if no
        object needs it, it is not listed. A program without DT_NEEDED lists nothing
        ("statically linked").
        """
        ns = self._ns
        chain = list(ns.chain)
        visible = [o for o in ns.searchlist if not o.faked]
        rtld = ns.rtld
        if rtld is not None and rtld in visible and visible.index(rtld) > 0:
            before = visible[visible.index(rtld) - 1]
            chain.insert(chain.index(before) + 1, rtld)
        assert ns.main.info is not None
        if not ns.main.info.needed:
            return [o for o in ns.chain[ns.main_end or len(ns.chain):] if o is not rtld]
        return chain[1:]

    def _libraries(self) -> list[Library]:
        out = []
        for obj in self._listing():
            out.append(Library(
                name=obj.names[0],
                path=None if obj.faked or obj.error else obj.path,
                via=obj.via, needed_by=tuple(obj.needed_by), error=obj.error,
                steps=obj.steps, rejected=obj.rejected, depth=obj.depth,
                parent=obj.loader.path if obj.loader else None,
                info=obj.info))
        return out

    # -- breadth-first loading (dl-deps.c, _dl_map_object_deps) -----------------------------

    def _load_closure(self, root: _Object) -> list[_Object]:
        """Map every DT_NEEDED of every object, one object at a time; the search list."""
        queue = [root]
        queued = {id(root)}
        for obj in queue:
            if obj.info is None or obj.faked:
                continue
            for needed in obj.info.needed:
                name = self._expand_needed(obj, needed)
                if name is None:
                    continue
                dep = self._map(obj, name, depth=obj.depth + 1)
                if obj.path not in dep.needed_by:
                    dep.needed_by.append(obj.path)
                if id(dep) not in queued:
                    queued.add(id(dep))
                    queue.append(dep)
        return queue

    def _expand_needed(self, obj: _Object, needed: str) -> str | None:
        # dl-deps.c expands DSTs with "fatal" off for DT_NEEDED: an entry whose token has no
        # value is dropped without a word.
        if "$" not in needed:
            return needed
        return self._substitute(needed, obj.origin) or None

    # -- one name (dl-load.c, _dl_map_object) ----------------------------------------------

    def _map(self, loader: _Object, name: str, depth: int) -> _Object:
        ns = self._ns
        # 1. An object already loaded under this name (or SONAME) is reused. "Not found"
        #    placeholders are not (_dl_map_object skips l_faked), so a missing name is
        #    searched, and listed, once per object that needs it.
        known = ns.named(name)
        if known is not None:
            ns.add_name(known, name)
            return known

        steps: list[SearchStep] = []
        rejected: list[PassedOver] = []
        found: _Found | None
        if "/" in name:
            # 2. A name with a slash is a path, opened as it is (DSTs already expanded).
            steps.append(SearchStep(Via.PATH, (os.path.dirname(name),)))
            path = self._rooted(name)
            found = self._take(path, self._verify(self._host_path(path)), Via.PATH, rejected)
        else:
            found = self._search(loader, name, steps, rejected)

        if found is None:
            obj = _Object(name, [name], None, loader, None, None, None, depth, faked=True,
                          steps=tuple(steps), rejected=tuple(rejected))
            ns.add(obj)
            return obj
        realname, verdict, via = found
        if verdict.fatal and not verdict.names_request:
            # open_verify's errors stop the load at once and name the file it opened.
            self._fail(name, realname, realname, verdict.reason or "",
                       realname if verdict.blocks else None)
        # 3. The same file under another name is the same object (_dl_map_object_from_fd
        #    compares device and inode before it maps anything).
        same = ns.same_file(verdict.file_id)
        if same is not None:
            ns.add_name(same, name)
            return same
        if verdict.fatal:
            # Only the checks made while mapping are left; glibc names the request in them.
            self._fail(name, realname, name, verdict.reason or "")
        obj = _Object(realname, [name], verdict.info, loader, self._origin_of(realname),
                      verdict.file_id, via, depth, steps=tuple(steps),
                      rejected=tuple(rejected))
        ns.add(obj)
        return obj

    def _fail(self, name: str, realname: str, objname: str, message: str,
              blocked: str | None = None) -> NoReturn:
        obj = _Object(realname, [name], None, None, None, None, None, 0, error=message)
        self._ns.add(obj)
        raise _LoadError(f"{objname}: {message}", blocked)

    def _take(self, realname: str, verdict: Verdict, via: Via,
              rejected: list[PassedOver]) -> _Found | None:
        """The realname and verdict if the search ends here (a usable file, or a fatal one)."""
        if verdict.fatal or verdict.accepted:
            return realname, verdict, via
        if verdict.exists and verdict.reason is not None:
            rejected.append(PassedOver(realname, PassReason.NOT_LOADABLE, verdict.reason))
        return None

    def _search(self, loader: _Object, name: str, steps: list[SearchStep],
                rejected: list[PassedOver]) -> _Found | None:
        ns = self._ns
        main = ns.main
        assert loader.info is not None
        # a. DT_RPATH of the requester and of its loaders up to the program, unless the
        #    requester has a DT_RUNPATH. An object with DT_RUNPATH has no DT_RPATH at all
        #    (get-dynamic-info.h drops it), so such an ancestor contributes nothing.
        if loader.info.runpath is None:
            chain: list[_Object] = []
            obj: _Object | None = loader
            while obj is not None:
                chain.append(obj)
                obj = obj.loader
            if main not in chain:
                chain.append(main)  # "try the DT_RPATH of the executable itself"
            any_rpath = False
            for obj in chain:
                if obj.info is None or not obj.info.rpath or obj.info.runpath is not None:
                    continue  # decompose_rpath ignores an empty DT_RPATH string
                any_rpath = True
                dirs = self._decompose(obj.info.rpath.split(":"), obj.origin)
                steps.append(SearchStep(Via.RPATH, dirs))
                hit = self._open_path(name, dirs, Via.RPATH, rejected)
                if hit:
                    return hit
            if not any_rpath:
                steps.append(SearchStep(Via.RPATH, (), "no DT_RPATH on the loading chain"))
        else:
            steps.append(SearchStep(Via.RPATH, (), "the requesting object has a DT_RUNPATH"))

        # b. LD_LIBRARY_PATH, split on ':' and ';', each element expanded with the program's
        #    $ORIGIN (_dl_init_paths, fillin_rpath).
        if self.env.library_path:
            dirs = self._library_path_dirs(main.origin)
            steps.append(SearchStep(Via.LD_LIBRARY_PATH, dirs))
            hit = self._open_path(name, dirs, Via.LD_LIBRARY_PATH, rejected)
            if hit:
                return hit
        else:
            steps.append(SearchStep(Via.LD_LIBRARY_PATH, (), "not set"))

        # c. The requester's own DT_RUNPATH (never its loaders').
        if loader.info.runpath:
            dirs = self._decompose(loader.info.runpath.split(":"), loader.origin)
            steps.append(SearchStep(Via.RUNPATH, dirs))
            hit = self._open_path(name, dirs, Via.RUNPATH, rejected)
            if hit:
                return hit
        else:
            steps.append(SearchStep(Via.RUNPATH, (), "the requesting object has no DT_RUNPATH"))

        nodeflib = loader.info.nodeflib
        # d. /etc/ld.so.cache; with DF_1_NODEFLIB, hits inside the system directories are
        #    thrown away (a prefix match, as glibc's memcmp).
        if self.env.cache is None:
            steps.append(SearchStep(Via.CACHE, (), "not consulted (--inhibit-cache)"))
        else:
            cached = self.env.cache(name)
            if cached is not None:
                # A sysroot's cache names paths inside the root; report where they are.
                cached = self._rooted(cached)
            if cached is not None and nodeflib and any(
                    cached.startswith(self._rooted(d).rstrip("/") + "/")
                    for d in self.host.system_dirs):
                steps.append(SearchStep(Via.CACHE, (os.path.dirname(cached),),
                                        f"{cached} ignored: DF_1_NODEFLIB"))
                cached = None
            if cached is not None:
                steps.append(SearchStep(Via.CACHE, (os.path.dirname(cached),)))
                verdict = self._verify(cached)
                hit = self._take(cached, verdict, Via.CACHE, rejected)
                if hit:
                    return hit
            elif not nodeflib:
                steps.append(SearchStep(Via.CACHE, (), "no entry"))

        # e. The system directories, unless DF_1_NODEFLIB.
        if nodeflib:
            steps.append(SearchStep(Via.DEFAULT, (), "skipped: the requester has DF_1_NODEFLIB"))
            return None
        dirs = tuple(self._rooted(d) for d in self.host.system_dirs)
        steps.append(SearchStep(Via.DEFAULT, dirs))
        return self._open_path(name, dirs, Via.DEFAULT, rejected)

    # -- directories (fillin_rpath, open_path) ---------------------------------------------

    def _library_path_dirs(self, origin: str | None) -> tuple[str, ...]:
        """LD_LIBRARY_PATH's directories (the same for every object of every test)."""
        value = self.env.library_path or ""
        if self.memo is None:
            return self._decompose(pathlist.split(value), origin)
        key = (value, origin if "$" in value else None, self.host.lib, self.host.platform,
               self.env.root)
        return self.memo.remember("library_path", key,
                                  lambda: self._decompose(pathlist.split(value), origin))

    def _decompose(self, elements: Sequence[str], origin: str | None) -> tuple[str, ...]:
        values = {"ORIGIN": origin, "LIB": self.host.lib, "PLATFORM": self.host.platform}
        if self.memo is None:
            return decompose(elements, values, self._rooted)
        key = (tuple(elements), origin if any("$" in e for e in elements) else None,
               self.host.lib, self.host.platform, self.env.root)
        return self.memo.remember("dirs", key,
                                  lambda: decompose(elements, values, self._rooted))

    def _open_path(self, name: str, dirs: Sequence[str], via: Via,
                   rejected: list[PassedOver]) -> _Found | None:
        """Try ``name`` in every subdirectory of every directory, in order.

        With a memo, a search already made is not made again. Its outcome does not depend
        on the directories this load already knows to be missing: those are only skipped
        when a later subdirectory of the same directory ("", the directory itself, comes
        last) decides the errno that ends the search.
        """
        memo = self.memo
        if memo is None or self.host.subdirs[-1:] != ("",):
            return self._open_path_now(name, dirs, via, rejected)
        dirs = tuple(dirs)
        relative = memo.relative(dirs)
        key = (name, dirs, via, self._expect.elf_class, self._expect.data,
               self._expect.machine, self.env.cwd if relative else None, self.host.subdirs)

        def search() -> tuple[_Found | None, tuple[PassedOver, ...]]:
            here: list[PassedOver] = []
            where = dirs
            if name not in (".", ".."):
                # Only the directories where one subdirectory lists the name (or cannot be
                # listed): in the others every subdirectory ends in ENOENT or ENOTDIR, which
                # ends nothing.
                folded = name.casefold()
                where = tuple(d for d in dirs if self._may_hold(d, name, folded))
            return self._open_path_now(name, where, via, here), tuple(here)

        found, passed = memo.remember("search", key, search)
        rejected += passed
        return found

    def _may_hold(self, directory: str, name: str, folded: str) -> bool:
        """Whether a subdirectory of ``directory`` lists ``name`` (or its case-folded
        form), or cannot be listed."""
        names, opaque = self._directory_names(directory)
        return opaque or name in names or folded in names

    def _directory_names(self, directory: str) -> tuple[frozenset[str], bool]:
        """The names listed in the subdirectories of ``directory`` (also case-folded), and
        whether one of them cannot be listed."""
        assert self.memo is not None
        memo = self.memo

        def build() -> tuple[frozenset[str], bool]:
            names: set[str] = set()
            opaque = False
            # Parents first: a subdirectory its parent's listing lacks is not listed.
            for sub in sorted(self.host.subdirs, key=lambda s: s.count("/") + (s != "")):
                listing = memo.listing(self._host_path(_join(directory, sub)))
                if listing.names is None:
                    opaque = True
                else:
                    names |= listing.names
                    names |= listing.folded
            return frozenset(names), opaque

        key = (directory, self.host.subdirs,
               None if directory.startswith("/") else self.env.cwd)
        return memo.remember("directory_names", key, build)

    def _open_path_now(self, name: str, dirs: Sequence[str], via: Via,
                       rejected: list[PassedOver]) -> _Found | None:
        last_errno = errno.ENOENT   # glibc's errno, as open_path reads it after a directory
        for directory in dirs:
            here_any = False
            for sub in self.host.subdirs:
                base = _join(directory, sub)
                exists = self._ns.dir_exists.get(base)
                if exists is False:
                    continue  # known not to exist: not even tried
                realname = base + name
                listing = self.memo.listing(self._host_path(base)) if self.memo else None
                if listing is not None and listing.lacks(name):
                    # What open() would say, without asking: the name is not there.
                    verdict = absent(listing.missing_errno or errno.ENOENT)
                else:
                    verdict = self._verify(self._host_path(realname))
                hit = self._take(realname, verdict, via, rejected)
                if hit:
                    return hit
                last_errno = verdict.open_errno or errno.ENOENT
                if exists is None:
                    # Relative directories are never marked missing: the cwd may change.
                    exists = not base or not base.startswith("/") or (
                        listing.is_dir if listing is not None else _is_dir(base))
                    if not exists:
                        last_errno = errno.ENOENT
                    self._ns.dir_exists[base] = exists
                here_any = here_any or exists
            if here_any and last_errno not in _SEARCH_ON:
                return None  # e.g. ELOOP: the rest of this list is not searched
        return None

    def _verify(self, path: str) -> Verdict:
        return verify_in(self.memo, path, self._expect)

    def _read_elf(self, path: str) -> elf.ElfInfo:
        return self.memo.read_elf(path) if self.memo else elf.read_elf(path)

    def _host_path(self, realname: str) -> str:
        """Where the loader, started in env.cwd, would open ``realname``."""
        return realname if realname.startswith("/") else os.path.join(self.env.cwd, realname)

    # -- dynamic string tokens (_dl_dst_substitute) ------------------------------------------

    def _substitute(self, text: str, origin: str | None) -> str:
        values = {"ORIGIN": origin, "LIB": self.host.lib, "PLATFORM": self.host.platform}
        return substitute(text, values)

    def _main_origin(self, path: str, info: elf.ElfInfo) -> str:
        """The ``$ORIGIN`` of the file resolved: see :func:`opened_path`."""
        if runs_as_program(info):
            real = self.memo.realpath(path) if self.memo else os.path.realpath(path)
            return os.path.dirname(real)
        return self._origin_of(path)

    def _origin_of(self, realname: str) -> str:
        """The directory part of the name the object was opened under (_dl_new_object)."""
        full = realname if realname.startswith("/") else os.path.join(self.env.cwd, realname)
        head = full.rsplit("/", 1)[0]
        return head or "/"

    def _rooted(self, path: str) -> str:
        if self.env.root == "/" or not path.startswith("/") or path.startswith(
                self.env.root.rstrip("/") + "/"):
            return path
        return self.env.root.rstrip("/") + path


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def _join(directory: str, sub: str) -> str:
    """Directory plus subdirectory, ready for a file name: "" stays relative to the cwd."""
    parts = directory
    if parts and not parts.endswith("/"):
        parts += "/"
    if sub:
        parts += sub + "/"
    return parts


class LoaderSource(Protocol):
    """Where a model gets the loader of each object it resolves, and that loader's cache
    (:class:`bazel_ldfix.loader.closure.LoaderFactory` is this machine's)."""

    def make_loader(self, info: elf.ElfInfo, env: Environment) -> Loader: ...

    def cache_for(self, info: elf.ElfInfo) -> CacheLookup | None: ...


@dataclass(frozen=True)
class Loaders:
    """A :class:`LoaderSource` made of two functions."""

    make: Callable[[elf.ElfInfo, Environment], Loader]
    cache: Callable[[elf.ElfInfo], CacheLookup | None]

    def make_loader(self, info: elf.ElfInfo, env: Environment) -> Loader:
        return self.make(info, env)

    def cache_for(self, info: elf.ElfInfo) -> CacheLookup | None:
        return self.cache(info)

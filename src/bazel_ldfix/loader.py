"""glibc's dynamic loader, simulated: which file each DT_NEEDED name loads, and why.

The specification is glibc's elf/dl-load.c (``_dl_map_object``, ``open_path``,
``open_verify``, ``fillin_rpath``, ``_dl_dst_substitute``) and elf/dl-deps.c
(``_dl_map_object_deps``). Each step below names the part of glibc it follows. Paths are kept
as the loader builds them (directory string + subdirectory + name, never normalised), so that
they compare equal to what ``ld.so --list`` prints.
"""

from __future__ import annotations

import enum
import errno
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bazel_ldfix import elf, pathlist
from bazel_ldfix.errors import BadInputError, NotElfError
from bazel_ldfix.host import Host

VDSO_NAMES = {62: "linux-vdso.so.1", 3: "linux-gate.so.1", 183: "linux-vdso.so.1"}
DF_1_PIE = 0x08000000
# glibc's LIBC_ABI_MAX for EI_ABIVERSION under ELFOSABI_GNU (UNIQUE, IFUNC, ABSOLUTE).
_LIBC_ABI_MAX = 4
ELFOSABI_SYSV, ELFOSABI_GNU = 0, 3

CacheLookup = Callable[[str], "str | None"]


class Via(str, enum.Enum):
    """How the loader found an object (libtree's ``how``)."""

    RPATH = "rpath"
    LD_LIBRARY_PATH = "LD_LIBRARY_PATH"
    RUNPATH = "runpath"
    CACHE = "ld.so.cache"
    DEFAULT = "default"
    PATH = "path"              # the DT_NEEDED entry contains a slash
    INTERPRETER = "interpreter"
    VDSO = "vdso"


@dataclass(frozen=True)
class SearchStep:
    """One step of the search for a name, with the directories it tried (or why it did not)."""

    via: Via
    dirs: tuple[str, ...]
    skipped: str | None = None   # e.g. "the requester has a DT_RUNPATH"


@dataclass(frozen=True)
class Rejection:
    """A file that exists where the loader looked, and why it was passed over."""

    path: str
    reason: str


@dataclass(frozen=True)
class Library:
    """One DT_NEEDED name and what the loader made of it."""

    name: str
    path: str | None                  # None: not found, or the load failed (see error)
    via: Via | None
    needed_by: tuple[str, ...]
    error: str | None = None          # glibc's words when the load stops at this file
    steps: tuple[SearchStep, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    depth: int = 1
    parent: str | None = None         # path of the object that first needed it
    info: elf.ElfInfo | None = field(default=None, compare=False, repr=False)

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class Resolution:
    """The load of one file: every object in load (breadth-first) order."""

    file: str
    info: elf.ElfInfo
    libraries: tuple[Library, ...]
    error: str | None = None          # set when the loader would stop with an error

    @property
    def missing(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for lib in self.libraries:
            if lib.path is None:
                seen.setdefault(lib.name, None)
        return tuple(seen)


@dataclass(frozen=True)
class Environment:
    """What the loader reads from outside the files: the environment and the cache."""

    library_path: str | None = None         # LD_LIBRARY_PATH
    cwd: str = "/"
    cache: CacheLookup | None = None         # None: --inhibit-cache, or no cache
    root: str = "/"                          # resolve as if this were /


class _LoadError(Exception):
    """The loader gives up on the whole load (glibc's ``_dl_signal_error``)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


@dataclass
class _Object:
    """A link map: an object in the namespace (mutable while loading)."""

    path: str                 # l_name, as built by the loader
    names: list[str]          # l_libname
    info: elf.ElfInfo | None
    loader: _Object | None
    origin: str | None
    file_id: tuple[int, int] | None
    via: Via | None
    depth: int
    needed_by: list[str] = field(default_factory=list)
    faked: bool = False       # a "not found" placeholder (trace mode)
    error: str | None = None
    steps: tuple[SearchStep, ...] = ()
    rejected: tuple[Rejection, ...] = ()

    def matches(self, name: str) -> bool:
        # _dl_name_match_p, plus the SONAME that _dl_map_object adds on first use.
        if name == self.path or name in self.names:
            return True
        return self.info is not None and self.info.soname == name


@dataclass
class _Candidate:
    info: elf.ElfInfo | None = None
    rejected: str | None = None       # skipped, the search goes on
    fatal: str | None = None          # the load stops


class Loader:
    """Simulates one run of the loader for one program (or library) and its dependencies."""

    def __init__(self, host: Host, env: Environment) -> None:
        self.host = host
        self.env = env

    # -- the public entry -------------------------------------------------------------------

    def resolve(self, path: str, extra: Sequence[str] = ()) -> Resolution:
        """Load ``path`` and its DT_NEEDED closure, then ``extra`` objects as if dlopen()ed by it.

        The program's own ``$ORIGIN`` is the directory of its real path: the kernel starts it
        through /proc/self/exe, which resolves the symlinks of a Bazel runfiles tree.
        """
        info = elf.read_elf(path)
        self._expect = info.header
        real = os.path.realpath(path)
        st = os.stat(real)
        main = _Object(path, [path], info, None, os.path.dirname(real), (st.st_dev, st.st_ino),
                       None, 0)
        self.objects: list[_Object] = [main]
        self._add_fixed_objects(info)
        error = None
        try:
            self._load_closure(main)
            for extra_path in extra:
                dep = self._map(main, extra_path, depth=1)
                self._load_closure(dep)
        except _LoadError as exc:
            error = exc.message
        return Resolution(path, info, tuple(self._libraries()), error)

    # -- namespace set-up -------------------------------------------------------------------

    def _add_fixed_objects(self, info: elf.ElfInfo) -> None:
        """The vDSO and the loader itself are in the namespace before any search."""
        vdso = VDSO_NAMES.get(info.machine)
        if vdso and info.interp:
            self.objects.append(_Object(vdso, [vdso], None, None, None, None, Via.VDSO, 1))
        interp = info.interp or self.host.interp
        rtld_info = None
        file_id = None
        host_path = self._rooted(interp)
        try:
            rtld_info = elf.read_elf(host_path)
            st = os.stat(host_path)
            file_id = (st.st_dev, st.st_ino)
        except (BadInputError, OSError):
            pass
        self.objects.append(_Object(interp, [interp], rtld_info, None, os.path.dirname(interp),
                                    file_id, Via.INTERPRETER, 1))

    def _libraries(self) -> list[Library]:
        out = []
        main = self.objects[0]
        for obj in self.objects[1:]:
            if obj.via in (Via.VDSO, Via.INTERPRETER) and not obj.needed_by:
                # Listed by the loader but needed by nobody: still shown.
                pass
            out.append(Library(
                name=obj.names[0] if obj.via is not Via.INTERPRETER else
                (obj.info.soname if obj.info and obj.info.soname else obj.names[0]),
                path=None if obj.faked or obj.error else obj.path,
                via=obj.via, needed_by=tuple(obj.needed_by), error=obj.error,
                steps=obj.steps, rejected=obj.rejected, depth=obj.depth,
                parent=obj.loader.path if obj.loader else (main.path if obj.needed_by else None),
                info=obj.info))
        return out

    # -- breadth-first loading (dl-deps.c, _dl_map_object_deps) -----------------------------

    def _load_closure(self, root: _Object) -> None:
        queue = [root]
        queued = {id(root)}
        for obj in queue:
            if obj.info is None or obj.faked:
                continue
            for needed in obj.info.needed:
                name = self._expand_needed(obj, needed)
                dep = self._map(obj, name, depth=obj.depth + 1)
                if obj.path not in dep.needed_by:
                    dep.needed_by.append(obj.path)
                if id(dep) not in queued:
                    queued.add(id(dep))
                    queue.append(dep)

    def _expand_needed(self, obj: _Object, needed: str) -> str:
        if "$" not in needed:
            return needed
        expanded = self._substitute(needed, obj.origin)
        if not expanded:
            raise _LoadError(needed, f"cannot load auxiliary `{needed}' because of empty "
                                     "dynamic string token substitution")
        return expanded

    # -- one name (dl-load.c, _dl_map_object) ----------------------------------------------

    def _map(self, loader: _Object, name: str, depth: int) -> _Object:
        # 1. An object already loaded under this name (or SONAME) is reused; so is the
        #    "not found" placeholder of trace mode, which is listed once.
        for obj in self.objects:
            if obj.error is None and obj.matches(name):
                if name not in obj.names:
                    obj.names.append(name)
                return obj

        steps: list[SearchStep] = []
        rejected: list[Rejection] = []
        found: tuple[str, elf.ElfInfo, Via] | None = None
        if "/" in name:
            # 2. A name with a slash is a path, opened as it is.
            candidate = self._verify(self._rooted(name))
            steps.append(SearchStep(Via.PATH, (os.path.dirname(name),)))
            found = self._accept(name, name, candidate, Via.PATH, rejected)
        else:
            found = self._search(loader, name, steps, rejected)

        if found is None:
            obj = _Object(name, [name], None, loader, None, None, None, depth, faked=True,
                          steps=tuple(steps), rejected=tuple(rejected))
            self.objects.append(obj)
            return obj
        realname, info, via = found
        st = os.stat(self._rooted(realname) if not os.path.isabs(realname) else realname)
        file_id = (st.st_dev, st.st_ino)
        # 3. The same file under another name is the same object (_dl_map_object_from_fd).
        for obj in self.objects:
            if obj.file_id == file_id and not obj.faked:
                if name not in obj.names:
                    obj.names.append(name)
                return obj
        self._check_loadable(name, realname, info)
        obj = _Object(realname, [name], info, loader, self._origin_of(realname), file_id, via,
                      depth, steps=tuple(steps), rejected=tuple(rejected))
        self.objects.append(obj)
        return obj

    def _check_loadable(self, name: str, realname: str, info: elf.ElfInfo) -> None:
        """Failures of _dl_map_object_from_fd once a file has been chosen."""
        if info.header.type == elf.ET_EXEC:
            self._fail(name, realname, "cannot dynamically load executable")
        if info.flags_1 & DF_1_PIE:
            self._fail(name, realname, "cannot dynamically load position-independent executable")
        if not info.has_dynamic:
            self._fail(name, realname, "object file has no dynamic section")

    def _fail(self, name: str, realname: str, message: str) -> None:
        obj = _Object(realname, [name], None, None, None, None, None, 0, error=message)
        self.objects.append(obj)
        raise _LoadError(name, f"{name}: {message}")

    def _search(self, loader: _Object, name: str, steps: list[SearchStep],
                rejected: list[Rejection]) -> tuple[str, elf.ElfInfo, Via] | None:
        main = self.objects[0]
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
            for obj in chain:
                if obj.info is None or obj.info.rpath is None or obj.info.runpath is not None:
                    continue
                dirs = self._decompose(obj.info.rpath, obj.origin, allow_empty=False)
                steps.append(SearchStep(Via.RPATH, dirs))
                hit = self._open_path(name, dirs, Via.RPATH, rejected)
                if hit:
                    return hit
            if not any(o.info is not None and o.info.rpath and o.info.runpath is None
                       for o in chain):
                steps.append(SearchStep(Via.RPATH, (), "no DT_RPATH on the loading chain"))
        else:
            steps.append(SearchStep(Via.RPATH, (), "the requesting object has a DT_RUNPATH"))

        # b. LD_LIBRARY_PATH, with the program's $ORIGIN (dl-load.c, _dl_init_paths).
        if self.env.library_path:
            expanded = self._substitute(self.env.library_path, main.origin, whole=True)
            dirs = self._decompose_elements(pathlist.split(expanded), None, origin_done=True)
            steps.append(SearchStep(Via.LD_LIBRARY_PATH, dirs))
            hit = self._open_path(name, dirs, Via.LD_LIBRARY_PATH, rejected)
            if hit:
                return hit
        else:
            steps.append(SearchStep(Via.LD_LIBRARY_PATH, (), "not set"))

        # c. The requester's own DT_RUNPATH (never its loaders').
        if loader.info.runpath is not None:
            dirs = self._decompose(loader.info.runpath, loader.origin, allow_empty=False)
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
            if cached is not None and nodeflib and any(
                    cached.startswith(d.rstrip("/") + "/") for d in self.host.system_dirs):
                steps.append(SearchStep(Via.CACHE, (os.path.dirname(cached),),
                                        f"{cached} ignored: DF_1_NODEFLIB"))
                cached = None
            if cached is not None:
                steps.append(SearchStep(Via.CACHE, (os.path.dirname(cached),)))
                hit = self._accept(cached, cached, self._verify(self._rooted(cached)),
                                   Via.CACHE, rejected)
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

    def _decompose(self, value: str, origin: str | None, *, allow_empty: bool) -> tuple[str, ...]:
        return self._decompose_elements(tuple(value.split(":")), origin)

    def _decompose_elements(self, elements: Sequence[str], origin: str | None, *,
                            origin_done: bool = False) -> tuple[str, ...]:
        dirs: list[str] = []
        for element in elements:
            if element:
                uses_origin = _mentions(element, "ORIGIN")
                expanded = element if origin_done else self._substitute(element, origin)
                if not expanded:
                    continue  # an unknown $ORIGIN or an empty result drops the element
                if not uses_origin:
                    expanded = self._rooted(expanded)
                while len(expanded) > 1 and expanded.endswith("/"):
                    expanded = expanded[:-1]
            else:
                expanded = ""  # an empty element is the current directory
            if expanded not in dirs:
                dirs.append(expanded)
        return tuple(dirs)

    def _open_path(self, name: str, dirs: Sequence[str], via: Via,
                   rejected: list[Rejection]) -> tuple[str, elf.ElfInfo, Via] | None:
        for directory in dirs:
            for sub in self.host.subdirs:
                base = _join(directory, sub)
                realname = base + name
                candidate = self._verify(realname if os.path.isabs(realname)
                                         else os.path.join(self.env.cwd, realname))
                hit = self._accept(name, realname, candidate, via, rejected)
                if hit:
                    return hit
        return None

    def _accept(self, name: str, realname: str, candidate: _Candidate | None, via: Via,
                rejected: list[Rejection]) -> tuple[str, elf.ElfInfo, Via] | None:
        if candidate is None:
            return None
        if candidate.fatal is not None:
            self._fail(name, realname, candidate.fatal)
        if candidate.rejected is not None:
            rejected.append(Rejection(realname, candidate.rejected))
            return None
        assert candidate.info is not None
        return realname, candidate.info, via

    # -- one file (open_verify) -------------------------------------------------------------

    def _verify(self, path: str) -> _Candidate | None:
        """None when there is nothing to open; otherwise what glibc's open_verify decides."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP):
                return None
            return _Candidate(rejected=f"unreadable: {exc.strerror}")
        try:
            try:
                head = os.pread(fd, 832, 0)
            except OSError:
                return _Candidate(fatal="cannot read file data")
            expect = self._expect
            ehdr_size = 64 if expect.elf_class == elf.ELFCLASS64 else 52
            if len(head) < ehdr_size:
                return _Candidate(fatal="file too short")
            if head[:4] != elf.ELFMAG:
                return _Candidate(fatal="invalid ELF header")
            if head[4] != expect.elf_class:
                return _Candidate(rejected=f"wrong ELF class: ELFCLASS{32 if head[4] == 1 else 64}")
            if head[5] != expect.data:
                order = "little" if expect.data == elf.ELFDATA2LSB else "big"
                return _Candidate(fatal=f"ELF file data encoding not {order}-endian")
            if head[6] != elf.EV_CURRENT:
                return _Candidate(fatal="ELF file version ident does not match current one")
            if head[7] not in (ELFOSABI_SYSV, ELFOSABI_GNU):
                return _Candidate(fatal="ELF file OS ABI invalid")
            if head[8] != 0 and not (head[7] == ELFOSABI_GNU and head[8] < _LIBC_ABI_MAX):
                return _Candidate(fatal="ELF file ABI version invalid")
            if any(head[9:16]):
                return _Candidate(fatal="nonzero padding in e_ident")
            header = elf.parse_header(head, path)
            if header.version != elf.EV_CURRENT:
                return _Candidate(fatal="ELF file version does not match current one")
            if header.machine != expect.machine:
                return _Candidate(rejected=f"wrong machine: {elf.machine_name(header.machine)}")
            if header.type not in (elf.ET_DYN, elf.ET_EXEC):
                return _Candidate(fatal="only ET_DYN and ET_EXEC can be loaded")
            if header.phentsize != (56 if expect.elf_class == elf.ELFCLASS64 else 32):
                return _Candidate(fatal="ELF file's phentsize not the expected size")
        finally:
            os.close(fd)
        try:
            return _Candidate(info=elf.read_elf(path))
        except NotElfError as exc:
            return _Candidate(fatal=str(exc).rsplit(": ", 1)[-1])
        except BadInputError as exc:
            return _Candidate(rejected=str(exc).rsplit(": ", 1)[-1])

    # -- dynamic string tokens (_dl_dst_substitute) ------------------------------------------

    def _substitute(self, text: str, origin: str | None, *, whole: bool = False) -> str:
        """Expand $ORIGIN, $LIB and $PLATFORM; "" when an element's $ORIGIN is unknown.

        With ``whole`` (LD_LIBRARY_PATH), the value is expanded before it is split.
        """
        values = {"ORIGIN": origin, "LIB": self.host.lib, "PLATFORM": self.host.platform}
        unknown = False

        def replace(match: re.Match[str]) -> str:
            nonlocal unknown
            key = match.group(1) or match.group(2)
            value = values[key]
            if value is None:
                unknown = True
                return ""
            return value

        result = _DST.sub(replace, text)
        if unknown and not whole:
            return ""
        return result

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


# $NAME or ${NAME}; a name is only a token when no identifier character follows it.
_DST = re.compile(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))")


def _mentions(text: str, token: str) -> bool:
    return any((m.group(1) or m.group(2)) == token for m in _DST.finditer(text))


def _join(directory: str, sub: str) -> str:
    """Directory plus subdirectory, ready for a file name: "" stays relative to the cwd."""
    parts = directory
    if parts and not parts.endswith("/"):
        parts += "/"
    if sub:
        parts += sub + "/"
    return parts

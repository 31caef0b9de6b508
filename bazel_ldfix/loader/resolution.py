"""What the loader model answers: the file each DT_NEEDED name loads, how it was found, what
was passed over on the way, and the environment it was asked in."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bazel_ldfix import elf

if TYPE_CHECKING:
    pass


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


class PassReason(str, enum.Enum):
    """Why a file that exists was not the one taken."""

    NOT_LOADABLE = "not_loadable"            # the loader's own checks refuse it (class,
                                             # machine, not ELF, ...)
    NOT_SHARED_OBJECT = "not_shared_object"  # loadable, but no shared object to search for
    SAME_FILE = "same_file"                  # the chosen file, reached through another path
    NOT_PREFERRED = "not_preferred"          # usable, but another copy ranks first
    CUDA_STUB = "cuda_stub"                  # loads, but every CUDA call fails
    CUDA_COMPAT = "cuda_compat"              # a compat driver this host cannot use


@dataclass(frozen=True)
class PassedOver:
    """A file that exists where a search looked, and why it was passed over: the kind to
    decide by, the words to print."""

    path: str
    kind: PassReason
    reason: str


@dataclass(frozen=True)
class Library:
    """One object the loader lists, and how it got there."""

    name: str
    path: str | None                  # None: not found, or the load failed (see error)
    via: Via | None
    needed_by: tuple[str, ...]
    error: str | None = None          # glibc's words when the load stops at this file
    steps: tuple[SearchStep, ...] = ()
    rejected: tuple[PassedOver, ...] = ()
    depth: int = 1
    parent: str | None = None         # path of the object that first needed it
    info: elf.ElfInfo | None = field(default=None, compare=False, repr=False)

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class VersionProblem:
    """A symbol version one object needs and another does not define (dl-version.c)."""

    object: str          # the object that should define it, as the loader names it
    required_by: str
    version: str | None  # None: the object has no version information at all
    weak: bool = False

    @property
    def fatal(self) -> bool:
        """Whether a real start stops here (trace mode only reports it)."""
        return self.version is not None and not self.weak

    @property
    def message(self) -> str:
        """glibc's words."""
        if self.version is None:
            what = "no version information available"
        else:
            what = f"{'weak ' if self.weak else ''}version `{self.version}' not found"
        return f"{self.object}: {what} (required by {self.required_by})"


@dataclass(frozen=True)
class Resolution:
    """The load of one file: every object in the order ``ld.so --list`` prints them.

    A name the loader cannot find is listed once per object that needs it, as glibc does:
    its "not found" entries are never reused by a later search.
    """

    file: str
    info: elf.ElfInfo
    libraries: tuple[Library, ...]
    error: str | None = None          # set when the loader would stop with an error
    versions: tuple[VersionProblem, ...] = ()
    notes: tuple[str, ...] = ()       # e.g. the file's PT_INTERP was set aside
    blocked: str | None = None        # the load stops at this non-regular file (a FIFO)
    # How many of ``libraries``, from the first, the file's own DT_NEEDED closure accounts
    # for; the rest came with the ``extra`` objects. None: all of them.
    program_libraries: int | None = None

    @property
    def missing(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for lib in self.libraries:
            if lib.path is None and lib.error is None:
                seen.setdefault(lib.name, None)
        return tuple(seen)


@dataclass(frozen=True)
class Environment:
    """What the loader reads from outside the files: the environment and the cache."""

    library_path: str | None = None         # LD_LIBRARY_PATH
    cwd: str = "/"
    cache: CacheLookup | None = None         # None: --inhibit-cache, or no cache
    root: str = "/"                          # resolve as if this were /

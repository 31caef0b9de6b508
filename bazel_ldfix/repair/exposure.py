"""How each found library is given to the tests, so that nothing else they load changes.

``LD_LIBRARY_PATH`` is searched before RUNPATH, /etc/ld.so.cache and the system directories
(glibc elf/dl-load.c, ``_dl_map_object``), so a directory added for one missing soname also
offers every other file it holds. A directory is added whole only while that changes nothing
a test loaded before the repair; once it would, the sonames found there are given as links
of their own, in a links directory (:mod:`bazel_ldfix.linkdir`) that holds only them. A link
whose name would itself change what another test loads is withheld: that test keeps its
library, and the one that misses it is told why.

The rule is checked on the loader model's whole load of every test (its executable and the
runfiles objects the repair models), before and after: every name loaded before must load
the same file after.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import linkdir
from bazel_ldfix.errors import LinkDirError
from bazel_ldfix.outputbase.index import Choice, looks_like_library

if TYPE_CHECKING:
    from bazel_ldfix.repair.scanresult import Entry, Outcome


class Exposure(str, enum.Enum):
    """How a found library reaches the tests."""

    DIRECTORY = "directory"   # its directory is added to LD_LIBRARY_PATH
    LINK = "link"             # a link named by the soname, in the repair's links directory
    WITHHELD = "withheld"     # not given: it would change what a test already loads
    UNLINKED = "unlinked"     # not given: it needs a link, and no links directory can be made


class ShadowCause(str, enum.Enum):
    """Why a test loads another file for a name than it would without a value."""

    CALLER = "caller"     # the test's own LD_LIBRARY_PATH (a --test_env, the rule's env)
    REPAIR = "repair"     # a library the repair gives looks the name up itself


@dataclass(frozen=True)
class Link:
    soname: str
    target: str


@dataclass(frozen=True)
class Shadowed:
    """A name a test loads from another file than it would otherwise, and who does it."""

    test: str
    soname: str
    before: str | None        # the file it loads without that value (None: nothing)
    after: str | None         # the file it loads with it (None: nothing)
    directory: str | None     # the LD_LIBRARY_PATH entry that offers ``after``
    cause: ShadowCause


@dataclass(frozen=True)
class Change:
    """A name one load had that another loads from another file, or not at all."""

    soname: str
    before: str
    after: str | None


def changes(before: Sequence[Entry], after: Sequence[Entry],
            same_file: Callable[[str, str], bool], *, stopped: bool = False) -> list[Change]:
    """Every name ``before`` loaded that ``after`` loads from another file (or not);
    ``stopped``: the load ``after`` stands for stopped with an error."""
    now: dict[str, str] = {}
    for path, name, _ in after:
        if path is not None:
            now.setdefault(name, path)
    out: list[Change] = []
    seen: set[str] = set()
    loaded: set[str] | None = None
    for path, name, _ in before:
        if path is None or name in seen:
            continue
        seen.add(name)
        new = now.get(name)
        if new == path or (new is not None and same_file(path, new)):
            continue
        if new is None:
            if "/" in name and not stopped:
                # A path is opened as it is; left out of a whole load's listing, it was the
                # file of an object loaded before (_dl_map_object_from_fd's device and
                # inode check), so it loads the same file.
                continue
            # Loaded under another of its names (the same file is opened once)?
            if loaded is None:
                loaded = set(now.values())
            if path in loaded or any(same_file(path, p) for p in loaded):
                continue
        out.append(Change(name, path, new))
    return out


class Exposer:
    """The libraries chosen so far, how each is given, and the value they add.

    ``links_root`` is where links directories may be made (None: nowhere this user alone
    can write, so a library that needs a link is withheld). ``names(directory)`` lists
    a directory, ``realpath`` says where a path leads (the command's memo), and
    ``system(soname)`` is the file /etc/ld.so.cache gives for a name (None: none).

    The model sees a test's ELF closure, not what an interpreter (a py_test's Python and
    its modules) or a library opened by name at run time loads: those find the system's
    copies through the cache. So a directory that holds another file under a name the
    cache gives is never added whole, whatever the model shows.
    """

    def __init__(self, links_root: str | None, names: Callable[[str], frozenset[str]],
                 realpath: Callable[[str], str] = os.path.realpath,
                 system: Callable[[str], str | None] | None = None) -> None:
        self.links_root = links_root
        self._names = names
        self._real = realpath     # what a person can look at: the file itself
        self._system = system
        self._checked: dict[str, bool] = {}
        self.choices: dict[str, Choice] = {}
        self.exposure: dict[str, Exposure] = {}
        self.why: dict[str, str] = {}
        self._culprits: dict[str, str] = {}   # directory -> why it is not added whole
        self._made: dict[str, bool] = {}      # links directory -> made by this plan
        self.links_dir: str | None = None

    def choose(self, choice: Choice, *, renamed: bool = False) -> bool:
        """Take ``choice`` for its soname; whether it gives the tests something new.
        ``renamed``: its file is not named like the soname (its SONAME is)."""
        name = choice.soname
        self.choices[name] = choice
        if choice.dir is None:
            return False
        if renamed:
            self._link(name, f"no file there is named {name}; "
                             f"{os.path.basename(choice.path or '')} has that SONAME")
        elif choice.dir in self._culprits or self._offers_system(choice.dir, name):
            self._link(name, self._culprits[choice.dir])
        elif ":" in choice.dir or ";" in choice.dir:
            self._link(name, "the directory's name holds ':' or ';', which LD_LIBRARY_PATH "
                             "cannot carry")
        else:
            self.exposure[name] = Exposure.DIRECTORY
        return True

    def _offers_system(self, directory: str, soname: str) -> bool:
        """Whether ``directory`` holds another copy of a library the system's cache gives
        (noted as the reason it is not added whole)."""
        if self._system is None:
            return False
        if directory in self._checked:
            return self._checked[directory]
        self._checked[directory] = False
        for name in sorted(self._names(directory)):
            if name == soname or not looks_like_library(name):
                continue
            system = self._system(name)
            path = os.path.join(directory, name)
            if system is not None and self._real(system) != self._real(path):
                self._culprits[directory] = (
                    f"{directory} also holds {name}, which this system has too "
                    f"({system}): an interpreter or a library opened by name would load "
                    "that copy instead")
                self._checked[directory] = True
                break
        return self._checked[directory]

    def _link(self, name: str, why: str) -> None:
        if self.links_root is None:
            self.exposure[name] = Exposure.UNLINKED
            self.why[name] = (f"it needs a link of its own ({why}), and there is no "
                              "directory only this user can write to hold it")
        else:
            self.exposure[name] = Exposure.LINK
            self.why[name] = why

    @property
    def links(self) -> tuple[Link, ...]:
        return tuple(Link(name, c.path) for name, c in self.choices.items()
                     if self.exposure.get(name) is Exposure.LINK and c.path is not None)

    @property
    def dirs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(
            c.dir for name, c in self.choices.items()
            if c.dir is not None and self.exposure.get(name) is Exposure.DIRECTORY))

    def added(self) -> tuple[str, ...]:
        """The entries to add to LD_LIBRARY_PATH: the links directory first (its links are
        the files chosen for their names, over any other copy), then the directories."""
        links = {link.soname: link.target for link in self.links}
        self.links_dir = None
        if links:
            assert self.links_root is not None
            try:
                self.links_dir, made = linkdir.make(self.links_root, links)
            except LinkDirError as exc:
                for name in links:
                    self.exposure[name] = Exposure.UNLINKED
                    self.why[name] = f"it needs a link of its own, which failed: {exc}"
            else:
                self._made[self.links_dir] = self._made.get(self.links_dir, False) or made
        return (*([self.links_dir] if self.links_dir else []), *self.dirs)

    def settle(self, label: str, change: Change) -> bool:
        """Keep ``change`` (a name ``label`` loaded before) from happening: the directory
        that offers the other file is given as links, or the link withheld. False when
        neither the links nor the directories offer it."""
        after_dir = os.path.dirname(change.after) if change.after else None
        what = f"{label} loads its own from {self._real(change.before)}"
        withhold = (f"a link named {change.soname} would change what {label} loads "
                    f"(now {self._real(change.before)})")
        if after_dir is not None and after_dir == self.links_dir:
            return self._withhold(change.soname, withhold)
        # The directory the other file is in, or under (the loader tries its
        # glibc-hwcaps subdirectories first); when nothing loads, one that holds the name.
        offering = [d for d in self.dirs if change.after.startswith(d.rstrip("/") + "/")] \
            if change.after else [d for d in self.dirs if change.soname in self._names(d)]
        if not offering:
            # Not loaded at all now: a link of that name stops the load (a broken copy).
            return change.after is None and self._withhold(change.soname, withhold)
        directory = offering[0]
        self._culprits[directory] = f"{directory} also holds {change.soname}, and {what}"
        for name, c in self.choices.items():
            if c.dir == directory and self.exposure.get(name) is Exposure.DIRECTORY:
                self._link(name, self._culprits[directory])
        return True

    def _withhold(self, name: str, why: str) -> bool:
        if self.exposure.get(name) is not Exposure.LINK:
            return False
        self.exposure[name] = Exposure.WITHHELD
        self.why[name] = why
        return True

    def discard_unused(self) -> None:
        """Remove the links directories this plan made but does not give."""
        for path, made in self._made.items():
            if made and path != self.links_dir:
                linkdir.remove(path)


def caller_shadows(label: str, plain: Sequence[Entry], given: Outcome,
                   entries: Iterable[str], same_file: Callable[[str, str], bool]
                   ) -> list[Shadowed]:
    """What the test's own LD_LIBRARY_PATH (``entries``) makes it load instead of what it
    would load without one: ``plain`` is its load without the variable, ``given`` with."""
    dirs = list(entries)
    out = []
    for change in changes(plain, given.entries, same_file, stopped=given.error is not None):
        if change.after is None:
            continue
        after = change.after
        directory = next((d for d in dirs if after.startswith(d.rstrip("/") + "/")),
                         os.path.dirname(after))
        out.append(Shadowed(label, change.soname, change.before, change.after, directory,
                            ShadowCause.CALLER))
    return out


"""What ``fix`` changes: one attribute of one rule, the new text of one file, the plan."""

from __future__ import annotations

import difflib
import enum
import os
from dataclasses import dataclass

from bazel_ldfix.bazel import buildtext
from bazel_ldfix.buildfix.definitions import Place
from bazel_ldfix.buildfix.files import Snapshot


class Kind(enum.Enum):
    SET = "set"                 # attribute = "value"
    ADD = "add"                 # "value" added to the list attribute
    RULE = "rule"               # a new rule call, ``value``, placed after the rule changed
    # The cc_import becomes ``<name>_import``, and a cc_library named as it was links it
    # and ``value`` (a cc_import of Bazel 4-6 takes no deps): what the library needs.
    WRAP = "wrap"
    # The cc_import becomes a library the system provides at run time: it links against
    # ``value`` (``interface_library``), has ``system_provided = 1``, and no
    # ``shared_library``, so Bazel stages nothing (the CUDA driver, docs/cuda.md).
    SYSTEM = "system"


@dataclass(frozen=True)
class Change:
    """One attribute of one rule (or, for ``RULE``, a rule added beside it)."""

    label: str                  # the rule changed: @xsdk//:xdemo, //t:needs_x
    kind: Kind
    attribute: str              # for RULE: the new rule's function (copy_file, genrule)
    value: str                  # for RULE: the whole call, as written into the file
    why: str                    # for people: which test needs it, and what for
    # The file the attribute names now (package-relative); for SYSTEM, the one
    # ``shared_library`` names.
    old: str | None = None
    # For RULE: the load() it needs, (.bzl label, symbol); None for a native rule.
    load: tuple[str, str] | None = None

    @property
    def words(self) -> str:
        """The change in a few words: ``shared_library = "..."``, ``add ... to deps``."""
        value = buildtext.string(self.value) if self.kind is not Kind.RULE else self.value
        if self.kind is Kind.SET:
            return f"{self.attribute} = {value}"
        if self.kind is Kind.ADD:
            return f"add {value} to {self.attribute}"
        if self.kind is Kind.WRAP:
            return (f"rename the cc_import to {buildtext.string(wrapped_name(self.label))}, "
                    f"and add a cc_library named as it was that links it and {value}")
        if self.kind is Kind.SYSTEM:
            return f"interface_library = {value}, system_provided = 1, and no shared_library"
        return f"add, after it, {self.value}"


@dataclass(frozen=True)
class FileChange:
    """The new text of one file, and the changes it carries."""

    place: Place
    path: str                   # the file written (or, for a described place, shown)
    before: str
    after: str
    changes: tuple[Change, ...]
    snapshot: Snapshot | None = None    # the file as read (what is checked before writing)
    names: tuple[str, ...] = ()         # other names of the same file (symlinks)

    @property
    def editable(self) -> bool:
        return self.place.layout.editable

    def diff(self, workspace: str) -> str:
        name = shown(self.path, workspace)
        old, new = (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")
        return "".join(difflib.unified_diff(
            self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
            old, new))


@dataclass(frozen=True)
class Unwritten:
    """A change printed but not written, and why (no rule of the test can carry it)."""

    change: Change
    reason: str


@dataclass(frozen=True)
class Plan:
    files: tuple[FileChange, ...]       # editable first, then the described ones
    described: tuple[tuple[Place, tuple[Change, ...]], ...]     # no file to show a diff of
    problems: tuple[str, ...]           # changes that cannot be made (bad input)
    notes: tuple[str, ...]              # for people, changing no verdict
    unwritten: tuple[Unwritten, ...] = ()
    # Names a test needs that no change can give (no cc_import provides them), in words.
    unprovided: tuple[str, ...] = ()
    # Names a test needs that a repository WORKSPACE declares may provide once fetched,
    # with the command that fetches it, in words (buildfix/unfetched.py).
    unfetched: tuple[str, ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.files or self.described or self.problems or self.unwritten)

    @property
    def described_only(self) -> bool:
        """Some change is one it only describes (a rule writes that BUILD file, or no
        rule of the test can carry it)."""
        return bool(self.described or self.unwritten) or any(
            not f.editable for f in self.files)


def wrapped_name(label: str) -> str:
    """The name a wrapped cc_import gets: ``ztop_import`` for ``@zsdk//:ztop``."""
    return label.rsplit(":", 1)[-1] + "_import"


def shown(path: str, workspace: str) -> str:
    """``path`` relative to the workspace when inside it, else as it is."""
    rel = os.path.relpath(path, workspace)
    return path if rel.startswith("..") else rel

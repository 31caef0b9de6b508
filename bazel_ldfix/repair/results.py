"""What the repair found: each test's missing libraries, where they are, and the merged value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bazel_ldfix import pathlist
from bazel_ldfix.bazel import testenv
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.given import Given
from bazel_ldfix.loader.resolution import PassedOver
from bazel_ldfix.repair import exposure
from bazel_ldfix.repair.fallback import Skipped

if TYPE_CHECKING:
    from bazel_ldfix import elf
    from bazel_ldfix.repair.scanresult import Outcome


@dataclass(frozen=True)
class Missing:
    soname: str
    needed_by: tuple[str, ...]
    dir: str | None                     # where the chosen file is (None: nowhere)
    passed_over: tuple[PassedOver, ...]
    path: str | None = None             # the chosen file
    exposure: exposure.Exposure | None = None   # how it is given (None: not found)
    why: str | None = None              # why not by its directory, in words


@dataclass(frozen=True)
class TestResult:
    label: str
    executable: str
    missing_before: tuple[str, ...]
    missing_after: tuple[str, ...]
    error: str | None
    # Whether the added --test_env reaches this test (no: its rule's env wins, Bazel 7.2+;
    # unknown: it would if Bazel's version were known), and for a test it may not reach,
    # the change to its rule that works in every version.
    reach: testenv.Reach = testenv.Reach.YES
    rule_fix: str | None = None
    # The LD_LIBRARY_PATH the test gets with the repair's flag (without one: the value it
    # had), as Bazel lays the options, the rc files' included, and the rule's env.
    library_path: str | None = None
    # What the proof found the test would load from another file than the one chosen for
    # it alone (empty: exactly its own files; see repair/plan.py).
    strays: tuple[Stray, ...] = ()
    # The programs of its runfiles the test can start (a cc_binary in its data), each a
    # load of its own that the repair modelled (repair/runfilesobjects.py).
    programs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stray:
    """A library a test loads, in its group's value, from another file than the one chosen
    for it alone: the one it loaded before, or the one its own libraries lead to."""

    soname: str
    loads: str | None                   # the file the group's value gives (None: none)
    own: str                            # the file chosen for the test alone


@dataclass(frozen=True)
class Conflict:
    """Why a test left a group: in the value planned for the group it would load a name
    from another file than the one chosen for it alone (the proof of repair/plan.py)."""

    label: str
    soname: str
    chosen: str | None                  # the file the group's value gives (None: none)
    own: str                            # the file chosen for the test alone


@dataclass(frozen=True)
class Group:
    """Tests one value serves, where the run is split: a ``bazel test`` of their own, with
    this group's repair (planned for these tests alone, and proved for each)."""

    labels: tuple[str, ...]
    given: Given
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]
    links_dir: str | None = None             # the group's links directory, if any
    links: tuple[exposure.Link, ...] = ()    # what it holds

    @property
    def flags(self) -> tuple[str, ...]:
        return self.given.flags


@dataclass(frozen=True)
class Part:
    """The rounds of one group (repair/rounds.py), before the proof: what the plan of
    the run is made of. Not kept: ``before`` and ``after`` are the model's outcomes."""

    given: Given
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]
    notes: tuple[str, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    links: tuple[exposure.Link, ...] = ()
    links_dir: str | None = None
    shadowed: tuple[exposure.Shadowed, ...] = ()
    before: Mapping[str, Outcome] = field(default_factory=dict)   # label -> before
    after: Mapping[str, Outcome] = field(default_factory=dict)    # label -> in the value
    expect: elf.ElfHeader | None = None     # the class and machine the tests are built for


@dataclass(frozen=True)
class Repair:
    output_base: str
    base_source: str
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]
    # What the run's tests are given: one value for every test, nothing added when the
    # run is split (each group gives its own) or held back. Nothing added: no flag.
    given: Given
    options: tuple[Option, ...] = ()  # the build step's canonical options
    notes: tuple[str, ...] = ()    # what could not be read, in words (the rest was)
    skipped: tuple[Skipped, ...] = ()   # files left out of the model, once each
    patterns: tuple[str, ...] = ()      # the command's target patterns, as Bazel read them
    # Kept from the last run of the same command, nothing it read having changed since
    # (repair/replay.py).
    given_again: bool = False
    links: tuple[exposure.Link, ...] = ()    # what the links directory holds
    links_dir: str | None = None             # one of ``added``, when there are links
    shadowed: tuple[exposure.Shadowed, ...] = ()
    conflicts: tuple[Conflict, ...] = ()
    # Where the run is split: one repair per group of tests that one value serves, each
    # run by a ``bazel test`` of its own (empty: one run serves every test).
    groups: tuple[Group, ...] = ()
    # Tests run on remote executors, where this machine's paths mean nothing: the value
    # found is not given (``given`` adds nothing), and only the BUILD change helps.
    held_back: bool = False
    # Why the libraries that need a link are not given (None: every link was made, or
    # none was needed): the per-user directory cannot be made, in words.
    unlinked_cause: str | None = None

    @property
    def flags(self) -> tuple[str, ...]:
        return self.given.flags

    @property
    def ld_library_path(self) -> str | None:
        """The flag's value (None: no flag is added)."""
        return self.given.ld_library_path if self.given.changes else None

    @property
    def base(self) -> tuple[str, ...]:
        return self.given.base

    @property
    def added(self) -> tuple[str, ...]:
        return self.given.added

    def given_to(self, label: str) -> Given:
        """The value the run gives one test: its group's, or the run's."""
        for group in self.groups:
            if label in group.labels:
                return group.given
        return self.given

    def base_of(self, label: str) -> tuple[str, ...]:
        """The value one test had before the repair: its group's base where a flag is
        added, else the value it keeps (its own, which no flag replaces)."""
        given = self.given_to(label)
        if given.changes:
            return given.base
        had = next((t.library_path for t in self.tests if t.label == label), None)
        return pathlist.split(had)

    @property
    def unresolved(self) -> tuple[str, ...]:
        return tuple(m.soname for m in self.missing if m.dir is None)

    @property
    def unlinked(self) -> tuple[str, ...]:
        """Found, and not given: each needs a link, and no links directory can be made."""
        return tuple(m.soname for m in self.missing
                     if m.exposure is exposure.Exposure.UNLINKED)

    @property
    def unlinked_tests(self) -> tuple[str, ...]:
        """The tests that still miss a library for want of a links directory."""
        names = set(self.unlinked)
        return tuple(t.label for t in self.tests if names.intersection(t.missing_after))

    @property
    def withheld(self) -> tuple[str, ...]:
        """Found, and not given: giving them would change what another test loads."""
        return tuple(m.soname for m in self.missing
                     if m.exposure is exposure.Exposure.WITHHELD)


@dataclass(frozen=True)
class TestInput:
    label: str
    executable: str

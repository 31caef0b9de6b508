"""What the repair found: each test's missing libraries, where they are, and the merged value."""

from __future__ import annotations

from dataclasses import dataclass

from bazel_ldfix.bazel import given as given_
from bazel_ldfix.bazel import testenv
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.given import Given
from bazel_ldfix.loader.resolution import PassedOver
from bazel_ldfix.repair import exposure
from bazel_ldfix.repair.failopen import Skipped


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


@dataclass(frozen=True)
class Conflict:
    """A test whose own libraries lead to another file of a name than the one chosen (the
    first test that missed it chose): one LD_LIBRARY_PATH cannot give both."""

    label: str
    soname: str
    chosen: str                         # the file the run's value gives
    own: str                            # the file the test's own libraries lead to


@dataclass(frozen=True)
class Group:
    """Tests one value serves, where conflicts split the run: a ``bazel test`` of their own,
    with this group's repair (planned for these tests alone)."""

    labels: tuple[str, ...]
    given: Given | None
    added: tuple[str, ...]
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]

    @property
    def flags(self) -> tuple[str, ...]:
        return given_.flags(self.given)


@dataclass(frozen=True)
class Repair:
    output_base: str
    base: tuple[str, ...]
    base_source: str
    tests: tuple[TestResult, ...]
    missing: tuple[Missing, ...]
    added: tuple[str, ...]
    given: Given | None            # the merged value; None when nothing needs adding
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
    # Where conflicts split the run: one repair per group of tests that one value serves,
    # each run by a ``bazel test`` of its own (empty: one run serves every test).
    groups: tuple[Group, ...] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        return given_.flags(self.given)

    @property
    def ld_library_path(self) -> str | None:
        return given_.value(self.given)

    @property
    def unresolved(self) -> tuple[str, ...]:
        return tuple(m.soname for m in self.missing if m.dir is None)

    @property
    def withheld(self) -> tuple[str, ...]:
        """Found, and not given: giving them would change what another test loads."""
        return tuple(m.soname for m in self.missing
                     if m.exposure is exposure.Exposure.WITHHELD)


@dataclass(frozen=True)
class TestInput:
    label: str
    executable: str

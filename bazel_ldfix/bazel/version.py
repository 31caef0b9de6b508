"""Which Bazel a build step ran, as its build events tell.

A release names itself in the started event: ``buildToolVersion`` is ``7.2.0``. A Bazel
built without a label leaves it empty. Debian's bazel-bootstrap 4.2.3 is one
(``bazel --version`` prints ``bazel no_version``); so is a Bazel built from source.

The same event still tells such a Bazel's age, by the fields it sets. Bazel sets them in
``BuildStartingEvent.asStreamProto``, on every ``build`` and ``test`` command, whatever the
options (bazelbuild/bazel ``src/main/java/com/google/devtools/build/lib/buildtool/
buildevent/BuildStartingEvent.java``):

- ``startTime``, the start as a Timestamp, beside the older ``startTimeMillis``. The protocol
  had it by February 2022, when BuildBuddy began to read it (buildbuddy-io/buildbuddy PR
  #1588). The build commands set it since the commit that brought it in (e5c832a, named
  by Bazel PR #22376 of May 2024, which asks for it in ``NoBuildEvent`` too: the event of
  commands that build nothing, never of ``test``). So every 7.x sets it. Bazel 4.2.3 sets
  ``startTimeMillis`` alone (measured, and ``tests/support/recorded/
  bazel-4.2.3-test.json``). A started event with ``startTimeMillis`` and without
  ``startTime`` comes from a Bazel older than 7.0, so older than 7.2.
- ``host`` and ``user``: set since 8.5.0 (PR #27421, cherry-picked as #27445); no release
  before sets them. With either, Bazel is 8.5 or later.

These cost nothing: the build step reads its events anyway. What else Bazel tells says no
more. ``bazel info release`` says ``development version`` for the same builds, and
``build-label.txt`` in the install base holds ``no_version``. Debian's package database
names the package's version, but it is a packaging fact, and it says nothing of a Bazel
built from source.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bazel_ldfix.bazel.bep import Started

Release = tuple[int, int]       # (major, minor)

_NUMBER = re.compile(r"^\s*(\d+)\.(\d+)")

#: A field every ``build`` and ``test`` command of this release and later sets, with the
#: field that the older releases set in its place: with the older one alone, Bazel is
#: older than the release. (``startTime`` came earlier, by 2022; 7.0 is the first release
#: sure to have it.)
SET_SINCE: dict[str, tuple[Release, str]] = {"startTime": ((7, 0), "startTimeMillis")}
#: A field no release before this one sets: with it, Bazel is this release or later.
NEW_IN: dict[str, Release] = {"host": (8, 5), "user": (8, 5)}


@dataclass(frozen=True)
class BazelVersion:
    """Bazel's own word for its version, and where it has none, what its events bound it to."""

    label: str | None = None            # started.buildToolVersion; None: Bazel has none
    older_than: Release | None = None   # a release this Bazel is known to be older than
    at_least: Release | None = None     # a release this Bazel is known to be, or newer

    @property
    def number(self) -> Release | None:
        """``(major, minor)`` of the label (``7.2.0``, ``8.0.0rc1``, ``9.0.0-pre.20250101.1``);
        None for ``no_version``, ``development version`` or no label."""
        match = _NUMBER.match(self.label or "")
        return (int(match.group(1)), int(match.group(2))) if match else None

    @property
    def major(self) -> int | None:
        """The major release, where the label says it."""
        number = self.number
        return number[0] if number is not None else None

    def before(self, release: Release) -> bool | None:
        """Whether this Bazel is older than ``release``; None when nothing tells."""
        number = self.number
        if number is not None:
            return number < release
        if self.older_than is not None and self.older_than <= release:
            return True
        if self.at_least is not None and self.at_least >= release:
            return False
        return None


def of_fields(label: str | None, fields: Collection[str]) -> BazelVersion:
    """The version a started event gives: its label, else the bounds its fields set."""
    version = BazelVersion(label)
    if version.number is not None:
        return version
    for field, release in NEW_IN.items():
        if field in fields:
            return BazelVersion(label, at_least=release)
    for field, (release, older) in SET_SINCE.items():
        if older in fields and field not in fields:
            return BazelVersion(label, older_than=release)
    return version


def of_started(started: Started | None) -> BazelVersion:
    """:func:`of_fields` of a started event (no event: nothing is known)."""
    if started is None:
        return BazelVersion()
    return of_fields(started.version, started.fields)

"""The last run of one ``bazel test ARGS`` in a workspace: the flag it was given and its
repair, behind one object.

Two records per command in the per-user store (:mod:`bazel_ldfix.store`), keyed by the
workspace, the Bazel client, its startup options and the arguments (:func:`command_key`):

* :attr:`Record.FLAGS <bazel_ldfix.store.Record.FLAGS>`: the ``--test_env`` the last run
  added. The build step gets it again, so that it is analysed with the options the
  ``bazel test`` after it has (another value makes Bazel discard its analysis cache). Only
  the tool's own flag is taken from it.
* :attr:`Record.REPAIR <bazel_ldfix.store.Record.REPAIR>`: the repair itself, given again
  while nothing it read has changed (:mod:`bazel_ldfix.repair.replay`).

Without the cache (``--no-cache``) neither is read, and a repair made anew only replaces a
kept one that differs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bazel_ldfix.given import Given
from bazel_ldfix.store import Record

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.fs.facts import Facts
    from bazel_ldfix.repair.replay import Kept
    from bazel_ldfix.repair.results import Repair
    from bazel_ldfix.store import Store


def command_key(runner: Bazel, args: Sequence[str]) -> str:
    """What names one command: ``bazel test ARGS`` in this directory, with this Bazel."""
    return "\0".join([os.path.abspath(runner.cwd), runner.executable, *runner.startup, *args])


def read_flags(store: Store | None, command: str) -> Given | None:
    """The kept value: the last flag of the tool's own form in the record; anything else
    in it is not passed to Bazel."""
    data = store.recall(Record.FLAGS, command) if store is not None else None
    if data is None:
        return None
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    read = [g for g in map(Given.from_flag, lines) if g is not None]
    return read[-1] if read else None


def write_flags(store: Store | None, command: str, given: Given | None) -> None:
    """Best effort: a record that cannot be written only costs time."""
    if store is None:
        return
    text = "".join(f"{flag}\n" for flag in (given.flags if given is not None else ()))
    store.keep(Record.FLAGS, command, text.encode("utf-8", "surrogateescape"))


class LastRun:
    """What the last run of one command left, and what this run leaves for the next."""

    def __init__(self, runner: Bazel, args: Sequence[str], store: Store | None, *,
                 use: bool) -> None:
        """``use``: read what the last run left and keep this run's flag (False under
        ``--no-cache``: a repair made anew only replaces a kept one that differs)."""
        # (The repair's own module is imported once Bazel's build step has started.)
        self._store = store
        self._command = command_key(runner, args)
        self._use = use and store is not None
        #: The value the last run gave (None: none, or not read).
        self.given = read_flags(store, self._command) if self._use else None
        self._kept: Kept | None = None
        self._loaded = False

    @property
    def kept(self) -> Kept | None:
        """The kept repair, read once (None: none, or not read)."""
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.repair import replay

        if not self._loaded:
            self._loaded = True
            self._kept = replay.load(self._store, self._command) if self._use else None
        return self._kept

    @property
    def keeps(self) -> bool:
        """Whether a repair of this command can be kept at all."""
        return self._store is not None

    def given_again(self, inputs: str, rules: str | None) -> Repair | None:
        """The kept repair, if nothing it was made from has changed."""
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.repair import replay

        return replay.given_again(self.kept, inputs, rules)

    def remember(self, given: Given | None) -> None:
        if self._use:
            write_flags(self._store, self._command, given)

    def keep(self, inputs: str, rules: str, facts: Facts | None, repair: Repair) -> None:
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.repair import replay

        keep = replay.save if self._use else replay.replace_differing
        keep(self._store, self._command, inputs, rules, facts, repair)

"""The last run of one ``bazel test ARGS`` in a workspace: the flag it was given and its
repair, behind one object.

Two files per command in the per-user directory (:mod:`bazel_ldfix.userdir`), named by a
digest of the workspace, the Bazel client, its startup options and the arguments:

* ``last-flags/<digest>``: the ``--test_env`` the last run added. The build step gets it
  again, so that it is analysed with the options the ``bazel test`` after it has (another
  value makes Bazel discard its analysis cache). Only the tool's own flag is taken from
  it, from a file only this user could have written.
* ``last-repair/<digest>``: the repair itself, given again while nothing it read has
  changed (:mod:`bazel_ldfix.repair.replay`).

Without the cache (``--no-cache``) neither is read, and a repair made anew only replaces a
kept one that differs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from bazel_ldfix import userdir
from bazel_ldfix.given import Given

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.fs.facts import Facts
    from bazel_ldfix.repair.replay import Kept
    from bazel_ldfix.repair.results import Repair

_FLAGS_MAX = 1 << 20


def flags_file(runner: Bazel, args: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Where the last flag of ``bazel test ARGS`` in this workspace is kept (None: no
    per-user directory can be trusted)."""
    root = userdir.cache_root(env)
    if root is None:
        return None
    key = "\0".join([os.path.abspath(runner.cwd), runner.executable, *runner.startup, *args])
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(root, "last-flags", digest)


def read_flags(path: str | None) -> Given | None:
    """The kept value: the last flag of the tool's own form in the file; anything else in
    it is not passed to Bazel."""
    if path is None or userdir.private_dir(os.path.dirname(path), create=False) is None:
        return None
    data = userdir.read_private(path, _FLAGS_MAX)
    if data is None:
        return None
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    read = [g for g in map(Given.from_flag, lines) if g is not None]
    return read[-1] if read else None


def write_flags(path: str | None, given: Given | None) -> None:
    """Best effort: a file that cannot be written only costs time."""
    if path is None or userdir.private_dir(os.path.dirname(path)) is None:
        return
    text = "".join(f"{flag}\n" for flag in (given.flags if given is not None else ()))
    userdir.write_private(path, text.encode("utf-8", "surrogateescape"))


def _repair_file(flags: str | None) -> str | None:
    """Where the repair of the command whose flag is kept at ``flags`` is kept."""
    if flags is None:
        return None
    flags_dir, name = os.path.split(flags)
    return os.path.join(os.path.dirname(flags_dir), "last-repair", name)


class LastRun:
    """What the last run of one command left, and what this run leaves for the next."""

    def __init__(self, runner: Bazel, args: Sequence[str], env: Mapping[str, str], *,
                 use: bool) -> None:
        # (The repair's own module is imported once Bazel's build step has started.)
        flags = flags_file(runner, args, env)
        self._use = use
        self._flags = flags if use else None
        self._repair = _repair_file(flags)
        #: The value the last run gave (None: none, or not read).
        self.given = read_flags(self._flags)
        self._kept: Kept | None = None
        self._loaded = False

    @property
    def kept(self) -> Kept | None:
        """The kept repair, read once (None: none, or not read)."""
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.repair import replay

        if not self._loaded:
            self._loaded = True
            self._kept = replay.load(self._repair) if self._use else None
        return self._kept

    @property
    def keeps(self) -> bool:
        """Whether a repair of this command can be kept at all."""
        return self._repair is not None

    def given_again(self, inputs: str, rules: str | None) -> Repair | None:
        """The kept repair, if nothing it was made from has changed."""
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.repair import replay

        return replay.given_again(self.kept, inputs, rules)

    def remember(self, given: Given | None) -> None:
        write_flags(self._flags, given)

    def keep(self, inputs: str, rules: str, facts: Facts | None, repair: Repair) -> None:
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.repair import replay

        keep = replay.save if self._use else replay.replace_differing
        keep(self._repair, inputs, rules, facts, repair)

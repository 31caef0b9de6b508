"""What a scan keeps of one test's resolution in one environment."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.repair.fallback import Skipped

# (path, name, needed_by) of one listed object: path None when it was not found.
Entry = tuple["str | None", str, tuple[str, ...]]


@dataclass(frozen=True)
class Outcome:
    """What a scan keeps of a test's resolution in one environment."""

    header: elf.ElfHeader | None     # the first resolved object's, the kind of program
    entries: tuple[Entry, ...]      # found and missing objects, in listing order
    error: str | None
    skipped: tuple[Skipped, ...] = ()
    # entries[:program] are the executable's own closure, which is what a resolution
    # without the runfiles' objects lists; None: not known (resolve without them).
    program: int | None = None

    @functools.cached_property
    def missing(self) -> tuple[str, ...]:
        """The names not found, each once, in listing order."""
        return tuple(dict.fromkeys(name for path, name, _ in self.entries if path is None))

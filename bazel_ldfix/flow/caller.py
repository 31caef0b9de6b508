"""Who runs a flow: where the user is, and where the words for them go."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import PROG
from bazel_ldfix.loader.cuda import NO_HOST_DRIVER, HostDriver

if TYPE_CHECKING:
    from bazel_ldfix.outputbase.index import ProgressFn


@dataclass(frozen=True)
class Caller:
    """The user's environment and directory, the per-user directories the flow may use,
    and the two outputs: ``show`` for the result (stdout), ``say`` for one line of what
    happened on the way (stderr)."""

    env: Mapping[str, str]
    cwd: str
    say: Callable[[str], None]
    show: Callable[[str], None]
    quiet: bool = False
    color: bool = False                 # colour in what is said (a terminal, no NO_COLOR)
    links_root: str | None = None       # where the repair makes its links directories
    cache_dir: str | None = None        # the index cache's directory (None: no cache)
    progress: ProgressFn | None = None  # a long index walk's progress
    on_error: Callable[[str, OSError], None] | None = None   # a file that cannot be read
    cuda: HostDriver = NO_HOST_DRIVER   # the host's NVIDIA driver (docs/cuda.md)
    prog: str = PROG                    # how the user ran the tool: the suggested commands

    def inform(self, line: str) -> None:
        """Say ``line``, one of what happened on the way, unless quiet (``-q`` keeps only
        errors, the diagnosis and the leftover warnings)."""
        if not self.quiet:
            self.say(line)

"""Where Bazel runs the tests: on this machine, or on a remote-execution worker.

Read from the build step's canonical options (its build events). A ``--test_env`` naming a
directory of this machine's output_base is only right where that directory exists: with
``--remote_executor`` a test runs on a worker that has no such path (and the absolute path
becomes part of every test action's key), unless the test spawns are forced to run here.
``--disk_cache`` and ``--remote_cache`` only store results; they change nothing of this.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from bazel_ldfix import PROG
from bazel_ldfix.bazel.bep import Option

# Strategies that run a spawn on this machine (Bazel's names, old and new).
_LOCAL = {"local", "standalone", "sandboxed", "processwrapper-sandbox", "linux-sandbox",
          "darwin-sandbox", "docker", "worker"}


class Execution(enum.Enum):
    LOCAL = "local"                     # no --remote_executor
    REMOTE = "remote"                   # tests run on remote workers
    REMOTE_TESTS_LOCAL = "tests local"  # --remote_executor, but test spawns forced local


def of(options: Sequence[Option]) -> Execution:
    """Where the tests of a build with these canonical options run."""
    executor = ""
    spawn: str | None = None
    default: str | None = None
    test_runner: str | None = None
    exclusive = False
    for opt in options:
        if opt.name == "remote_executor":
            executor = opt.value
        elif opt.name == "spawn_strategy":
            spawn = opt.value
        elif opt.name == "strategy":
            mnemonic, eq, value = opt.value.partition("=")
            if not eq:
                default = opt.value
            elif mnemonic == "TestRunner":
                test_runner = value
        elif opt.name == "test_strategy":
            exclusive = opt.value == "exclusive"   # runs each test alone, on this machine
    if not executor:
        return Execution.LOCAL
    chosen = test_runner or default or spawn
    if exclusive or (chosen is not None and _first(chosen) in _LOCAL):
        return Execution.REMOTE_TESTS_LOCAL
    return Execution.REMOTE


def _first(strategies: str) -> str:
    """Bazel tries a comma-separated list in order; the first that can run a spawn wins."""
    return strategies.split(",", 1)[0].strip()


def remote_refusal(prog: str = PROG) -> str:
    """Why no --test_env is added under remote execution; ``prog`` runs the tool."""
    return ("tests run on remote workers (--remote_executor), where this machine's "
            "output_base paths do not exist and would change every test's cache key: no "
            f"--test_env is added; make the BUILD change with `{prog} fix --write` (or "
            "pass --force-local-path if the tests run here)")

"""Bazel's exit codes that the tool acts on, in one table.

From Bazel's ``ExitCode`` (bazelbuild/bazel
``src/main/java/com/google/devtools/build/lib/util/ExitCode.java``); the same numbers in
4.2.3 and in 7 to 9.
"""

from __future__ import annotations

from collections.abc import Sequence

SUCCESS = 0
BUILD_FAILURE = 1          # the build failed: the same command fails the same way again
COMMAND_LINE_ERROR = 2     # options or a command Bazel cannot take
TESTS_FAILED = 3           # the tests ran and some failed: their logs can be read
NO_TESTS_FOUND = 4         # the build worked and no test was selected
INTERRUPTED = 8            # the command was interrupted

# From the least to the most severe, where several runs are merged: success, no test to
# run, tests failed, build failed; any other (a crash, an interruption) is worse.
_SEVERITY = {SUCCESS: 0, NO_TESTS_FOUND: 1, TESTS_FAILED: 2, BUILD_FAILURE: 3}


def worst(codes: Sequence[int]) -> int:
    """The exit code of several ``bazel test`` runs together: the most severe one."""
    return max(codes, key=lambda c: (_SEVERITY.get(c, 4), c))

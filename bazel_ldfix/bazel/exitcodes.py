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

# From the least to the most severe, where several runs are merged: success, tests
# failed, build failed; any other (a crash, an interruption) is worse.
_SEVERITY = {SUCCESS: 0, TESTS_FAILED: 2, BUILD_FAILURE: 3}


def worst(codes: Sequence[int]) -> int:
    """The exit code of several ``bazel test`` runs that each run a part of one command's
    tests: the most severe one. A run that found no test to run says nothing of the
    others, so 4 (NO_TESTS_FOUND) only when none found one, as the one command would."""
    ran = [c for c in codes if c != NO_TESTS_FOUND] or list(codes)
    return max(ran, key=lambda c: (_SEVERITY.get(c, 4), c))

"""Whether Bazel accepts what ``fix`` wrote: the targets analysed, nothing built.

Every change is analysed before its diff is shown; only ``--write`` keeps the files as
written.

``bazel build --nobuild ARGS -- LABELS``: the user's own arguments, and as targets the
rules the change touched. Bazel loads every BUILD file and analyses every target the
patterns name and every rule the change edited, and stops there. A rejected dependency (a
``cc_import`` in the ``deps`` of a ``py_test``, an import not visible to the target), a
``load`` of a repository the workspace lacks, or a file name no rule makes fail here, in
about a second on a warm server.

``bazel test --nobuild`` would read the ``test`` lines of the rc files as well, but Bazel
4.2.3 ends it with exit code 1 whatever the analysis says ("Couldn't start the build.
Unable to run tests"), so ``build`` it is: a ``test:`` line of ``.bazelrc`` is not read.
The few options of ``bazel test`` that ``bazel build`` refuses (how the test summary is
printed, which changes no analysis) are left out.

The call is bounded by time (:data:`TIMEOUT`): Bazel that has not answered by then is
stopped, and the change counts as not accepted. It runs in a session of its own, as every
Bazel call of the tool's (:mod:`bazel_ldfix.children`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bazel_ldfix import children
from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.commandline import CommandLine

TIMEOUT = 900.0     # seconds: loading and analysing a large repository, fetches included
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Options of `bazel test` alone (TestSummaryOptions: how results are printed), which
# `bazel build` refuses; with whether they take a value.
_TEST_ONLY = {"verbose_test_summary": False, "test_verbose_timeout_warnings": False,
              "print_relative_test_log_paths": False, "test_summary": True,
              "test_output": True}


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    error: str | None           # Bazel's first error line, or why there is no answer
    exit_code: int | None       # Bazel's; None when it was stopped or could not start


def analyse(bazel: Bazel, args: Sequence[str], labels: Sequence[str],
            timeout: float = TIMEOUT) -> Verdict:
    """``bazel build --nobuild ARGS -- LABELS``: whether the workspace still analyses."""
    line = CommandLine.of(build_args(args)).with_options(
        ["--nobuild", "--color=no", "--curses=no"])
    if labels:
        line = line.with_targets(labels)
    cmd = bazel.argv("build", line.words)
    # One of the tool's own calls (bazel_ldfix.children): a session of its own, so that a
    # signal ends a wrapper and the client it started together.
    child = bazel.spawn(cmd)
    try:
        _out, raw = children.collect(child, timeout)
    except children.Expired:
        return Verdict(False, f"Bazel did not finish the analysis in {timeout:g} s "
                              "(stopped)", None)
    except children.TooMuchOutput:
        return Verdict(False, f"Bazel printed more than {children.MAX_OUTPUT >> 20} MiB "
                              "in the analysis (stopped)", None)
    if child.returncode == 0:
        return Verdict(True, None, 0)
    err = raw.decode("utf-8", "replace")
    return Verdict(False, first_error(err) or f"`bazel build --nobuild` failed (exit code "
                                              f"{child.returncode})", child.returncode)


def build_args(args: Sequence[str]) -> list[str]:
    """``bazel test`` arguments as ``bazel build`` takes them: its print-only options left
    out (``--verbose_test_summary``, ``--test_output=all``, ``--test_summary terse``...)."""
    line = CommandLine.of(args)
    for name, takes_value in _TEST_ONLY.items():
        line = line.without(name, takes_value=takes_value)
    return line.words


def first_error(stderr: str) -> str | None:
    """Bazel's first ``ERROR:`` line, without colours."""
    for line in stderr.splitlines():
        line = _ANSI.sub("", line).strip()
        if line.startswith("ERROR:"):
            return line
    return None

"""The rule query: what the build events do not say about the tests' rules."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bazel_ldfix.errors import BazelError

if TYPE_CHECKING:
    pass
from bazel_ldfix.bazel.client import Bazel, finish
from bazel_ldfix.bazel.queryxml import RulesAnswer, answer_of


def query_rules(bazel: Bazel, labels: Sequence[str], variable: str) -> RulesAnswer:
    """``env`` and ``tags`` of the rules among ``labels`` whose ``env`` mentions
    ``variable`` (``bazel query --output=xml 'attr(env, VARIABLE, ...)'``): a rule left out
    does not set it. Only those rules are printed, so the answer stays small. The same query
    names the files they were read from (``buildfiles``)."""
    if not labels:
        return RulesAnswer({}, ())

    return answer_of(bazel.capture("query", ["--output=xml", _env_query(labels, variable)]),
                     labels)


class PendingRules:
    """:func:`query_rules` started in the background (Bazel works while we do), within the
    Bazel calls' time limit from its start."""

    def __init__(self, bazel: Bazel, labels: Sequence[str], variable: str) -> None:
        self.labels = tuple(labels)
        self.cmd = bazel.argv("query", ["--output=xml", _env_query(labels, variable)])
        self.timeout = bazel.timeout
        self.started = time.monotonic()
        self.proc: subprocess.Popen[bytes] | None = bazel.spawn(self.cmd)

    def _left(self) -> float | None:
        if self.timeout is None:
            return None
        return max(0.0, self.timeout - (time.monotonic() - self.started))

    def result(self) -> RulesAnswer:
        assert self.proc is not None
        proc, self.proc = self.proc, None
        return answer_of(finish(self.cmd, proc, self._left()), self.labels)

    def close(self) -> None:
        """Wait for the query if its answer is not wanted: the next command would anyway."""
        if self.proc is not None:
            proc, self.proc = self.proc, None
            with contextlib.suppress(BazelError):
                finish(self.cmd, proc, self._left())


def start_query_rules(bazel: Bazel, labels: Sequence[str], variable: str) -> PendingRules:
    return PendingRules(bazel, labels, variable)


def taken_out(bazel: Bazel, patterns: Sequence[str]) -> frozenset[str] | None:
    """The tests ``patterns`` name that ``bazel test`` does not run: a negative pattern
    takes them out. Empty without a negative pattern (nothing is asked then); None when a
    pattern cannot be written in a query; BazelError when the query fails.

    ``bazel test`` builds and runs two different sets. The tests it runs are the
    patterns' tests in order: a positive pattern adds its tests, a test_suite expanded,
    and a negative one removes its tests. The targets it builds lose what a negative
    pattern names, and only then are test_suites expanded. With ``//t:all -//t:t3``, where
    ``//t:suite`` holds ``//t:t3``, Bazel 4.2.3 builds t3 and does not run it. The build
    step's events name every test built, so the ones taken out are asked of ``bazel
    query``, whose ``tests()`` expands test_suites as ``bazel test`` does.
    """
    # A negative pattern before any positive one takes nothing out: nothing is in yet.
    first = next((at for at, p in enumerate(patterns) if not p.startswith("-")), None)
    patterns = patterns[first:] if first is not None else ()
    if not any(p.startswith("-") for p in patterns):
        return frozenset()
    if any('"' in p or "\\" in p for p in patterns):
        return None     # a query's quoted word has no escapes
    return frozenset(bazel.capture("query", ["--output=label", _taken_out_query(patterns)])
                     .split())


def _taken_out_query(patterns: Sequence[str]) -> str:
    """``let s = <the tests run> in <the tests named> except $s``, the first pattern
    positive. Query operators are left-associative and of equal precedence: ``a except b
    + c`` is ``(a except b) + c``, the order ``bazel test`` reads the patterns in."""
    run = f'tests("{patterns[0]}")'
    for pattern in patterns[1:]:
        negative = pattern.startswith("-")
        run += f' {"except" if negative else "+"} tests("{pattern.removeprefix("-")}")'
    named = " + ".join(f'tests("{p.removeprefix("-")}")' for p in patterns)
    return f"let s = {run} in {named} except $s"


def _env_query(labels: Sequence[str], variable: str) -> str:
    """The rules among ``labels`` whose ``env`` or ``env_inherit`` mentions ``variable``
    (``attr`` matches a dict or list by its printed form; a rule without the attribute is
    simply not matched), and the files Bazel read for all of them (``buildfiles``)."""
    return (f'let tests = {" + ".join(labels)} in '
            f'attr(env, "{variable}", $tests) + attr(env_inherit, "{variable}", $tests) + '
            f"buildfiles($tests)")

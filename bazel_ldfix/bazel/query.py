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
from bazel_ldfix.bazel.queryxml import RulesAnswer


def query_rules(bazel: Bazel, labels: Sequence[str], variable: str) -> RulesAnswer:
    """``env`` and ``tags`` of the rules among ``labels`` whose ``env`` mentions
    ``variable`` (``bazel query --output=xml 'attr(env, VARIABLE, ...)'``): a rule left out
    does not set it. Only those rules are printed, so the answer stays small. The same query
    names the files they were read from (``buildfiles``)."""
    if not labels:
        return RulesAnswer({}, ())
    from bazel_ldfix.bazel.queryxml import answer_of  # only when the rules are asked for

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
        from bazel_ldfix.bazel.queryxml import answer_of

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


def _env_query(labels: Sequence[str], variable: str) -> str:
    """The rules among ``labels`` whose ``env`` or ``env_inherit`` mentions ``variable``
    (``attr`` matches a dict or list by its printed form; a rule without the attribute is
    simply not matched), and the files Bazel read for all of them (``buildfiles``)."""
    return (f'let tests = {" + ".join(labels)} in '
            f'attr(env, "{variable}", $tests) + attr(env_inherit, "{variable}", $tests) + '
            f"buildfiles($tests)")

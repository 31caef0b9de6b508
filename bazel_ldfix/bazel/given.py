"""What the tests are given: the LD_LIBRARY_PATH value the tool passes to ``bazel test``.

One value, and the only place that writes its forms: the ``--test_env`` flag, the
``.bazelrc`` line, the shell ``export`` for running a test binary by hand, and the flag
read back from the tool's own last-flags file. A repair, each group of a split run and
the rerun hold one :class:`Given` (None: nothing is added).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from bazel_ldfix import quoting
from bazel_ldfix.pathlist import VARIABLE


def env_flag(variable: str, value: str) -> str:
    """``--test_env=NAME=VALUE``, as Bazel reads one word of its command line."""
    return f"--test_env={variable}={value}"


_PREFIX = env_flag(VARIABLE, "")


@dataclass(frozen=True)
class Given:
    """The LD_LIBRARY_PATH a run's tests are given through ``--test_env``."""

    ld_library_path: str

    @property
    def flag(self) -> str:
        return env_flag(VARIABLE, self.ld_library_path)

    def bazelrc_line(self) -> str:
        """``test --test_env=...``, quoted for Bazel's rc tokenizer (raises
        :class:`quoting.UnquotableError` for a value it cannot carry)."""
        return "test " + quoting.bazelrc_word(self.flag)

    def export_line(self) -> str:
        return f"export {VARIABLE}={shlex.quote(self.ld_library_path)}"

    @classmethod
    def from_flag(cls, word: str) -> Given | None:
        """The value of a flag :attr:`flag` wrote (None: any other word)."""
        if not word.startswith(_PREFIX) or "\0" in word:
            return None
        return cls(word[len(_PREFIX):])


def value(given: Given | None) -> str | None:
    return None if given is None else given.ld_library_path


def flags(given: Given | None) -> tuple[str, ...]:
    """The options that give it: none, or its one flag."""
    return () if given is None else (given.flag,)

"""What a test is given: the LD_LIBRARY_PATH the repair passes to ``bazel test``.

One value, and the only place that merges it or writes its forms. It is the base the test
had (the flags' value, the client's, or its own rule's ``env`` where the flag replaces
it), the directories the repair adds, and their order (after the base, or before it with
``prepend``). Its forms are the ``--test_env`` flag, the ``.bazelrc`` line, the shell
``export`` for running a test binary by hand, and the flag read back from the tool's own
last-flags file. A repair, each group of a split run, the rerun, the diagnosis' advice and
``check --matrix`` all hold a :class:`Given`.

The base is kept whole: entries are only ever added, never dropped or replaced. An empty
element (glibc reads it as the current directory) is never written.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from bazel_ldfix import pathlist, quoting
from bazel_ldfix.pathlist import VARIABLE


def env_flag(variable: str, value: str) -> str:
    """``--test_env=NAME=VALUE``, as Bazel reads one word of its command line."""
    return f"--test_env={variable}={value}"


_PREFIX = env_flag(VARIABLE, "")

# Where the rc line goes: a file of this machine alone, which is not committed, read by
# the workspace's .bazelrc through one line (as Bazel's docs advise for per-user options).
# A missing file is no error for ``try-import``, so the line suits every checkout.
USER_BAZELRC = "user.bazelrc"
TRY_IMPORT = f"try-import %workspace%/{USER_BAZELRC}"


@dataclass(frozen=True)
class Given:
    """The LD_LIBRARY_PATH a test (or every test of a group) is given.

    ``base``: what the test had before the repair, in order. ``added``: the directories
    the repair adds. Nothing added: no flag is passed, and each test keeps its own value.
    """

    base: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    prepend: bool = False

    @property
    def entries(self) -> tuple[str, ...]:
        """The value's directories: the base with the added ones after it (before it with
        ``prepend``), each once, no empty element. A directory the base has already keeps
        its place there: the base's order is never changed."""
        fresh = [d for d in self.added if d not in self.base]
        return pathlist.merge(self.base, fresh, prepend=self.prepend)

    @property
    def ld_library_path(self) -> str:
        """The value itself (raises PathListError for a directory holding ``:`` or ``;``)."""
        return pathlist.join(self.entries)

    @property
    def changes(self) -> bool:
        """Whether the repair adds anything, so that a flag is passed at all."""
        return bool(self.added)

    @property
    def flags(self) -> tuple[str, ...]:
        """The options that give it: none when nothing is added, else its one flag."""
        return (self.flag,) if self.added else ()

    @property
    def flag(self) -> str:
        return env_flag(VARIABLE, self.ld_library_path)

    def adding(self, dirs: Sequence[str]) -> Given:
        """This value with ``dirs`` added too (those it holds already are not repeated)."""
        fresh = tuple(d for d in pathlist.merge(self.added, dirs) if d not in self.base)
        return Given(self.base, fresh, self.prepend)

    def on(self, base: Sequence[str]) -> Given:
        """The same additions on another base (a test whose own value differs)."""
        return Given(tuple(base), self.added, self.prepend)

    def bazelrc_line(self) -> str:
        """``test --test_env=...``, quoted for Bazel's rc tokenizer (raises
        :class:`quoting.UnquotableError` for a value it cannot carry)."""
        return "test " + quoting.bazelrc_word(self.flag)

    def export_line(self) -> str:
        return f"export {VARIABLE}={shlex.quote(self.ld_library_path)}"

    @classmethod
    def from_flag(cls, word: str) -> Given | None:
        """The value of a flag :attr:`flag` wrote, all of it as added (None: any other
        word, or a flag that adds nothing)."""
        if not word.startswith(_PREFIX) or "\0" in word:
            return None
        entries = pathlist.merge((), pathlist.split(word[len(_PREFIX):]))
        return cls((), entries) if entries else None

    @classmethod
    def of_value(cls, value: str | None) -> Given:
        """A value as it stands, as the base, nothing added."""
        return cls(pathlist.split(value))


def flags(given: Given | None) -> tuple[str, ...]:
    """The options that give it: none, or its one flag."""
    return () if given is None else given.flags

"""One Bazel command line, read word by word in one place.

Bazel reads the words after its command as options (``--name=V``, ``--name V``,
``--name``, ``--noname``) and target patterns, up to a ``--``; after it, only target
patterns (a negative one, ``-//t:x``, only there). Every part of the tool that adds to,
takes from or reads a command line asks a :class:`CommandLine`; none splits words itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_TRUE = ("1", "true", "yes")


@dataclass(frozen=True)
class CommandLine:
    """``bazel [STARTUP] COMMAND OPTIONS -- RESIDUE``, as words."""

    options: tuple[str, ...] = ()
    """Before the ``--``: options, their values and target patterns, as given."""
    residue: tuple[str, ...] | None = None
    """After the ``--``: target patterns only (None: there is no ``--``)."""
    command: str = "test"
    startup: tuple[str, ...] = ()
    """Options of Bazel's own, before the command."""

    @classmethod
    def of(cls, words: Iterable[str], *, command: str = "test",
           startup: Sequence[str] = ()) -> CommandLine:
        """The words after the command, split at the first ``--``."""
        words = tuple(words)
        if "--" in words:
            at = words.index("--")
            return cls(words[:at], words[at + 1:], command, tuple(startup))
        return cls(words, None, command, tuple(startup))

    @property
    def words(self) -> list[str]:
        """The words after the command, as Bazel is given them."""
        if self.residue is None:
            return list(self.options)
        return [*self.options, "--", *self.residue]

    @property
    def argv(self) -> list[str]:
        """Startup options, the command and its words (without the ``bazel`` itself)."""
        return [*self.startup, self.command, *self.words]

    def with_options(self, options: Sequence[str]) -> CommandLine:
        """``options`` added after the others, before a ``--`` (where Bazel reads them)."""
        return CommandLine((*self.options, *options), self.residue, self.command, self.startup)

    def with_targets(self, patterns: Sequence[str]) -> CommandLine:
        """``patterns`` added after a ``--`` (made when there is none), where Bazel reads
        ``-//t:x`` as a negative pattern rather than an option."""
        return CommandLine(self.options, (*(self.residue or ()), *patterns), self.command,
                           self.startup)

    def values(self, name: str) -> tuple[str, ...]:
        """Every value given to ``--name``, as ``--name=V`` or ``--name V``, in order."""
        words = self.options
        out = []
        for at, word in enumerate(words):
            if word.startswith(f"--{name}="):
                out.append(word.split("=", 1)[1])
            elif word == f"--{name}" and at + 1 < len(words):
                out.append(words[at + 1])
        return tuple(out)

    def flag(self, name: str, default: bool = False) -> bool:
        """The value the last of ``--name``, ``--noname`` and ``--name=V`` gives a boolean
        option (``default`` when none is given)."""
        value = default
        for word in self.options:
            if word == f"--{name}":
                value = True
            elif word == f"--no{name}":
                value = False
            elif word.startswith(f"--{name}="):
                value = word.split("=", 1)[1].lower() in _TRUE
        return value

    def without(self, name: str, *, takes_value: bool = True) -> CommandLine:
        """This command line less every ``--name=V``; and ``--name V`` when the option
        takes a value, ``--name`` and ``--noname`` when it does not."""
        out: list[str] = []
        words = self.options
        at = 0
        while at < len(words):
            word = words[at]
            if word == f"--{name}" and takes_value:
                at += 2
                continue
            if not (word.startswith(f"--{name}=") or
                    (not takes_value and word in (f"--{name}", f"--no{name}"))):
                out.append(word)
            at += 1
        return CommandLine(tuple(out), self.residue, self.command, self.startup)

    def until_last(self, word: str) -> CommandLine:
        """The options before the last ``word`` (all of them when there is none): what
        was given before an option of the tool's own, added last."""
        at = max((i for i, w in enumerate(self.options) if w == word), default=-1)
        return self if at < 0 else CommandLine(self.options[:at], None, self.command,
                                               self.startup)

    def without_patterns(self, patterns: Sequence[str]) -> CommandLine | None:
        """The options alone: each of ``patterns`` (the target patterns as Bazel read them)
        taken out where it first stands as a word of its own, ``--target_pattern_file``
        too, and no ``--``; None when a pattern cannot be told from an option's value.

        Before a ``--`` a word that starts with ``-`` is an option; any other word is a
        pattern or the value of the option before it (``--test_output errors``).
        """
        remaining = list(patterns)
        for word in self.residue or ():
            if word in remaining:
                remaining.remove(word)
        out: list[str] = []
        skip_value = False
        for word in self.options:
            if skip_value:
                skip_value = False
                continue
            if word.startswith("--target_pattern_file"):
                skip_value = "=" not in word
                continue
            if not word.startswith("-") and word in remaining:
                remaining.remove(word)
                continue
            out.append(word)
        if remaining:
            return None
        return CommandLine(tuple(out), None, self.command, self.startup)


def option_of(word: str) -> tuple[str, str]:
    """``--name=value`` as ``(name, value)`` (``value`` empty when there is no ``=``)."""
    name, _, value = word.removeprefix("--").partition("=")
    return name, value

"""One error hierarchy; each class carries the process exit code it maps to.

``cli.main`` catches :class:`LdfixError` once and prints ``error: <message>`` on stderr.
Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence


class LdfixError(Exception):
    """Root of every error this project reports to a user."""

    exit_code = 2


class BadInputError(LdfixError):
    """A file, directory or value given by the user cannot be used."""


class NotElfError(BadInputError):
    """A file that should be an ELF object is not one (or is truncated). ``archive``: it is
    a static archive (``!<arch>``, ``!<thin>``), linked into programs, never loaded."""

    def __init__(self, message: str, *, archive: bool = False) -> None:
        super().__init__(message)
        self.archive = archive


class MalformedElfError(NotElfError):
    """An ELF file whose headers point outside it or ask for more than any real file has."""


class UntrustedLoaderError(BadInputError):
    """The loader that would be asked is not one this tool may run."""


class PathListError(BadInputError):
    """A directory cannot be put into a colon-separated search list."""


class LinkDirError(LdfixError):
    """A directory of links named by sonames cannot be made (the repair then gives those
    libraries no other way, and says so)."""


class CannotEditError(LdfixError):
    """A BUILD change is known but cannot be made safely (the file does not parse, a macro
    defines the rule, the file is read-only, two fixes disagree); nothing is written."""

    exit_code = 68


class PatternError(BadInputError):
    """A symbol pattern this tool cannot read."""


class DemanglerError(LdfixError):
    """A C++ pattern was given and no demangler can be run."""

    exit_code = 69


class BazelError(LdfixError):
    """Bazel could not be run, or a query step of it failed."""

    exit_code = 66

    def __init__(
        self, message: str, cmd: Sequence[str] = (), returncode: int | None = None,
        stderr: str = "",
    ) -> None:
        super().__init__(message)
        self.cmd = tuple(cmd)
        self.returncode = returncode
        self.stderr = stderr

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        """The message, then the last lines of Bazel's stderr, indented: each a line of
        its own, escaped one by one where it is printed (a name in the message cannot
        start a line)."""
        text = super().__str__()
        if self.returncode is not None:
            text += f" ({exit_words(self.returncode)})"
        tail = [line for line in self.stderr.splitlines() if line.strip()][-8:]
        return [text, *(f"    {line}" for line in tail)]


def exit_words(returncode: int) -> str:
    """How a process ended, as a shell would say it: ``exit code 1``, ``killed by SIGKILL
    (exit code 137)`` for a negative code (killed by a signal)."""
    if returncode >= 0:
        return f"exit code {returncode}"
    # Here: +2.5 ms CPU on --help at the top (benchmarks/START.md).
    import signal

    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name} (exit code {128 - returncode})"


class BuildStepError(BazelError):
    """The build step of ``bazel test`` failed with Bazel's exit code ``code``; the tool's
    exit code is Bazel's own where ``bazel test`` would fail the same way."""

    def __init__(self, message: str, code: int, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        if exit_code is not None:
            self.exit_code = exit_code


class BazelNotFoundError(BazelError):
    """The bazel executable does not exist or cannot be started."""

    exit_code = 65


class NotAWorkspaceError(BazelError):
    """The current directory is not inside a Bazel workspace."""

    exit_code = 64


class NoTestsError(LdfixError):
    """The target patterns select no test."""

    exit_code = 67

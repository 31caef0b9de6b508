"""Starting Bazel the way the user does, and ending what the tool started itself."""

from __future__ import annotations

import contextlib
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import IO, TYPE_CHECKING

from bazel_ldfix import children
from bazel_ldfix.bazel.commandline import CommandLine
from bazel_ldfix.errors import BazelError, BazelNotFoundError, NotAWorkspaceError

if TYPE_CHECKING:
    pass


WAIT_NOTICE = 1.0  # seconds a captured Bazel command runs before the user is told
DEFAULT_TIMEOUT = 300.0  # seconds for each Bazel call of the tool's own (--bazel-timeout)


@dataclass(frozen=True)
class Bazel:
    """How to start Bazel the way the user does."""

    executable: str
    cwd: str
    env: Mapping[str, str]
    startup: tuple[str, ...] = ()
    # Told, with the command line, when a captured command has taken a second (a Bazel
    # server starting): a terminal should not sit silent. None: say nothing.
    waiting: Callable[[Sequence[str]], None] | None = None
    # Seconds each call of the tool's own (info, query, the download step) may take; it is
    # ended after that. None: no limit. The user's `bazel test` and the build step (which
    # builds what `bazel test` would) have none.
    timeout: float | None = DEFAULT_TIMEOUT

    def argv(self, command: str, args: Sequence[str]) -> list[str]:
        return [self.executable, *CommandLine.of(args, command=command, startup=self.startup).argv]

    def capture(self, command: str, args: Sequence[str]) -> str:
        """Run a query-like command; its stdout, or BazelError with its stderr."""
        cmd = self.argv(command, args)
        child = self.spawn(cmd)
        slow = None if self.waiting is None else (WAIT_NOTICE, lambda: self._wait(cmd))
        return finish(cmd, child, self.timeout, slow)

    def _wait(self, cmd: Sequence[str]) -> None:
        if self.waiting is not None:
            self.waiting(cmd)

    def spawn(self, cmd: Sequence[str]) -> subprocess.Popen[bytes]:
        """``cmd`` started as one of the tool's own calls (:mod:`children`), its output
        captured."""
        try:
            return children.start(cmd, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        except OSError as exc:
            raise BazelNotFoundError(f"cannot run {self.executable}: {exc.strerror}",
                                     cmd) from None

    def stream(self, command: str, args: Sequence[str], *,
               hide: Sequence[str] = ()) -> int:
        """Run with Bazel's output going to ours as it comes; its exit code.

        With ``hide``, Bazel's stdout and stderr both go to our stderr, line by line,
        except lines containing one of those strings. Bazel runs in a session of its own
        (:mod:`children`); a signal sent to this process is passed on to its group (which
        then stops cleanly), as a terminal passes Ctrl-C on to its foreground group.
        """
        return self.start(command, args, hide=hide).wait()

    def start(self, command: str, args: Sequence[str], *,
              hide: Sequence[str] = (), own: bool = False) -> Streaming:
        """:meth:`stream`, returning once Bazel has started: the caller works while Bazel
        does, then calls :meth:`Streaming.wait` (always: it also puts back the signal
        handlers). ``own``: a step of the tool's own, which a signal ends with the tool;
        else the signal is passed on to Bazel's group, and Bazel decides."""
        return Streaming(self, self.argv(command, args), hide, own)


def finish(cmd: Sequence[str], child: subprocess.Popen[bytes], timeout: float | None,
           slow: tuple[float, Callable[[], None]] | None = None) -> str:
    """The stdout of a captured call once it has ended; BazelError when it failed, did not
    end within ``timeout`` seconds, or printed more than any Bazel command does."""
    what = shlex.join(cmd)
    try:
        out, err = children.collect(child, timeout, slow)
    except children.Expired:
        raise BazelError(f"`{what}` did not answer within {timeout:g} s "
                         "(--bazel-timeout); it was ended", cmd) from None
    except children.TooMuchOutput:
        raise BazelError(f"`{what}` printed more than {children.MAX_OUTPUT >> 20} MiB; "
                         "it was ended", cmd) from None
    stderr = err.decode("utf-8", "replace")
    if child.returncode != 0:
        raise _failure(cmd, child.returncode, stderr)
    return out.decode("utf-8", "surrogateescape")


class Streaming:
    """A Bazel command whose output goes to ours while this process does other work (a
    thread copies it, without the ``hide`` lines; see :meth:`Bazel.stream`).

    Every one is started by :mod:`children`, in a session of its own. The user's ``bazel
    test`` gets each signal this process gets, passed on to its whole group
    (:func:`children.forward`), and ends as Bazel decides; what its leader leaves running
    in the group then is killed. A step of the tool's own (``own``) is ended by a signal at
    once, with the tool.
    """

    def __init__(self, bazel: Bazel, cmd: list[str], hide: Sequence[str],
                 own: bool = False) -> None:
        self.executable = bazel.executable
        self.own = own
        self.child: subprocess.Popen[bytes] | None = None
        self._forwarded = False
        pending: list[int] = []

        def forward(signum: int, _frame: FrameType | None) -> None:
            self._forwarded = True
            if self.child is None:
                pending.append(signum)  # not started yet: passed on once it is
            else:
                children.forward(self.child, signum)

        # Installed before Bazel starts: a signal in between would otherwise stop us and
        # leave Bazel running.
        self._old = {} if own else {s: signal.signal(s, forward) for s in children.SIGNALS}
        out = subprocess.PIPE if hide else None
        err = subprocess.STDOUT if hide else None
        try:
            self.child = children.start(cmd, cwd=bazel.cwd, env=bazel.env, stdout=out,
                                        stderr=err)
        except OSError as exc:
            self._restore()
            raise BazelNotFoundError(f"cannot run {bazel.executable}: {exc.strerror}",
                                     cmd) from None
        for signum in pending:
            children.forward(self.child, signum)
        self._copier: threading.Thread | None = None
        if self.child.stdout is not None:
            self._copier = threading.Thread(target=_copy_lines,
                                            args=(self.child.stdout, tuple(hide)),
                                            daemon=True)
            self._copier.start()

    def _restore(self) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def running(self) -> bool:
        assert self.child is not None
        return self.child.poll() is None

    def pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less if Bazel ends first."""
        assert self.child is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(timeout=seconds)

    def wait(self, timeout: float | None = None) -> int:
        """Bazel's exit code (128 + N when a signal killed it, as a shell says).

        ``timeout`` (a step of the tool's own only): seconds it may still run; then it is
        ended and :class:`children.Expired` raised."""
        assert self.child is not None
        try:
            if timeout is not None:
                try:
                    self.child.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    children.end(self.child)
                    raise children.Expired from None
            if not self.own:
                # Signals passed on meanwhile end what the leader leaves in its group.
                children.settle(self.child, lambda: self._forwarded)
            if self._copier is not None:
                # Once the tool is being ended, its groups are gone: what still holds the
                # pipe is no one's to wait for.
                self._copier.join(1.0 if children.ending() else None)
            code = self.child.wait()
        finally:
            children.reaped(self.child)
            self._restore()
        if code < 0 and not children.ending():
            # Killed by a signal: say so, and exit as a shell would (128 + N), not with
            # the byte Python would make of -N.
            sys.stderr.write(f"bazel-ldfix: {self.executable} was killed by "
                             f"{children.signal_name(-code)} (exit code {128 - code})\n")
        return 128 - code if code < 0 else code


def _copy_lines(stream: IO[bytes], hide: tuple[str, ...]) -> None:
    """Bazel's lines to our stderr, to its end: when our stderr is gone (a closed pipe),
    Bazel's output is still read, so that Bazel never waits on a full pipe."""
    hidden = [h.encode() for h in hide]
    out: IO[bytes] | None = sys.stderr.buffer
    for raw in stream:
        if out is None or any(h in raw for h in hidden):
            continue
        try:
            out.write(raw)
            out.flush()
        except (OSError, ValueError):
            out = None


def _failure(cmd: Sequence[str], returncode: int, stderr: str) -> BazelError:
    if "only supported from within a workspace" in stderr or "not within a workspace" in stderr \
            or "within a Bazel workspace" in stderr:
        return NotAWorkspaceError("not inside a Bazel workspace (no WORKSPACE or MODULE.bazel "
                                  "above the current directory)", cmd)
    return BazelError(f"`{' '.join(cmd)}` failed", cmd, returncode, stderr)

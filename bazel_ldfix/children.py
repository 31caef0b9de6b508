"""The Bazel processes this tool starts, each in a session of its own and ended with it.

Every Bazel the tool starts (``info``, ``query``, ``help``, the build step, the download
step, the analysis of ``fix --write``, the user's own ``bazel test``) is started here, in
a session (so a process group) of its own, with no terminal input, and registered until
it has been reaped: a wrapper script (bazelisk, a company's ``tools/bazel``) and whatever
it starts are one group, ended as one. The Bazel server is not in it (it starts in a
session of its own) and is never touched.

SIGINT, SIGTERM, SIGHUP and SIGQUIT (:data:`SIGNALS`), once :func:`ended_on_signals` is in
force, end the tool at once: every registered group gets :func:`stop_signal` once (the
Bazel client then asks its server to cancel the command), then, after :data:`GRACE`
seconds at most, SIGKILL; then :class:`Interrupted` is raised, which the command line
turns into exit code 128 + N. The same signal is never sent twice: a third SIGINT makes a
Bazel client kill its server. While the user's own ``bazel test`` runs, a signal is passed
on to its group instead, as a terminal passes Ctrl-C to its foreground group, and the tool
waits for Bazel's own exit code (:class:`bazel_ldfix.bazel.client.Streaming`).

Work that must not be cut in two (files being written, a process being started) runs
:func:`held`: a signal that comes meanwhile is handled once it is done.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import IO

GRACE = 3.0              # seconds a signalled Bazel client has to end before SIGKILL
MAX_OUTPUT = 64 << 20    # bytes of stdout (or stderr) a captured call may print

# The signals that end the tool, or that are passed on to the user's `bazel test`.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_live: dict[int, subprocess.Popen[bytes]] = {}   # pid -> a group leader not yet reaped
_ending: list[int] = []                          # the signal being handled, if any
_holding: list[bool] = []                        # work that a signal must not cut
_deferred: list[int] = []                        # a signal that came meanwhile


class Interrupted(BaseException):
    """One of :data:`SIGNALS` reached the tool; every Bazel it started has been ended.

    A BaseException, as KeyboardInterrupt is: no ``except Exception`` (the fail-open
    guard of ``test``) takes it for a failure to recover from.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal_name(self.signum)


class Expired(Exception):
    """A bounded call did not end in time (it has been ended)."""


class TooMuchOutput(Exception):
    """A captured call printed more than :data:`MAX_OUTPUT` bytes (it has been ended)."""


def ending() -> bool:
    """Whether the tool is being ended by a signal (its children have been)."""
    return bool(_ending)


def stop_signal(signum: int) -> int:
    """What a Bazel group is sent when the tool gets ``signum``: SIGINT and SIGTERM as
    they are, SIGHUP and SIGQUIT as SIGTERM. A Bazel client cancels its command on SIGINT
    and SIGTERM. It reads SIGQUIT as a request to make its server print its threads, and
    dies of SIGHUP without a word to its server."""
    return signum if signum in (signal.SIGINT, signal.SIGTERM) else signal.SIGTERM


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def start(cmd: Sequence[str], *, cwd: str, env: Mapping[str, str],
          stdout: int | None, stderr: int | None) -> subprocess.Popen[bytes]:
    """``cmd`` in a new session (so a process group of its own, and no controlling
    terminal), stdin /dev/null, registered until :func:`reaped`."""
    # A signal that comes while the process is being started (it may already run) is
    # handled once it is known.
    with held():
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=stderr, start_new_session=True)
        _live[proc.pid] = proc
    if _ending:
        # Started while the tool is being ended (a finally block): end it too.
        end(proc, stop_signal(_ending[0]), grace=0)
    return proc


def reaped(proc: subprocess.Popen[bytes]) -> None:
    """``proc`` has been waited for: no longer one of the tool's live children."""
    _live.pop(proc.pid, None)


def end(proc: subprocess.Popen[bytes], signum: int = signal.SIGINT,
        grace: float = GRACE) -> None:
    """Send ``signum`` to ``proc``'s group once; SIGKILL the group if ``proc`` has not
    ended after ``grace`` seconds; reap it."""
    _end_groups([proc], signum, grace)
    proc.wait()
    reaped(proc)


def _end_groups(procs: Sequence[subprocess.Popen[bytes]], signum: int, grace: float) -> None:
    """Signal each group once, give the leaders ``grace`` seconds, then SIGKILL every
    group (what a leader started goes too, even when the leader itself has ended).

    No process is waited for here (a signal handler runs this while the main thread may
    be inside ``Popen.wait``, holding its lock): a leader's end is seen on its pidfd.
    """
    for proc in procs:
        _signal_group(proc, signum)
    deadline = time.monotonic() + grace
    for proc in procs:
        _ends_by(proc.pid, deadline)
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)


def forward(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Pass ``signum`` on to ``proc``'s group, as :func:`stop_signal` says (the user's
    ``bazel test``, which ends as Bazel decides)."""
    _signal_group(proc, stop_signal(signum))


def settle(proc: subprocess.Popen[bytes], signalled: Callable[[], bool]) -> None:
    """Wait for ``proc`` to end (it is not reaped: its group id stays its own); then, if
    ``signalled()``, SIGKILL what is left of its group. What a wrapper started outlives
    it when the wrapper dies of a signal, and would hold Bazel's lock."""
    _ends_by(proc.pid, None)
    if signalled():
        _signal_group(proc, signal.SIGKILL)


def _ends_by(pid: int, deadline: float | None) -> bool:
    """Whether process ``pid`` has ended (a zombie has) by ``deadline`` (None: waits for
    it), without reaping it."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True     # reaped already
    except OSError:     # no pidfd (Linux before 5.3): ask, without reaping, until then
        while True:
            try:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    return True
            except ChildProcessError:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
    try:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], left)
        return bool(ready)
    finally:
        os.close(fd)


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    if proc.returncode is not None and proc.pid not in _live:
        return          # reaped: its group id may be anyone's now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Work a signal must not cut in two: one that comes meanwhile is handled (every
    group ended, :class:`Interrupted` raised) once it is done, or has failed."""
    _holding.append(True)
    try:
        yield
    finally:
        _holding.pop()
        if _deferred and not _holding and not _ending:
            _stop(_deferred[0])


@contextlib.contextmanager
def ended_on_signals() -> Iterator[None]:
    """While in force, each of :data:`SIGNALS` ends every registered group and raises
    :class:`Interrupted` in the main thread (see the module docstring)."""
    def handler(signum: int, _frame: FrameType | None) -> None:
        if _ending:
            # A second signal while the first is handled: no grace for anyone now.
            for proc in list(_live.values()):
                _signal_group(proc, signal.SIGKILL)
            return
        if _holding:
            _deferred.append(signum)    # handled once the held work is done
            return
        _stop(signum)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
        _ending.clear()
        _deferred.clear()


def _stop(signum: int) -> None:
    _ending.append(signum)
    _end_groups(list(_live.values()), stop_signal(signum), GRACE)
    raise Interrupted(signum)


def collect(proc: subprocess.Popen[bytes], timeout: float | None,
            slow: tuple[float, Callable[[], None]] | None = None) -> tuple[bytes, bytes]:
    """``proc``'s stdout and stderr (both pipes) once it has ended.

    Raises :class:`Expired` when it runs longer than ``timeout`` seconds (None: no limit)
    and :class:`TooMuchOutput` when it prints more than :data:`MAX_OUTPUT`; it is ended
    first either way. ``slow``: (seconds, what to call once it has run that long).
    """
    assert proc.stdout is not None and proc.stderr is not None
    streams = (_Drain(proc.stdout), _Drain(proc.stderr))
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        if slow is not None and not _ended(proc, time.monotonic() + slow[0], streams):
            slow[1]()
        if not _ended(proc, deadline, streams):
            if any(stream.overflow for stream in streams):
                end(proc, grace=0)
                raise TooMuchOutput
            end(proc)
            raise Expired
        # The pipes end when the last process holding them does: what the leader left
        # running in its group is ended once the time is up.
        for stream in streams:
            if not stream.join(deadline):
                end(proc, grace=0)
                stream.join(time.monotonic() + 1.0)
        if any(stream.overflow for stream in streams):
            raise TooMuchOutput
    except BaseException:
        end(proc, grace=0)
        raise
    finally:
        for stream in streams:
            stream.close()
    reaped(proc)
    return streams[0].data(), streams[1].data()


def _ended(proc: subprocess.Popen[bytes], deadline: float | None,
           streams: Sequence[_Drain]) -> bool:
    """Whether ``proc`` ends before ``deadline`` (None: waits for it), stopping early
    when it has printed too much."""
    while True:
        step = 0.25 if deadline is None else min(0.25, max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=step)
            return True
        if any(stream.overflow for stream in streams):
            return False
        if deadline is not None and time.monotonic() >= deadline:
            return False


class _Drain:
    """A pipe read to its end by a thread, keeping at most :data:`MAX_OUTPUT` bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.parts: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        fd = self.stream.fileno()
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(fd, 1 << 16):
                if self.size + len(chunk) > MAX_OUTPUT:
                    self.overflow = True
                    continue        # read on, keep nothing more: the writer never blocks
                self.parts.append(chunk)
                self.size += len(chunk)

    def join(self, deadline: float | None) -> bool:
        """Whether the pipe was read to its end before ``deadline``."""
        self.thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not self.thread.is_alive()

    def close(self) -> None:
        if not self.thread.is_alive():   # a read in progress keeps its pipe to the end
            with contextlib.suppress(OSError):
                self.stream.close()

    def data(self) -> bytes:
        return b"".join(self.parts)

"""The build step: what ``bazel test`` would build, built, and its events read as they come.

The test executables come from the Build Event Protocol of one ``bazel test`` step that
builds everything the user's command builds but runs no test (a test tag filter that no
test matches). That works from Bazel 4 to 8, builds with exactly the user's options and rc
files (so the real ``bazel test`` that follows reuses every output), and its
``structuredCommandLine`` event carries the canonical command line, with the options that
came from rc files, which decides the environment the tests get.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import tempfile
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING

from bazel_ldfix import children
from bazel_ldfix.errors import BazelError

if TYPE_CHECKING:
    from bazel_ldfix.bazel import bep
from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.commandline import CommandLine
from bazel_ldfix.bazel.exitcodes import NO_TESTS_FOUND, SUCCESS
from bazel_ldfix.bazel.options import NO_TEST_TAG, without
from bazel_ldfix.bazel.query import taken_out
from bazel_ldfix.bazel.targets import (
    BuildEvents,
    StepHead,
    TestTarget,
    build_events,
    parse_bep,
    test_target,
)
from bazel_ldfix.bazel.version import BazelVersion, of_started

# What Bazel says about the tag filter of the build step, which would only mislead.
# Its "Build completed" lines too: the real `bazel test` prints its own.
_BUILD_STEP_NOISE = ("All specified test targets were excluded by filters",
                     "No test targets were found, yet testing was requested",
                     "and 0 test targets...",
                     "INFO: Build completed successfully",
                     "INFO: Build Event Protocol files produced successfully")


def build_tests(bazel: Bazel, args: Sequence[str],
                expected: Sequence[str] = ()) -> tuple[BuildEvents, int]:
    """Build what ``bazel test ARGS`` would build, run no test; the events and exit code.

    Bazel's own progress goes to stderr as usual, so build failures are seen as they happen.
    ``expected`` are options the real ``bazel test`` is expected to get (the last run's
    repair): --test_env is part of the build options, so giving the build step the same
    value spares Bazel from discarding its analysis cache twice. They are left out of the
    returned events' options.
    """
    return BuildStep(bazel, args, expected).result()


class BuildStep:
    """:func:`build_tests` started: the caller works while Bazel builds, then asks for
    :meth:`result` (always: it waits for Bazel and removes the events' directory)."""

    def __init__(self, bazel: Bazel, args: Sequence[str], expected: Sequence[str] = ()) -> None:
        self.bazel = bazel
        self.expected = tuple(expected)
        self._tmp = tempfile.TemporaryDirectory(prefix="bazel-ldfix-")
        self._bep = os.path.join(self._tmp.name, "events.json")
        own = [f"--build_event_json_file={self._bep}", f"--test_tag_filters={NO_TEST_TAG}",
               "--nobuild_tests_only", *expected]
        try:
            self._running = bazel.start("test", CommandLine.of(args).with_options(own).words,
                                        hide=_BUILD_STEP_NOISE, own=True)
        except BaseException:
            self._tmp.cleanup()
            raise

    def result(self, on_test: Callable[[TestTarget, StepHead], None] | None = None
               ) -> tuple[BuildEvents, int]:
        """Bazel's events and exit code, once it ends. The events are read while Bazel
        writes them; ``on_test`` is told of each test as soon as it is built (its
        executable on disk, with this build's outputs done), which lets the caller read
        it while Bazel goes on. What is returned is the whole file's reading, less the
        tests built that ``bazel test`` would not run (:func:`_tests_run`)."""
        try:
            follower = EventFollower(self._bep, on_test, self.expected)
            try:
                while self._running.running():
                    if not follower.step():
                        self._running.pause(_POLL)
            finally:
                code = self._running.wait()
            events = follower.finish()
        finally:
            self._tmp.cleanup()
        if self.expected:
            events = dataclasses.replace(events,
                                         options=without(events.options, self.expected))
        if code in (SUCCESS, NO_TESTS_FOUND) and events.complete:
            events = _tests_run(self.bazel, events)
        return events, code


def _tests_run(bazel: Bazel, events: BuildEvents) -> BuildEvents:
    """The events less the tests that ``bazel test`` builds and does not run: those a
    negative pattern takes out (:func:`bazel_ldfix.bazel.query.taken_out`)."""
    try:
        out = taken_out(bazel, events.patterns)
    except BazelError:
        out = None
    if not out:
        # (Not known: every test built stands in. Each `bazel test` of the tool still
        # has the user's patterns, so Bazel decides what runs; the model may count more.)
        return events
    return dataclasses.replace(events, tests=tuple(t for t in events.tests
                                                   if t.label not in out))


_POLL = 0.005       # seconds between two looks at a build event file that has not grown
_CHUNK = 1 << 20


class EventFollower:
    """A ``--build_event_json_file`` read as Bazel writes it: its complete lines, as
    :func:`parse_bep` would read the whole file (text lines, universal newlines, UTF-8
    with undecodable bytes replaced). If the file was replaced or cut while it was
    followed, the whole file is read again at the end."""

    def __init__(self, path: str,
                 on_test: Callable[[TestTarget, StepHead], None] | None,
                 expected: Sequence[str] = ()) -> None:
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.bazel import bep

        self.path = path
        self.on_test = on_test
        self.expected = tuple(expected)
        self._head: StepHead | None = None
        self.reader = bep.Reader()
        self._fh: IO[bytes] | None = None
        self._pending = b""
        self._number = 0
        self._configured: dict[str, bep.ConfiguredTarget] = {}
        self._seen_configured = 0
        self._seen_completed = 0

    def step(self) -> bool:
        """Read what Bazel has written since; whether there was anything."""
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")  # noqa: SIM115 (closed by finish)
            except FileNotFoundError:
                return False
        chunk = self._fh.read(_CHUNK)
        if not chunk:
            return False
        self._pending += chunk
        end = self._pending.rfind(b"\n")
        if end >= 0:
            self._lines(self._pending[:end + 1])
            self._pending = self._pending[end + 1:]
        return True

    def finish(self) -> BuildEvents:
        """The events of the whole file, once Bazel has ended."""
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")  # noqa: SIM115
            except FileNotFoundError:
                return BuildEvents((), (), BazelVersion(), None, None, complete=False)
        with self._fh:
            while self.step():
                pass
            same = _same_file(self._fh, self.path)
        if not same:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                return parse_bep(fh)
        if self._pending:
            self._lines(self._pending)
        return build_events(self.reader.result())

    def _lines(self, data: bytes) -> None:
        text = data.decode("utf-8", "replace")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        for line in lines:
            self._number += 1
            self.reader.line(self._number, line)
        if self.on_test is not None:
            self._tell()

    def _tell(self) -> None:
        reader = self.reader
        fresh = reader.configured_since(self._seen_configured)
        self._seen_configured += len(fresh)
        for configured in fresh:
            if configured.is_test:
                self._configured[configured.label] = configured
        done = reader.completed_since(self._seen_completed)
        self._seen_completed += len(done)
        for completed in done:
            target = self._configured.get(completed.label)
            if target is None or not completed.success:
                continue
            test = test_target(target, completed.outputs, reader.exec_root)
            if test is not None and os.path.isfile(test.executable):
                assert self.on_test is not None
                self.on_test(test, self._head_now())

    def _head_now(self) -> StepHead:
        """The step's head, as read when its first test is told (Bazel writes its command
        line and its started event first)."""
        if self._head is None:
            reader = self.reader
            self._head = StepHead(without(reader.options, self.expected),
                                  of_started(reader.started))
        return self._head


def _same_file(fh: IO[bytes], path: str) -> bool:
    """Whether ``path`` is still the file ``fh`` read, read to its end."""
    try:
        now = os.stat(path)
        mine = os.fstat(fh.fileno())
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino) and \
        now.st_size == fh.tell()


def download_outputs(bazel: Bazel, args: Sequence[str], expected: Sequence[str] = ()) -> int:
    """``bazel build ARGS --remote_download_outputs=toplevel``: the top-level outputs of the
    targets ``bazel test ARGS`` builds, with their runfiles, on disk; Bazel's exit code.
    BazelError when it does not end within the Bazel calls' time limit (it is ended).

    In a `build` command, ``toplevel`` downloads every top-level target's important outputs
    and runfiles (bazelbuild/bazel ``src/main/java/com/google/devtools/build/lib/remote/
    RemoteOutputChecker.java``, ``shouldAddTopLevelTarget``: ``default -> outputsMode !=
    MINIMAL``; ``addRunfiles``), where a `test` command leaves test executables remote.
    ``--remote_download_outputs`` is not a build option, so the analysis cache stays.
    """
    own = ["--remote_download_outputs=toplevel", *expected]
    running = bazel.start("build", CommandLine.of(args).with_options(own).words,
                          hide=_BUILD_STEP_NOISE, own=True)
    try:
        return running.wait(bazel.timeout)
    except children.Expired:
        raise BazelError(f"`{shlex.join(bazel.argv('build', ['...', *own[:1]]))}` did not "
                         f"end within {bazel.timeout:g} s (--bazel-timeout); it was ended",
                         bazel.argv("build", args)) from None

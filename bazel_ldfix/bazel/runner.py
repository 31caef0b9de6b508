"""Running Bazel, and reading what it says about the tests it would run.

The test executables come from the Build Event Protocol of one ``bazel test`` step that
builds everything the user's command builds but runs no test (a test tag filter that no
test matches). That works from Bazel 4 to 8, builds with exactly the user's options and rc
files (so the real ``bazel test`` that follows reuses every output), and its
``structuredCommandLine`` event carries the canonical command line, with the options that
came from rc files, which decides the environment the tests get.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import IO, TYPE_CHECKING

from bazel_ldfix.bazel import children
from bazel_ldfix.errors import BazelError, BazelNotFoundError, NotAWorkspaceError

if TYPE_CHECKING:
    from bazel_ldfix.bazel import bep
    from bazel_ldfix.bazel.bep import Option

NO_TEST_TAG = "bazel-ldfix-builds-but-runs-no-test"
WAIT_NOTICE = 1.0  # seconds a captured Bazel command runs before the user is told
NO_TESTS_FOUND = 4  # Bazel's exit code when the build worked and no test was selected
INTERRUPTED = 8     # Bazel's exit code for an interrupted command
DEFAULT_TIMEOUT = 300.0  # seconds for each Bazel call of the tool's own (--bazel-timeout)
# What Bazel says about the tag filter of the build step, which would only mislead.
# Its "Build completed" lines too: the real `bazel test` prints its own.
_BUILD_STEP_NOISE = ("All specified test targets were excluded by filters",
                     "No test targets were found, yet testing was requested",
                     "and 0 test targets...",
                     "INFO: Build completed successfully",
                     "INFO: Build Event Protocol files produced successfully")


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
        return [self.executable, *self.startup, command, *args]

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
        except lines containing one of those strings. SIGINT and SIGTERM sent to this
        process are passed on to Bazel (which then stops cleanly); from a terminal,
        Ctrl-C reaches both of us anyway.
        """
        return self.start(command, args, hide=hide).wait()

    def start(self, command: str, args: Sequence[str], *,
              hide: Sequence[str] = (), own: bool = False) -> Streaming:
        """:meth:`stream`, returning once Bazel has started: the caller works while Bazel
        does, then calls :meth:`Streaming.wait` (always: it also puts back the signal
        handlers). ``own``: a step of the tool's own, started as :mod:`children` starts
        them (a signal ends it with the tool)."""
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

    The user's ``bazel test`` stays in this process's group, and SIGINT and SIGTERM are
    passed on to it. A step of the tool's own (``own``) is one of :mod:`children`: a signal
    ends it, and the tool, at once.
    """

    def __init__(self, bazel: Bazel, cmd: list[str], hide: Sequence[str],
                 own: bool = False) -> None:
        self.executable = bazel.executable
        self.own = own
        self.child: subprocess.Popen[bytes] | None = None
        pending: list[int] = []

        def forward(signum: int, _frame: FrameType | None) -> None:
            if self.child is None:
                pending.append(signum)  # not started yet: passed on once it is
            else:
                self.child.send_signal(signum)

        # Installed before Bazel starts: a signal in between would otherwise stop us and
        # leave Bazel running.
        self._old = {} if own else {
            s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        out = subprocess.PIPE if hide else None
        err = subprocess.STDOUT if hide else None
        try:
            if own:
                self.child = children.start(cmd, cwd=bazel.cwd, env=bazel.env, stdout=out,
                                            stderr=err)
            else:
                self.child = subprocess.Popen(cmd, cwd=bazel.cwd, env=dict(bazel.env),
                                              stdout=out, stderr=err)
        except OSError as exc:
            self._restore()
            raise BazelNotFoundError(f"cannot run {bazel.executable}: {exc.strerror}",
                                     cmd) from None
        for signum in pending:
            self.child.send_signal(signum)
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
            if self._copier is not None:
                # Once the tool is being ended, its groups are gone: what still holds the
                # pipe is no one's to wait for.
                self._copier.join(1.0 if children.ending() else None)
            code = self.child.wait()
        finally:
            self._restore()
            if self.own:
                children.reaped(self.child)
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


WORKSPACE_FILES = ("MODULE.bazel", "REPO.bazel", "WORKSPACE.bazel", "WORKSPACE")


def workspace_of(directory: str) -> str | None:
    """The Bazel workspace ``directory`` is in: the nearest ancestor with a boundary file."""
    current = os.path.abspath(directory)
    while True:
        if any(os.path.isfile(os.path.join(current, f)) for f in WORKSPACE_FILES):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def output_base(bazel: Bazel) -> str:
    """``bazel info output_base`` (depends on startup options only).

    Its last line: a wrapper script may print a line of its own first."""
    out = bazel.capture("info", ["output_base"])
    value = next((line.strip() for line in reversed(out.splitlines()) if line.strip()), "")
    if not value:
        raise BazelError("`bazel info output_base` printed nothing",
                         bazel.argv("info", ["output_base"]))
    return value


@dataclass(frozen=True)
class TestTarget:
    label: str
    executable: str
    size: str = ""     # "small", "medium", ... as the BEP names it (lower case)
    tags: tuple[str, ...] = ()   # the rule's tags (TargetConfigured.tag)


@dataclass(frozen=True)
class BuildEvents:
    """What one build step said about itself."""

    tests: tuple[TestTarget, ...]
    options: tuple[Option, ...]     # canonical command options, rc files included, in order
    version: str | None
    workspace: str | None
    exit_code: int | None
    # rc-file and explicit options as given (optionsParsed.cmdLine): the canonical list keeps
    # only the last value of a single-valued option, which hides the user's test filters.
    command_line: tuple[str, ...] = ()
    exec_root: str | None = None    # workspaceInfo.localExecRoot: OUTPUT_BASE/execroot/NAME
    patterns: tuple[str, ...] = ()  # the target patterns, as Bazel read them (the pattern event)
    complete: bool = True           # False: the events end before Bazel's last one

    @property
    def output_base(self) -> str | None:
        from bazel_ldfix.bazel import bep

        return bep.output_base_of_exec_root(self.exec_root)


@dataclass(frozen=True)
class StepHead:
    """What a build step's first events say, before any target's: its canonical options
    (less the ones the caller added) and Bazel's version."""

    options: tuple[Option, ...]
    version: str | None


def parse_bep(lines: Iterable[str]) -> BuildEvents:
    """Read a ``--build_event_json_file``: test targets, their executables, the options.

    A line that is not an event (a cut-short last line when Bazel was interrupted) is
    skipped, and fields of another type than Bazel's schema gives them are ignored.
    """
    # Imported here: Bazel is started before the event reader is needed.
    from bazel_ldfix.bazel import bep

    return build_events(bep.read(lines))


def build_events(events: bep.EventFile) -> BuildEvents:
    """The tests of a build step's events, each with its executable, and its options."""
    from bazel_ldfix.bazel import bep

    configured = {target.label: target for target in events.configured if target.is_test}
    outputs = {done.label: done.outputs for done in events.completed if done.success}
    tests = []
    for label in sorted(configured):
        test = _test_target(configured[label], outputs.get(label, ()), events.exec_root)
        if test is not None:
            tests.append(test)
    started = events.started or bep.Started(None, None)
    return BuildEvents(tuple(tests), events.options, started.version, started.workspace,
                       events.exit_code, events.command_line, events.exec_root,
                       events.patterns, events.complete)


def _test_target(target: bep.ConfiguredTarget, outputs: Sequence[bep.File],
                 exec_root: str | None) -> TestTarget | None:
    """A test configured and built, with its executable (None: none among its outputs)."""
    from bazel_ldfix.bazel import bep

    paths = (bep.file_path(f, exec_root) for f in outputs)
    executable = _executable(target.label,
                             list(dict.fromkeys(p for p in paths if p is not None)))
    if not executable:
        return None
    return TestTarget(target.label, executable, target.size.lower(), target.tags)


def _executable(label: str, files: Sequence[str]) -> str | None:
    """The output named after the target (a test's executable); on disk or not (a remote
    cache may not have downloaded it: the caller decides what to do)."""
    name = label.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    named = [path for path in files if os.path.basename(path) == name]
    on_disk = [path for path in named if os.path.isfile(path)]
    chosen = on_disk or named
    return chosen[0] if chosen else None


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
        self.expected = tuple(expected)
        self._tmp = tempfile.TemporaryDirectory(prefix="bazel-ldfix-")
        self._bep = os.path.join(self._tmp.name, "events.json")
        own = [f"--build_event_json_file={self._bep}", f"--test_tag_filters={NO_TEST_TAG}",
               "--nobuild_tests_only", *expected]
        try:
            self._running = bazel.start("test", with_options(args, own),
                                        hide=_BUILD_STEP_NOISE, own=True)
        except BaseException:
            self._tmp.cleanup()
            raise

    def result(self, on_test: Callable[[TestTarget, StepHead], None] | None = None
               ) -> tuple[BuildEvents, int]:
        """Bazel's events and exit code, once it ends. The events are read while Bazel
        writes them; ``on_test`` is told of each test as soon as it is built (its
        executable on disk, with this build's outputs done), which lets the caller read
        it while Bazel goes on. What is returned is the whole file's reading."""
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
                                         options=_without(events.options, self.expected))
        return events, code


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
                return BuildEvents((), (), None, None, None, complete=False)
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
            test = _test_target(target, completed.outputs, reader.exec_root)
            if test is not None and os.path.isfile(test.executable):
                assert self.on_test is not None
                self.on_test(test, self._head_now())

    def _head_now(self) -> StepHead:
        """The step's head, as read when its first test is told (Bazel writes its command
        line and its started event first)."""
        if self._head is None:
            reader = self.reader
            self._head = StepHead(_without(reader.options, self.expected),
                                  reader.started.version if reader.started else None)
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
    running = bazel.start("build", with_options(args, own), hide=_BUILD_STEP_NOISE, own=True)
    try:
        return running.wait(bazel.timeout)
    except children.Expired:
        raise BazelError(f"`{shlex.join(bazel.argv('build', ['...', *own[:1]]))}` did not "
                         f"end within {bazel.timeout:g} s (--bazel-timeout); it was ended",
                         bazel.argv("build", args)) from None


def _without(options: Sequence[Option], given: Sequence[str]) -> tuple[Option, ...]:
    """``options`` less the last occurrence of each of ``given`` (ours come last)."""
    from bazel_ldfix.bazel.bep import Option

    out = list(options)
    for word in given:
        name, _, value = word.removeprefix("--").partition("=")
        for at in range(len(out) - 1, -1, -1):
            if out[at] == Option(name, value):
                del out[at]
                break
    return tuple(out)


def with_options(args: Sequence[str], options: Sequence[str]) -> list[str]:
    """Add options before a ``--``, after which Bazel reads only target patterns."""
    if "--" in args:
        at = list(args).index("--")
        return [*args[:at], *options, *args[at:]]
    return [*args, *options]


@dataclass(frozen=True)
class RuleInfo:
    """What the BEP does not say about a test rule: its ``env`` and ``tags`` attributes."""

    env: Mapping[str, str]
    tags: tuple[str, ...]
    env_inherit: tuple[str, ...] = ()   # names whose value comes from the client


@dataclass(frozen=True)
class RulesAnswer:
    """One rule query's answer: the rules, and what Bazel read to make them."""

    rules: Mapping[str, RuleInfo]   # label -> attributes, for the rules that name the variable
    # The labels of the BUILD files of the asked rules' packages and of every .bzl file they
    # load, transitively, with the BUILD files of those files' packages (``buildfiles``).
    build_files: tuple[str, ...]


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


def selected(tests: Sequence[TestTarget], rules: Mapping[str, RuleInfo],
             command_line: Sequence[str]) -> tuple[TestTarget, ...]:
    """The tests that ``bazel test`` will run, under the user's --test_tag_filters and
    --test_size_filters (the build step added a tag filter of its own, last)."""
    tag_filters = [v for v in option_values(command_line, "test_tag_filters")
                   if v != NO_TEST_TAG]
    size_filters = option_values(command_line, "test_size_filters")
    tag_filter = _split_filter(tag_filters[-1] if tag_filters else "")
    size_filter = _split_filter((size_filters[-1] if size_filters else "").lower())
    out = []
    for test in tests:
        info = rules.get(test.label)
        tags = set(test.tags) | (set(info.tags) if info else set())
        if _passes(tag_filter, tags) and _passes(size_filter, {test.size} - {""}):
            out.append(test)
    return tuple(out)


def option_values(command_line: Sequence[str], name: str) -> list[str]:
    """Every value given to ``--name``, as ``--name=V`` or ``--name V``, in order."""
    values = []
    for at, word in enumerate(command_line):
        if word.startswith(f"--{name}="):
            values.append(word.split("=", 1)[1])
        elif word == f"--{name}" and at + 1 < len(command_line):
            values.append(command_line[at + 1])
    return values


def _split_filter(value: str) -> tuple[set[str], set[str]]:
    """``a,-b,+c`` -> ({a, c}, {b})."""
    wanted, unwanted = set(), set()
    for item in filter(None, (v.strip() for v in value.split(","))):
        if item.startswith("-"):
            unwanted.add(item[1:])
        else:
            wanted.add(item.removeprefix("+"))
    return wanted, unwanted


def _passes(rule: tuple[set[str], set[str]], values: set[str]) -> bool:
    """Bazel's filter: none of the excluded values, and one of the wanted ones if any."""
    wanted, unwanted = rule
    return not (unwanted & values) and (not wanted or bool(wanted & values))


def flag_value(options: Sequence[Option], name: str, default: bool) -> bool:
    value = default
    for opt in options:
        if opt.name == name:
            value = opt.value.lower() not in ("0", "false", "no")
        elif opt.name == "no" + name:
            value = False
    return value


def major_version(version: str | None) -> int | None:
    if not version:
        return None
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None

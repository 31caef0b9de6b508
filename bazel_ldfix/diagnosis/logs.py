"""Finding the logs of failed tests, and reading them without trusting their size.

Three ways in. By default, the failed tests of the last Bazel invocation: its console output
is ``<output_base>/command.log`` (every Bazel command rewrites it), whose ``FAIL: //t:x (see
.../test.log)`` lines name each failed run, shard and attempt. When the last command was not
a ``bazel test``, each test's latest result in ``bazel-testlogs`` (judged by its
``test.xml``) stands in for it. ``--bep FILE`` reads the ``testResult`` events of a
``--build_event_json_file``, and ``--log FILE`` takes logs as they are.

Logs are read line by line in fixed-size chunks, each line cut at :data:`MAX_LINE`, so a
1 GiB log costs one chunk of memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from bazel_ldfix.bazel import bep
from bazel_ldfix.bazel.workspace import workspace_of
from bazel_ldfix.diagnosis.runvalues import RanWith
from bazel_ldfix.elf import open_regular
from bazel_ldfix.errors import BadInputError, NotAWorkspaceError
from bazel_ldfix.outputbase import checked

MAX_LINE = 64 * 1024          # longer lines are cut here (a loader message is < 4 KiB)
MAX_BEP_LINE = 64 << 20       # one BEP event; a namedSet of a huge target can be megabytes
_CHUNK = 1 << 16
_SEARCH_CHUNK = 1 << 20
_SNIFF = 8192                 # how much of a log decides "binary"
# Bazel's console, after a test run: one line per failed run, shard or attempt. The event
# is ``testName + " (see " + testLog + ")"`` (TestStrategy.processTestOutput), where the test
# name carries ``(shard 1 of 4)`` or ``(run 2 of 3)`` (TestRunnerAction.getTestName); since
# Bazel 7 (bazelbuild/bazel PR #19841, "Report test exit code") the exit code comes before
# the log: ``FAIL: //t:x (Exit 1) (see .../test.log)``. Any such parenthesised words are
# allowed between the label and ``(see``.
_FAIL_LINE = re.compile(r"^(FAIL|TIMEOUT|FLAKY|INCOMPLETE|NO STATUS|REMOTE FAILURE): "
                        r"(\S+)((?: \([^()]*\))*) \(see (.+)\)\s*$")
_EXECUTED = re.compile(r"^Executed \d+ out of \d+ tests?\b")
# "Executed 2 out of 2 tests: 1 test passes and 1 fails locally." (TestResultNotifier)
_EXECUTED_FAILED = re.compile(r"\bfails?\b|\btimed? ?out\b|\bflaky\b")
# The summary's row of a test that did not pass, and the log paths indented under it:
#   //t:x                                  FAILED in 0.3s
#     /root/.cache/bazel/.../testlogs/t/x/test.log
_SUMMARY_ROW = re.compile(r"^(\S*//\S*)\s+(FAILED|TIMEOUT|FLAKY|INCOMPLETE|NO STATUS|"
                          r"REMOTE FAILURE|FAILED TO BUILD)\b")
_SUMMARY_LOG = re.compile(r"^\s+(/\S+\.log)\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_EXECUTING = re.compile(r"^Executing tests from (\S+)")
_ATTEMPT = re.compile(r"/test_attempts/attempt_\d+\.log$")
_RUN_DIR = re.compile(r"^(?:shard_\d+_of_\d+)?_?(?:run_\d+_of_\d+)?$")
_SANDBOX = re.compile(r"/sandbox/[^/]+/\d+/execroot/")
_OUTPUT_BASE = re.compile(r"^(/.*?)/(?:sandbox/[^/]+/\d+/)?execroot/[^/]+/")
_XML_FAILED = re.compile(rb"""\b(?:failures|errors)\s*=\s*["']\s*[1-9]""")


@dataclass(frozen=True)
class TestLog:
    """One log of one run (or shard, or attempt) of a test."""

    path: str
    label: str | None          # None: the log does not say, and nothing else did
    status: str | None         # Bazel's word (FAILED, TIMEOUT, ...); None: not known


@dataclass(frozen=True)
class LogSet:
    """The logs to diagnose, and what was learnt while finding them."""

    logs: tuple[TestLog, ...]
    source: str                     # where they come from, in words
    output_base: str | None
    passed: int = 0                 # test logs left out because the test passed
    notes: tuple[str, ...] = ()     # warnings: a truncated BEP file, an unreadable log, ...
    ran_with: RanWith | None = None  # the tests' LD_LIBRARY_PATH, when the run's options
                                     # are known (a BEP file); None: not known
    command_log: str | None = None   # the command.log the logs were named by

    @property
    def library_path(self) -> str | None:
        """The LD_LIBRARY_PATH the run's options gave every test, when known."""
        return self.ran_with.default if self.ran_with is not None else None


# -- reading ------------------------------------------------------------------------------

def read_lines(path: str, max_line: int = MAX_LINE) -> Iterator[str]:
    """The lines of ``path`` as text, streamed; a line longer than ``max_line`` is cut there.

    Bytes that are not UTF-8 are replaced, never fatal: a test may print anything.
    """
    pending = bytearray()
    for chunk in _chunks(path, _CHUNK):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if len(pending) < max_line:
                pending += piece[: max_line - len(pending)]
            if end < 0:
                break
            yield pending.decode("utf-8", "replace")
            pending = bytearray()
            start = end + 1
    if pending:
        yield pending.decode("utf-8", "replace")


def _chunks(path: str, size: int) -> Iterator[bytes]:
    """The bytes of ``path``, ``size`` at a time; OS errors as :class:`BadInputError`."""
    # Only a regular file, opened without blocking: a FIFO named test.log is not waited on.
    fh = os.fdopen(open_regular(path), "rb")
    try:
        while True:
            try:
                chunk = fh.read(size)
            except OSError as exc:
                raise BadInputError(f"{path}: {exc.strerror or exc}") from None
            if not chunk:
                return
            yield chunk
    finally:
        fh.close()


def read_matching(path: str, needles: Sequence[bytes], max_line: int = MAX_LINE,
                  chunk_size: int = _SEARCH_CHUNK) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for each line of ``path`` containing one of ``needles``.

    The same lines as :func:`read_lines` (cut at ``max_line``, only that much searched),
    but a line without a needle never becomes a Python string: a 1 GiB log of test output
    is searched at the speed of ``bytes.find``, one chunk at a time.
    """
    number = 0              # lines complete before the current block
    carry = b""             # the start of a line whose end is not read yet
    overlong = False        # carry holds max_line bytes of a longer line
    for chunk in _chunks(path, chunk_size):
        if overlong:
            end = chunk.find(b"\n")
            if end < 0:
                continue    # still inside the long line
            chunk = chunk[end:]
            overlong = False
        block = carry + chunk
        last = block.rfind(b"\n")
        if last < 0:
            carry = block[:max_line]
            overlong = len(block) > max_line
            continue
        carry = block[last + 1:]
        if len(carry) > max_line:
            carry, overlong = carry[:max_line], True
        counted, at = 0, 0      # newlines counted up to offset ``at``
        previous = -1
        for hit, end in _hits(block, last, needles):
            start = block.rfind(b"\n", 0, hit) + 1
            if start == previous or end - start > max_line:
                continue    # the same line again, or past the part of it that is read
            previous = start
            counted += block.count(b"\n", at, start)
            at = start
            stop = block.find(b"\n", start)
            line = block[start:min(stop, start + max_line)]
            yield number + counted + 1, line.decode("utf-8", "replace")
        number += block.count(b"\n", 0, last + 1)
    if carry and any(n in carry for n in needles):
        yield number + 1, carry.decode("utf-8", "replace")


def _hits(block: bytes, end: int, needles: Sequence[bytes]) -> list[tuple[int, int]]:
    """``(start, end)`` of every needle in ``block[:end]``, in order (bytes.find is a fast
    search; an alternation in ``re`` is not)."""
    hits = []
    for needle in needles:
        at = block.find(needle, 0, end)
        while at >= 0:
            hits.append((at, at + len(needle)))
            at = block.find(needle, at + 1, end)
    hits.sort()
    return hits


def check_text(path: str) -> None:
    """Raise :class:`BadInputError` unless ``path`` is a readable file that looks like text."""
    if os.path.isdir(path):
        raise BadInputError(f"{path}: is a directory, not a log")
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            head = fh.read(_SNIFF)
    except OSError as exc:
        raise BadInputError(f"{path}: {exc.strerror or exc}") from None
    if head.startswith(b"\x7fELF") or b"\0" in head:
        raise BadInputError(f"{path}: binary data, not a test log")


def log_label(path: str) -> str | None:
    """The label Bazel's test wrapper writes at the top of every test.log."""
    for number, line in enumerate(read_lines(path, 4096)):
        match = _EXECUTING.match(line)
        if match:
            return match.group(1)
        if number > 8:
            break
    return None


# -- paths Bazel makes --------------------------------------------------------------------

def unsandbox(path: str) -> str:
    """The execroot path behind a sandbox path (which is gone once the test ended).

    ``<ob>/sandbox/linux-sandbox/5/execroot/ws/bazel-out/...`` -> ``<ob>/execroot/ws/...``.
    """
    return _SANDBOX.sub("/execroot/", path, count=1)


def output_base_of(path: str) -> str | None:
    """The output_base a path under ``<ob>/execroot/`` or ``<ob>/sandbox/`` belongs to."""
    match = _OUTPUT_BASE.match(path)
    return match.group(1) if match else None


def executable_for(log: str) -> str | None:
    """The test executable a log under ``<cfg>/testlogs/`` belongs to, if it exists.

    ``testlogs/t/x/test.log``, ``.../shard_1_of_2/test.log``, ``.../run_2_of_3/test.log``
    and ``.../test_attempts/attempt_1.log`` all belong to ``bin/t/x``.
    """
    real = os.path.realpath(log)
    at = real.rfind("/testlogs/")
    if at < 0:
        return None
    rest = real[at + len("/testlogs/"):]
    if _ATTEMPT.search("/" + rest):
        rest = rest[: rest.rfind("/test_attempts/")]
    elif rest.endswith("/test.log"):
        rest = rest[: -len("/test.log")]
        head, _, last = rest.rpartition("/")
        if head and last and _RUN_DIR.match(last):
            rest = head
    else:
        return None
    exe = os.path.join(real[:at], "bin", rest)
    return exe if os.path.isfile(exe) else None


# -- target patterns ----------------------------------------------------------------------

def matches(label: str | None, patterns: Sequence[str], package: str = "") -> bool:
    """Whether ``label`` is selected by Bazel target ``patterns`` (``-`` excludes).

    The forms are Bazel's: ``//p:t``, ``//p`` (= ``//p:p``), ``//p:all``, ``//p:*``,
    ``//p/...``, ``//...``, and relative ones (``:t``, ``p/...``) read from ``package``.
    A log whose label is unknown is selected only when no pattern is given.
    """
    positive = [p for p in patterns if not p.startswith("-")]
    negative = [p[1:] for p in patterns if p.startswith("-")]
    if not patterns:
        return True
    if label is None:
        return False
    name = _normal(label)
    chosen = not positive or any(_pattern_matches(name, p, package) for p in positive)
    return chosen and not any(_pattern_matches(name, p, package) for p in negative)


def _normal(label: str) -> str:
    """``@//p:t`` and ``@@//p:t`` name the main repository, as ``//p:t`` does."""
    if label.startswith("@@"):
        label = label[1:]
    return label[1:] if label.startswith("@//") else label


def _pattern_matches(label: str, pattern: str, package: str) -> bool:
    pattern = _normal(pattern)
    if "//" not in pattern:
        # Relative to the package of the current directory.
        pattern = (f"//{package}{pattern}" if pattern.startswith(":")
                   else f"//{package}/{pattern}" if package else f"//{pattern}")
    repo, _, rest = pattern.partition("//")
    lrepo, _, lrest = label.partition("//")
    if repo != lrepo:
        return False
    lpkg, _, lname = lrest.partition(":")
    if rest == "..." or rest.endswith("/..."):
        top = rest[: -len("...")].rstrip("/")
        return not top or lpkg == top or lpkg.startswith(top + "/")
    pkg, colon, name = rest.partition(":")
    if not colon:
        name = pkg.rsplit("/", 1)[-1]
    if pkg != lpkg:
        return False
    return name in ("all", "*", "all-targets") or name == lname


# -- the last invocation ------------------------------------------------------------------

def from_workspace(cwd: str, output_base: str | None, patterns: Sequence[str],
                   own: Callable[[str], str | None] | None = None) -> LogSet:
    """The failed tests of the last invocation in the workspace around ``cwd``; when it
    ran no test, each test's latest run. ``own(output_base)`` names the command of the
    tool's own that left that ``command.log`` (None: not one of the tool's)."""
    root = workspace_of(cwd)
    testlogs: str | None = None
    if root is not None:
        link = os.path.join(root, "bazel-testlogs")
        if os.path.isdir(link):
            testlogs = os.path.realpath(link)
            output_base = output_base or output_base_of(testlogs + "/")
    elif output_base is None:
        raise NotAWorkspaceError(
            f"{cwd} is not inside a Bazel workspace (no WORKSPACE or MODULE.bazel above it); "
            "pass --bep FILE or --log FILE")
    if output_base is None:
        raise BadInputError(
            f"no bazel-testlogs in {root}: no test has run in this workspace yet (or "
            "--symlink_prefix put it elsewhere); run bazel test, or pass --output-base, "
            "--bep FILE or --log FILE")
    checked(output_base)
    package = package_of(cwd)
    found = from_command_log(output_base, patterns, package)
    if found is not None:
        return found
    testlogs = testlogs or _testlogs_under(output_base)
    if testlogs is None:
        raise BadInputError(f"no test logs under {output_base}: no test has run there yet")
    command = own(output_base) if own is not None else None
    why = (f"the last Bazel command was run by `bazel-ldfix {command}` and ran no test"
           if command else "the last Bazel command ran no test")
    return from_testlogs(testlogs, output_base, patterns, package, why)


def from_command_log(output_base: str, patterns: Sequence[str] = (),
                     package: str = "") -> LogSet | None:
    """The failed runs named by the last command's console output; None if it ran no test.

    The ``FAIL: ... (see LOG)`` lines name the logs, in either of Bazel's forms. When the
    summary says tests failed and no such line was matched (a console form not known here,
    or lines lost), the log paths listed under the summary's rows stand in, and failing
    those, the latest log of each failed test in ``testlogs``: never "nothing to diagnose"
    when Bazel said tests failed.
    """
    path = os.path.join(output_base, "command.log")
    if not os.path.isfile(path):
        return None
    logs: dict[str, TestLog] = {}
    listed: dict[str, TestLog] = {}     # the paths under the summary's rows
    failed_labels: dict[str, None] = {}
    ran_tests = False
    said_failed = False
    understood = False                  # a FAIL line was matched, whatever the patterns
    row: tuple[str, str] | None = None  # the summary row the indented paths belong to
    for raw in read_lines(path):
        line = _ANSI.sub("", raw).rstrip("\r")
        match = _FAIL_LINE.match(line)
        if match:
            ran_tests = said_failed = understood = True
            status, label = match.group(1), match.group(2)
            for log in match.group(4).split():
                if log.endswith(".log") and matches(label, patterns, package):
                    logs.setdefault(log, TestLog(log, label, "FAILED" if status == "FAIL"
                                                 else status))
            continue
        summary = _SUMMARY_ROW.match(line)
        if summary:
            ran_tests = said_failed = True
            row = (summary.group(1), summary.group(2))
            failed_labels.setdefault(row[0], None)
            continue
        listed_log = _SUMMARY_LOG.match(line) if row is not None else None
        if listed_log and row is not None:
            label, status = row
            listed.setdefault(listed_log.group(1), TestLog(listed_log.group(1), label, status))
            continue
        if not line.startswith("  "):
            row = None
        if _EXECUTED.match(line):
            ran_tests = True
            said_failed = said_failed or bool(_EXECUTED_FAILED.search(line))
    if not ran_tests:
        return None
    source = f"the last `bazel test` ({path})"
    fallback: list[str] = []
    if not understood and said_failed:
        if listed:
            logs = {path: log for path, log in listed.items()
                    if matches(log.label, patterns, package)}
            fallback.append(f"no FAIL line of {path} was understood; read the logs its "
                            "summary lists")
        else:
            testlogs = _testlogs_under(output_base)
            if testlogs is not None:
                found = from_testlogs(testlogs, output_base, patterns, package)
                wanted = {_normal(label) for label in failed_labels}
                kept_logs = tuple(log for log in found.logs if not wanted or
                                  (log.label is not None and _normal(log.label) in wanted))
                note = (f"{path} says tests failed but names no log that was understood; "
                        f"read the latest failed log of each test in {testlogs}")
                return LogSet(kept_logs, source, output_base, found.passed,
                              (note, *found.notes), command_log=path)
    # Every log named is kept, even one that is gone or no regular file: its test failed,
    # and the diagnosis says it cannot read it rather than that nothing failed.
    notes = tuple(f"{log.path}: named by {path} but gone (bazel clean?)"
                  for log in logs.values() if not os.path.lexists(log.path))
    return LogSet(tuple(logs.values()), source, output_base, notes=(*fallback, *notes),
                  command_log=path)


def _testlogs_under(output_base: str) -> str | None:
    execroot = os.path.join(output_base, "execroot")
    try:
        for workspace in sorted(os.listdir(execroot)):
            out = os.path.join(execroot, workspace, "bazel-out")
            for config in sorted(os.listdir(out)) if os.path.isdir(out) else ():
                candidate = os.path.join(out, config, "testlogs")
                if os.path.isdir(candidate):
                    return candidate
    except OSError:
        return None
    return None


def from_testlogs(testlogs: str, output_base: str | None, patterns: Sequence[str] = (),
                  package: str = "", why: str = "") -> LogSet:
    """Every test's latest log under a ``testlogs`` directory, failed ones kept."""
    logs: list[TestLog] = []
    passed = 0
    notes: list[str] = []
    for directory, dirs, files in os.walk(testlogs):
        dirs.sort()
        names = sorted(files)
        for name in names:
            if name == "test.log":
                xml = os.path.join(directory, "test.xml")
            elif re.fullmatch(r"attempt_\d+\.log", name) and directory.endswith("/test_attempts"):
                xml = os.path.join(directory, name[: -len(".log")] + ".xml")
            else:
                continue
            path = os.path.join(directory, name)
            status = _xml_status(xml)
            if status == "PASSED":
                passed += 1
                continue
            try:
                check_text(path)
            except BadInputError as exc:
                notes.append(f"skipped {exc}")
                continue
            label = log_label(path)
            if matches(label, patterns, package):
                logs.append(TestLog(path, label, status))
    source = f"the latest run of each test in {testlogs}"
    if why:
        source += f" ({why})"
    return LogSet(tuple(logs), source, output_base, passed, tuple(notes))


def _xml_status(xml: str) -> str | None:
    """FAILED or PASSED from the top of a test.xml (Bazel's, or the test's own JUnit XML)."""
    try:
        with os.fdopen(open_regular(xml), "rb") as fh:
            head = fh.read(4096)
    except (OSError, BadInputError):
        return None
    return "FAILED" if _XML_FAILED.search(head) else "PASSED"


# -- a Build Event Protocol file ----------------------------------------------------------

def from_bep(path: str, patterns: Sequence[str] = (), package: str = "") -> LogSet:
    """The test.log of every run that did not pass, from a ``--build_event_json_file``.

    A last line cut short is a note (Bazel was interrupted, or is still writing); any other
    line that is not a build event means the file is not one.
    """
    if not os.path.isfile(path):
        raise BadInputError(f"{path}: no such file" if not os.path.exists(path)
                            else f"{path}: not a file")
    check_text(path)
    events = bep.read(read_lines(path, MAX_BEP_LINE))
    notes: list[str] = []
    for skipped in events.skipped:
        if skipped is events.cut_short:
            if events.events == 0:
                raise BadInputError(f"{path}: not JSON ({skipped.detail} on line "
                                    f"{skipped.line}): not a --build_event_json_file")
            notes.append(f"{path} ends in the middle of an event (line {skipped.line}): "
                         "Bazel was interrupted, or is still writing it; read what is there")
        elif skipped.problem is bep.Problem.NOT_JSON:
            raise BadInputError(f"{path}: line {skipped.line} is not JSON ({skipped.detail}): "
                                "not a --build_event_json_file")
        else:
            raise BadInputError(f"{path}: line {skipped.line} is not a build event "
                                f"({skipped.problem.value}): not a --build_event_json_file")
    if events.events == 0:
        raise BadInputError(f"{path}: empty, not a --build_event_json_file")
    if events.misshaped_from is not None:
        notes.append(f"{path}: fields of an unexpected type ignored, from line "
                     f"{events.misshaped_from} on (not written by Bazel?)")
    logs: dict[str, TestLog] = {}
    ends: dict[str, float] = {}
    passed = 0
    for result in events.test_results:
        for file in result.logs:
            # A log named otherwise than by a file:// URI is nowhere here: kept by its URI,
            # for the note that it is gone.
            where = bep.file_path(file, None) or file.uri
            if result.status == "PASSED":
                passed += 1
            elif matches(result.label, patterns, package):
                logs.setdefault(where, TestLog(where, result.label, result.status))
                if result.ended is not None:
                    ends[where] = result.ended
    _, library_path = bep.test_env(events.options, "LD_LIBRARY_PATH")
    kept = []
    for log in logs.values():
        kept.append(log)    # even one gone, or no regular file: its test failed
        if not os.path.lexists(log.path):
            notes.append(f"{log.path}: named by {path} but gone (another machine, or "
                         "bazel clean?)")
            continue
        if log.path in ends and os.path.isfile(log.path) and \
                os.path.getmtime(log.path) > ends[log.path] + _SLACK:
            notes.append(f"{log.path} was rewritten after the run {path} records (a later "
                         "run of the test?): what it says may be newer than that run")
    output_base = events.output_base or next(
        (ob for ob in (output_base_of(log.path) for log in kept) if ob), None)
    ran_with = RanWith(f"the options in {path} (rc files included)", {}, library_path)
    return LogSet(tuple(kept), f"the test results in {path}", output_base, passed,
                  tuple(notes), ran_with)


_SLACK = 60.0   # seconds between a test's end and its log's last write, at most


# -- logs given by name -------------------------------------------------------------------

def given(paths: Iterable[str], patterns: Sequence[str] = (), package: str = "") -> LogSet:
    """Logs named on the command line; each must exist and be text.

    A log that does not name its test is kept whatever the patterns: it was asked for.
    """
    logs = []
    for path in paths:
        if not os.path.exists(path):
            raise BadInputError(f"{path}: no such file")
        check_text(path)
        label = log_label(path)
        if label is None or matches(label, patterns, package):
            logs.append(TestLog(os.path.abspath(path), label, None))
    output_base = next((ob for ob in (output_base_of(os.path.realpath(log.path))
                                      for log in logs) if ob), None)
    return LogSet(tuple(logs), "the logs given", output_base)


# -- the command's choice -----------------------------------------------------------------

def find(cwd: str, *, bep: str | None = None, log_files: Sequence[str] = (),
         output_base: str | None = None, patterns: Sequence[str] = (),
         own: Callable[[str], str | None] | None = None) -> LogSet:
    """The logs ``bazel-ldfix diagnose`` reads: ``--bep``, ``--log``, else the workspace's.

    Relative target patterns are read from the package of ``cwd``; ``output_base``, when
    given, overrides the one the logs imply.
    """
    if bep and log_files:
        raise BadInputError("--bep and --log exclude each other")
    package = package_of(cwd)
    if bep:
        found = from_bep(bep, patterns, package)
    elif log_files:
        found = given(log_files, patterns, package)
    else:
        return from_workspace(cwd, output_base, patterns, own)
    if output_base is not None:
        found = replace(found, output_base=checked(output_base))
    return found


def package_of(cwd: str) -> str:
    """The package path of ``cwd`` in its workspace (``""`` at the root or outside one)."""
    root = workspace_of(cwd)
    if root is None:
        return ""
    package = os.path.relpath(os.path.abspath(cwd), root).replace(os.sep, "/")
    return "" if package == "." else package

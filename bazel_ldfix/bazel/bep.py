"""The Build Event Protocol, as a ``--build_event_json_file`` writes it: one JSON event a line.

:func:`read` turns the lines into one :class:`EventFile` of frozen records: the targets
configured (kind, size, tags), the outputs of targets completed (named sets of files
expanded), the test results (status, logs, timing), the canonical and the as-given command
lines, the started event (version, workspace, the fields it sets) and the workspace info
(exec root). Field names and types follow Bazel's schema (src/main/java/com/google/devtools/
build/lib/buildeventstream/proto/build_event_stream.proto).

The reader is lenient and never raises on content: a line that is not JSON, or not an
event (nested deeper than the JSON reader goes, an integer of 100,000 digits), is recorded
in :attr:`EventFile.skipped` for the caller to judge (a last line cut short is what an
interrupted Bazel leaves); fields of another type than the schema's, nested deeper than
any event or holding a NUL, are dropped (:mod:`bepschema`) and the first line that had one
is remembered.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from bazel_ldfix.bazel import bepschema


@dataclass(frozen=True)
class Option:
    """One option of a command line, as the ``structuredCommandLine`` event gives it."""

    name: str
    value: str


@dataclass(frozen=True)
class File:
    """A ``File`` message: where an output or a log is."""

    uri: str
    name: str = ""
    # None when absent (then only a file:// URI places the file).
    path_prefix: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Started:
    version: str | None         # buildToolVersion
    workspace: str | None       # workspaceDirectory
    # The names of the fields the event sets (JSON leaves out an empty one). Which ones a
    # Bazel sets tells its age where it has no version (:mod:`bazel_ldfix.bazel.version`).
    fields: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ConfiguredTarget:
    label: str
    kind: str                   # "cc_test rule", ...
    size: str                   # testSize as written ("SMALL", ...); "" for no test
    tags: tuple[str, ...]

    @property
    def is_test(self) -> bool:
        return bool(self.size) or self.kind.endswith("_test rule")


@dataclass(frozen=True)
class CompletedTarget:
    label: str
    success: bool
    # The important outputs, then the files of the "default" output group, its named sets
    # expanded (each set once), in the order the events give them.
    outputs: tuple[File, ...]


@dataclass(frozen=True)
class TestResult:
    label: str | None
    status: str                 # PASSED, FAILED, ...; NO_STATUS when the event has none
    outputs: tuple[File, ...]   # testActionOutput: test.log, test.xml, ...
    start_millis: str | None    # testAttemptStartMillisEpoch (int64, a string in JSON)
    duration_millis: str | None

    @property
    def logs(self) -> tuple[File, ...]:
        return tuple(file for file in self.outputs if file.name == "test.log")

    @property
    def ended(self) -> float | None:
        """When the attempt ended, in seconds since the epoch; None when not said."""
        if self.start_millis is None:
            return None
        try:
            return (int(self.start_millis) + int(self.duration_millis or 0)) / 1000
        except ValueError:
            return None


class Problem(enum.Enum):
    NOT_JSON = "not JSON"
    NO_ID = "no \"id\""                         # JSON, but not an object with an "id"
    ID_NOT_OBJECT = "its \"id\" is not an object"
    # JSON no build event is: nested deeper than the reader goes, or an integer of more
    # digits than Python converts (sys.get_int_max_str_digits, 4,300).
    BEYOND = "nested deeper, or a number longer, than any build event's"


@dataclass(frozen=True)
class Skipped:
    """A line that gave no event."""

    line: int                   # 1-based
    problem: Problem
    detail: str = ""            # the JSON parser's message, for NOT_JSON


@dataclass(frozen=True)
class EventFile:
    """Everything read from one file of build events."""

    events: int                 # events read
    started: Started | None = None
    patterns: tuple[str, ...] = ()      # the target patterns (the first pattern event)
    exec_root: str | None = None        # workspaceInfo.localExecRoot: OUTPUT_BASE/execroot/NAME
    options: tuple[Option, ...] = ()    # the canonical command's options, rc files included
    # rc-file and explicit options as given (optionsParsed.cmdLine): the canonical list keeps
    # only the last value of a single-valued option, which hides the user's test filters.
    command_line: tuple[str, ...] = ()
    configured: tuple[ConfiguredTarget, ...] = ()
    completed: tuple[CompletedTarget, ...] = ()
    test_results: tuple[TestResult, ...] = ()
    exit_code: int | None = None
    skipped: tuple[Skipped, ...] = ()   # in line order
    last_line: int = 0                  # the number of the last line that is not blank
    misshaped_from: int | None = None   # the first event with a field of the wrong type
    # Bazel marks its last event (BuildEvent.last_message); a file without it was cut short,
    # even at a line boundary, where no line is broken.
    complete: bool = False

    @property
    def output_base(self) -> str | None:
        return output_base_of_exec_root(self.exec_root)

    @property
    def cut_short(self) -> Skipped | None:
        """The last line, when it is not JSON: Bazel was interrupted, or is still writing."""
        if self.skipped and self.skipped[-1].problem is Problem.NOT_JSON \
                and self.skipped[-1].line == self.last_line:
            return self.skipped[-1]
        return None


def output_base_of_exec_root(exec_root: str | None) -> str | None:
    """``OUTPUT_BASE`` of ``OUTPUT_BASE/execroot/NAME``."""
    return os.path.dirname(os.path.dirname(exec_root)) if exec_root else None


# A file URI of a path alone: no host, query, fragment, parameters, brackets or the
# characters urlparse drops or splits on.
_PLAIN_FILE_URI = re.compile(r"file:///[^?#;\[\]\t\r\n]*\Z")


def file_path(file: File, exec_root: str | None) -> str | None:
    """Where a :class:`File` is on this machine.

    A ``file://`` URI says it. Any other (``bytestream://`` when a remote cache holds the
    file; with ``--remote_build_event_upload=minimal``, Bazel 7's default, every output is
    named so, downloaded or not) leaves the exec root's ``path_prefix`` + ``name``
    (build_event_stream.proto, message File: "A sequence of prefixes to apply to the file
    name to construct a full path": ``bazel-out``, the configuration, ``bin``).
    """
    if _PLAIN_FILE_URI.match(file.uri):
        return unquote(file.uri[len("file://"):])     # what urlparse gives, without its cost
    try:
        parsed = urlparse(file.uri)
    except ValueError:      # a host in brackets that is no address: no place at all
        return None
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if exec_root is None or not file.name or file.path_prefix is None:
        return None
    parts = [*file.path_prefix, file.name]
    if any(p.startswith("/") or ".." in p.split("/") for p in parts):
        return None     # not a path inside the exec root
    return os.path.join(exec_root, *parts)


def test_env(options: Sequence[Option], variable: str) -> tuple[bool, str | None]:
    """The last ``--test_env`` for ``variable``: (given, value); value None = inherit."""
    given, value = False, None
    for opt in options:
        if opt.name == "test_env":
            name, eq, val = opt.value.partition("=")
            if name == variable:
                given, value = True, (val if eq else None)
    return given, value


def read(lines: Iterable[str]) -> EventFile:
    """Read the lines of a ``--build_event_json_file``; never raises on what they say."""
    reader = Reader()
    for number, line in enumerate(lines, 1):
        reader.line(number, line)
    return reader.result()


class Reader:
    """:func:`read`, a line at a time: for a file read while Bazel writes it."""

    def __init__(self) -> None:
        self.events = 0
        self.last_line = 0
        self.skipped: list[Skipped] = []
        self.misshaped: int | None = None
        self.started: Started | None = None
        self.patterns: tuple[str, ...] = ()
        self.exec_root: str | None = None
        self.options: list[Option] = []
        self.command_line: tuple[str, ...] = ()
        self.configured: list[ConfiguredTarget] = []
        # label, success, important outputs, ids of the default group's named sets
        self.completed: list[tuple[str, bool, list[File], list[str]]] = []
        self.sets: dict[str, tuple[list[File], list[str]]] = {}
        self.results: list[TestResult] = []
        self.exit_code: int | None = None
        self.complete = False

    def line(self, number: int, line: str) -> None:
        if not line.strip():
            return
        self.last_line = number
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            self.skipped.append(Skipped(number, Problem.NOT_JSON, exc.msg))
            return
        except (RecursionError, ValueError):
            self.skipped.append(Skipped(number, Problem.BEYOND))
            return
        if not isinstance(raw, dict) or "id" not in raw:
            self.skipped.append(Skipped(number, Problem.NO_ID))
            return
        event, changed = bepschema.sanitize(raw)
        if event is None:
            self.skipped.append(Skipped(number, Problem.ID_NOT_OBJECT))
            return
        if changed and self.misshaped is None:
            self.misshaped = number
        self.events += 1
        self.event(event)

    def event(self, event: dict[str, Any]) -> None:
        ident = event["id"]
        if "started" in event:
            started = event["started"]
            self.started = Started(started.get("buildToolVersion") or None,
                                   started.get("workspaceDirectory") or None,
                                   frozenset(k for k, v in started.items()
                                             if v not in (None, "")))
        pattern = ident.get("pattern")
        if isinstance(pattern, dict) and not self.patterns:
            words = pattern.get("pattern", [])
            self.patterns = tuple(str(p) for p in words) if isinstance(words, list) else ()
        if "workspaceInfo" in event:
            self.exec_root = event["workspaceInfo"].get("localExecRoot") or self.exec_root
        if "targetConfigured" in ident and "configured" in event:
            done = event["configured"]
            self.configured.append(ConfiguredTarget(
                ident["targetConfigured"]["label"], done.get("targetKind", ""),
                done.get("testSize", ""), tuple(done.get("tag", []))))
        if "targetCompleted" in ident and "completed" in event:
            done = event["completed"]
            sets = [s["id"] for group in done.get("outputGroup", [])
                    if group.get("name") == "default" for s in group.get("fileSets", [])]
            self.completed.append((ident["targetCompleted"]["label"], bool(done.get("success")),
                                   _files(done.get("importantOutput", [])), sets))
        if "namedSet" in ident and "namedSetOfFiles" in event:
            named = event["namedSetOfFiles"]
            self.sets[ident["namedSet"]["id"]] = (
                _files(named.get("files", [])), [s["id"] for s in named.get("fileSets", [])])
        if ident.get("structuredCommandLine", {}).get("commandLineLabel") == "canonical":
            for section in event.get("structuredCommandLine", {}).get("sections", []):
                if section.get("sectionLabel") == "command options":
                    for opt in section.get("optionList", {}).get("option", []):
                        self.options.append(Option(opt.get("optionName", ""),
                                                   opt.get("optionValue", "")))
        if "optionsParsed" in event:
            self.command_line = tuple(event["optionsParsed"].get("cmdLine", []))
        if event.get("lastMessage") is True:
            self.complete = True
        if "buildFinished" in ident and "finished" in event:
            # Bazel leaves a zero code out (proto3): {"exitCode": {"name": "SUCCESS"}}.
            self.exit_code = event["finished"].get("exitCode", {}).get("code", 0)
        if "testResult" in ident and "testResult" in event:
            result = event["testResult"]
            self.results.append(TestResult(
                ident["testResult"].get("label"), result.get("status", "NO_STATUS"),
                tuple(_files(result.get("testActionOutput", []))),
                result.get("testAttemptStartMillisEpoch"),
                result.get("testAttemptDurationMillis")))

    def configured_since(self, start: int) -> Sequence[ConfiguredTarget]:
        """The targets configured from the ``start``-th on (0-based), as read so far."""
        return self.configured[start:]

    def completed_since(self, start: int) -> list[CompletedTarget]:
        """The targets completed from the ``start``-th on (0-based), as read so far, with
        the named sets announced so far (Bazel announces a set before naming it)."""
        return [CompletedTarget(label, success, (*files, *_expand(sets, self.sets)))
                for label, success, files, sets in self.completed[start:]]

    def result(self) -> EventFile:
        completed = tuple(CompletedTarget(label, success, (*files, *_expand(sets, self.sets)))
                          for label, success, files, sets in self.completed)
        return EventFile(
            self.events, self.started, self.patterns, self.exec_root,
            tuple(self.options), self.command_line, tuple(self.configured), completed,
            tuple(self.results), self.exit_code, tuple(self.skipped), self.last_line,
            self.misshaped, self.complete)


def _file(obj: Mapping[str, Any]) -> File:
    prefix = obj.get("pathPrefix")
    return File(obj.get("uri", ""), obj.get("name", ""),
                None if prefix is None else tuple(prefix))


def _files(objs: Sequence[Mapping[str, Any]]) -> list[File]:
    return [_file(f) for f in objs if "uri" in f]


def _expand(ids: Sequence[str], sets: Mapping[str, tuple[list[File], list[str]]]) -> list[File]:
    """The files of the named sets ``ids``, breadth first, each set once."""
    out: list[File] = []
    pending = list(ids)
    seen: set[str] = set()
    while pending:
        key = pending.pop(0)
        if key in seen or key not in sets:
            continue
        seen.add(key)
        files, children = sets[key]
        out += files
        pending += children
    return out

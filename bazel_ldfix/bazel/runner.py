"""Running Bazel, and reading what it says about the tests it would run.

The test executables come from the Build Event Protocol of one ``bazel test`` step that
builds everything the user's command builds but runs no test (a test tag filter that no
test matches). That works from Bazel 4 to 8, builds with exactly the user's options and rc
files (so the real ``bazel test`` that follows reuses every output), and its
``structuredCommandLine`` event carries the canonical command line, with the options that
came from rc files, which decides the environment the tests get.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any
from urllib.parse import unquote, urlparse

from bazel_ldfix.bazel import bepshape
from bazel_ldfix.errors import BazelError, BazelNotFoundError, NotAWorkspaceError

NO_TEST_TAG = "bazel-ldfix-builds-but-runs-no-test"
WAIT_NOTICE = 1.0  # seconds a captured Bazel command runs before the user is told
NO_TESTS_FOUND = 4  # Bazel's exit code when the build worked and no test was selected
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

    def argv(self, command: str, args: Sequence[str]) -> list[str]:
        return [self.executable, *self.startup, command, *args]

    def capture(self, command: str, args: Sequence[str]) -> str:
        """Run a query-like command; its stdout, or BazelError with its stderr."""
        cmd = self.argv(command, args)
        proc = self._run(cmd, capture=True)
        if proc.returncode != 0:
            raise _failure(cmd, proc.returncode, proc.stderr)
        return proc.stdout

    def stream(self, command: str, args: Sequence[str], *,
               hide: Sequence[str] = ()) -> int:
        """Run with Bazel's output going to ours as it comes; its exit code.

        With ``hide``, Bazel's stdout and stderr both go to our stderr, line by line,
        except lines containing one of those strings. SIGINT and SIGTERM sent to this
        process are passed on to Bazel (which then stops cleanly); from a terminal,
        Ctrl-C reaches both of us anyway.
        """
        cmd = self.argv(command, args)
        child: subprocess.Popen[bytes] | None = None
        pending: list[int] = []

        def forward(signum: int, _frame: FrameType | None) -> None:
            if child is None:
                pending.append(signum)  # not started yet: passed on once it is
            else:
                child.send_signal(signum)

        # Installed before Bazel starts: a signal in between would otherwise stop us and
        # leave Bazel running.
        old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                child = subprocess.Popen(cmd, cwd=self.cwd, env=dict(self.env),
                                         stdout=subprocess.PIPE if hide else None,
                                         stderr=subprocess.STDOUT if hide else None)
            except OSError as exc:
                raise BazelNotFoundError(f"cannot run {self.executable}: {exc.strerror}",
                                         cmd) from None
            for signum in pending:
                child.send_signal(signum)
            if child.stdout is not None:
                for raw in child.stdout:
                    if not any(h.encode() in raw for h in hide):
                        sys.stderr.buffer.write(raw)
                        sys.stderr.buffer.flush()
            code = child.wait()
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
        if code < 0:
            # Killed by a signal: say so, and exit as a shell would (128 + N), not with
            # the byte Python would make of -N.
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            sys.stderr.write(f"bazel-ldfix: {self.executable} was killed by {name} "
                             f"(exit code {128 - code})\n")
            return 128 - code
        return code

    def _run(self, cmd: list[str], *, capture: bool) -> subprocess.CompletedProcess[str]:
        pipe = subprocess.PIPE if capture else None
        try:
            child = subprocess.Popen(cmd, cwd=self.cwd, env=dict(self.env), text=True,
                                     stdout=pipe, stderr=pipe)
        except OSError as exc:
            raise BazelNotFoundError(f"cannot run {self.executable}: {exc.strerror}",
                                     cmd) from None
        with child:
            try:
                out, err = child.communicate(timeout=WAIT_NOTICE if self.waiting else None)
            except subprocess.TimeoutExpired:
                if self.waiting is not None:
                    self.waiting(cmd)
                out, err = child.communicate()
            except BaseException:
                child.kill()
                raise
        return subprocess.CompletedProcess(cmd, child.returncode, out, err)


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
    """``bazel info output_base`` (depends on startup options only)."""
    value = bazel.capture("info", ["output_base"]).strip()
    if not value:
        raise BazelError("`bazel info output_base` printed nothing",
                         bazel.argv("info", ["output_base"]))
    return value


@dataclass(frozen=True)
class Option:
    name: str
    value: str


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

    @property
    def output_base(self) -> str | None:
        return os.path.dirname(os.path.dirname(self.exec_root)) if self.exec_root else None


def parse_bep(lines: Iterable[str]) -> BuildEvents:
    """Read a ``--build_event_json_file``: test targets, their executables, the options."""
    kinds: dict[str, str] = {}
    is_test: set[str] = set()
    sizes: dict[str, str] = {}
    tags: dict[str, tuple[str, ...]] = {}
    outputs: dict[str, list[Any]] = {}
    sets: dict[str, tuple[list[Any], list[str]]] = {}
    options: list[Option] = []
    version = workspace = None
    exit_code = None
    command_line: tuple[str, ...] = ()
    exec_root = None
    patterns: tuple[str, ...] = ()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a truncated last line when Bazel was interrupted
        # Fields of another type than Bazel's schema gives them are dropped, and a line
        # that is no event at all is skipped: never a traceback.
        event, _changed = bepshape.sanitize(event)
        if event is None:
            continue
        ident = event["id"]
        if "started" in event:
            version = event["started"].get("buildToolVersion") or None
            workspace = event["started"].get("workspaceDirectory") or None
        if "pattern" in ident and not patterns:
            patterns = tuple(str(p) for p in ident["pattern"].get("pattern", []))
        if "workspaceInfo" in event:
            exec_root = event["workspaceInfo"].get("localExecRoot") or None
        if "targetConfigured" in ident and "configured" in event:
            label = ident["targetConfigured"]["label"]
            kinds[label] = event["configured"].get("targetKind", "")
            if event["configured"].get("testSize") or kinds[label].endswith("_test rule"):
                is_test.add(label)
                sizes[label] = str(event["configured"].get("testSize", "")).lower()
                tags[label] = tuple(str(t) for t in event["configured"].get("tag", []))
        if "targetCompleted" in ident and "completed" in event:
            label = ident["targetCompleted"]["label"]
            done = event["completed"]
            if done.get("success"):
                files: list[Any] = [f for f in done.get("importantOutput", []) if "uri" in f]
                for group in done.get("outputGroup", []):
                    if group.get("name") == "default":
                        files += [f"set:{s['id']}" for s in group.get("fileSets", [])]
                outputs[label] = files
        if "namedSet" in ident and "namedSetOfFiles" in event:
            named = event["namedSetOfFiles"]
            sets[ident["namedSet"]["id"]] = (
                [f for f in named.get("files", []) if "uri" in f],
                [s["id"] for s in named.get("fileSets", [])])
        if ident.get("structuredCommandLine", {}).get("commandLineLabel") == "canonical":
            for section in event["structuredCommandLine"].get("sections", []):
                if section.get("sectionLabel") == "command options":
                    for opt in section.get("optionList", {}).get("option", []):
                        options.append(Option(opt.get("optionName", ""),
                                              opt.get("optionValue", "")))
        if "optionsParsed" in event:
            command_line = tuple(event["optionsParsed"].get("cmdLine", []))
        if "buildFinished" in event:
            exit_code = event["buildFinished"].get("exitCode", {}).get("code", 0)

    tests = []
    for label in sorted(is_test):
        files = _expand(outputs.get(label, []), sets, exec_root)
        executable = _executable(label, files)
        if executable:
            tests.append(TestTarget(label, executable, sizes.get(label, ""),
                                    tags.get(label, ())))
    return BuildEvents(tuple(tests), tuple(options), version, workspace, exit_code,
                       command_line, exec_root, patterns)


def _expand(files: list[Any], sets: Mapping[str, tuple[list[Any], list[str]]],
            exec_root: str | None) -> list[str]:
    out: list[str] = []
    pending = list(files)
    seen: set[str] = set()
    while pending:
        item = pending.pop(0)
        if not isinstance(item, str):
            path = file_path(item, exec_root)
            if path is not None:
                out.append(path)
            continue
        key = item[4:]
        if key in seen or key not in sets:
            continue
        seen.add(key)
        named, children = sets[key]
        pending += named + [f"set:{c}" for c in children]
    return list(dict.fromkeys(out))


def file_path(file: Mapping[str, Any], exec_root: str | None) -> str | None:
    """Where a BEP ``File`` is on this machine.

    A ``file://`` URI says it. Any other (``bytestream://`` when a remote cache holds the
    file; with ``--remote_build_event_upload=minimal``, Bazel 7's default, every output is
    named so, downloaded or not) leaves the exec root's ``path_prefix`` + ``name``
    (build_event_stream.proto, message File: "A sequence of prefixes to apply to the file
    name to construct a full path": ``bazel-out``, the configuration, ``bin``).
    """
    uri = str(file.get("uri", ""))
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    name = file.get("name")
    prefix = file.get("pathPrefix")
    if exec_root is None or not isinstance(name, str) or not name \
            or not isinstance(prefix, list) or not all(isinstance(p, str) for p in prefix):
        return None
    parts = [*prefix, name]
    if any(p.startswith("/") or ".." in p.split("/") for p in parts):
        return None     # not a path inside the exec root
    return os.path.join(exec_root, *parts)


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
    with tempfile.TemporaryDirectory(prefix="bazel-ldfix-") as tmp:
        bep = os.path.join(tmp, "events.json")
        own = [f"--build_event_json_file={bep}", f"--test_tag_filters={NO_TEST_TAG}",
               "--nobuild_tests_only", *expected]
        code = bazel.stream("test", with_options(args, own), hide=_BUILD_STEP_NOISE)
        try:
            with open(bep, encoding="utf-8", errors="replace") as fh:
                events = parse_bep(fh)
        except FileNotFoundError:
            events = BuildEvents((), (), None, None, None)
    if expected:
        events = dataclasses.replace(events, options=_without(events.options, expected))
    return events, code


def download_outputs(bazel: Bazel, args: Sequence[str], expected: Sequence[str] = ()) -> int:
    """``bazel build ARGS --remote_download_outputs=toplevel``: the top-level outputs of the
    targets ``bazel test ARGS`` builds, with their runfiles, on disk; Bazel's exit code.

    In a `build` command, ``toplevel`` downloads every top-level target's important outputs
    and runfiles (bazelbuild/bazel ``src/main/java/com/google/devtools/build/lib/remote/
    RemoteOutputChecker.java``, ``shouldAddTopLevelTarget``: ``default -> outputsMode !=
    MINIMAL``; ``addRunfiles``), where a `test` command leaves test executables remote.
    ``--remote_download_outputs`` is not a build option, so the analysis cache stays.
    """
    own = ["--remote_download_outputs=toplevel", *expected]
    return bazel.stream("build", with_options(args, own), hide=_BUILD_STEP_NOISE)


def _without(options: Sequence[Option], given: Sequence[str]) -> tuple[Option, ...]:
    """``options`` less the last occurrence of each of ``given`` (ours come last)."""
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


def rule_info(bazel: Bazel, labels: Sequence[str], variable: str) -> dict[str, RuleInfo]:
    """``env`` and ``tags`` of the rules among ``labels`` whose ``env`` mentions
    ``variable`` (``bazel query --output=xml 'attr(env, VARIABLE, ...)'``): a rule left out
    does not set it. Only those rules are printed, so the answer stays small."""
    if not labels:
        return {}
    return aligned(parse_rules(bazel.capture("query", ["--output=xml",
                                                      _env_query(labels, variable)])), labels)


class PendingRules:
    """:func:`rule_info` started in the background (Bazel works while we do)."""

    def __init__(self, bazel: Bazel, labels: Sequence[str], variable: str) -> None:
        self.labels = tuple(labels)
        self.cmd = bazel.argv("query", ["--output=xml", _env_query(labels, variable)])
        try:
            self.proc: subprocess.Popen[str] | None = subprocess.Popen(
                self.cmd, cwd=bazel.cwd, env=dict(bazel.env), text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise BazelNotFoundError(f"cannot run {bazel.executable}: {exc.strerror}",
                                     self.cmd) from None

    def result(self) -> dict[str, RuleInfo]:
        assert self.proc is not None
        out, err = self.proc.communicate()
        code, self.proc = self.proc.returncode, None
        if code != 0:
            raise _failure(self.cmd, code, err)
        return aligned(parse_rules(out), self.labels)

    def close(self) -> None:
        """Wait for the query if its answer is not wanted: the next command would anyway."""
        if self.proc is not None:
            self.proc.communicate()
            self.proc = None


def start_rule_info(bazel: Bazel, labels: Sequence[str], variable: str) -> PendingRules:
    return PendingRules(bazel, labels, variable)


def _env_query(labels: Sequence[str], variable: str) -> str:
    """The rules among ``labels`` whose ``env`` or ``env_inherit`` mentions ``variable``
    (``attr`` matches a dict or list by its printed form; a rule without the attribute is
    simply not matched)."""
    return (f'let tests = {" + ".join(labels)} in '
            f'attr(env, "{variable}", $tests) + attr(env_inherit, "{variable}", $tests)')


def aligned(rules: Mapping[str, RuleInfo], labels: Sequence[str]) -> dict[str, RuleInfo]:
    """``rules`` keyed by the build events' labels.

    For a test inside another repository the two may write the repository differently
    (``@@nvsdk+//t:x`` in the events, ``@nvsdk//t:x`` from query, or the reverse): a label
    not found as it is takes the one rule with the same package and name, if only one has.
    """
    out = dict(rules)
    for label in labels:
        if label in out or "//" not in label:
            continue
        rest = label.split("//", 1)[1]
        same = [key for key in rules if "//" in key and key.split("//", 1)[1] == rest]
        if len(same) == 1:
            out[label] = rules[same[0]]
    return out


def parse_rules(xml: str) -> dict[str, RuleInfo]:
    out: dict[str, RuleInfo] = {}
    root = ET.fromstring(xml)
    for rule in root.iter("rule"):
        env: dict[str, str] = {}
        tags: list[str] = []
        inherit: list[str] = []
        for node in rule:
            if node.get("name") == "env":
                for pair in node.iter("pair"):
                    strings = [s.get("value", "") for s in pair.iter("string")]
                    if len(strings) == 2:
                        env[strings[0]] = strings[1]
            elif node.tag == "list" and node.get("name") == "tags":
                tags += [s.get("value", "") for s in node.iter("string")]
            elif node.tag == "list" and node.get("name") == "env_inherit":
                inherit += [s.get("value", "") for s in node.iter("string")]
        out[rule.get("name", "")] = RuleInfo(env, tuple(tags), tuple(inherit))
    return out


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


def test_env_setting(options: Sequence[Option], variable: str) -> tuple[bool, str | None]:
    """The last ``--test_env`` for ``variable``: (given, value); value None = inherit."""
    given, value = False, None
    for opt in options:
        if opt.name == "test_env":
            name, eq, val = opt.value.partition("=")
            if name == variable:
                given, value = True, (val if eq else None)
    return given, value


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

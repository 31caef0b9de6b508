"""The Build Event Protocol reader on recorded event files, no Bazel needed.

``recorded/bazel-4.2.3-test.json`` is what Bazel 4.2.3 wrote for ``bazel test //t:all
--build_event_json_file=... --test_env=LD_LIBRARY_PATH=/x/lib`` in a workspace ``cap`` with
two cc_tests (``ok_test``: size small, tag unit, returns 0; ``bad_test``: returns 3), with the
event kinds no reader uses left out, the command lines shortened, and the output_base
renamed ``/OB`` and the workspace ``/ws``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix.bazel import bep
from bazel_ldfix.bazel.targets import TestTarget as Target
from bazel_ldfix.bazel.targets import parse_bep
from bazel_ldfix.bazel.version import BazelVersion
from bazel_ldfix.diagnosis import logs
from bazel_ldfix.errors import BadInputError

RECORDED = Path(__file__).parents[1] / "support/recorded/bazel-4.2.3-test.json"
LINES = RECORDED.read_text().splitlines()
BIN = "/OB/execroot/cap/bazel-out/k8-fastbuild/bin"
TESTLOGS = "/OB/execroot/cap/bazel-out/k8-fastbuild/testlogs"


def test_the_recorded_file_read_whole() -> None:
    events = bep.read(LINES)
    assert events.events == len(LINES) and events.skipped == ()
    assert events.cut_short is None and events.misshaped_from is None
    # Debian's Bazel has no build label (`bazel --version`: "bazel no_version"), and JSON
    # leaves out an empty buildToolVersion. Its start time is in milliseconds alone.
    assert events.started == bep.Started(None, "/ws", frozenset({
        "uuid", "startTimeMillis", "optionsDescription", "command", "workingDirectory",
        "workspaceDirectory", "serverPid"}))
    assert events.patterns == ("//t:all",)
    assert events.exec_root == "/OB/execroot/cap" and events.output_base == "/OB"
    # Only the canonical command line's "command options", in their order.
    assert events.options == (bep.Option("sandbox_debug", "1"),
                              bep.Option("build_event_json_file", "/tmp/events.json"),
                              bep.Option("test_env", "LD_LIBRARY_PATH=/x/lib"))
    assert bep.test_env(events.options, "LD_LIBRARY_PATH") == (True, "/x/lib")
    assert bep.test_env(events.options, "PATH") == (False, None)
    assert events.command_line[-1] == "--test_env=LD_LIBRARY_PATH=/x/lib"
    assert events.configured == (
        bep.ConfiguredTarget("//t:bad_test", "cc_test rule", "MEDIUM", ()),
        bep.ConfiguredTarget("//t:ok_test", "cc_test rule", "SMALL", ("unit",)))
    assert all(target.is_test for target in events.configured)
    exe = bep.File(f"file://{BIN}/t/ok_test", "t/ok_test", ("bazel-out", "k8-fastbuild", "bin"))
    (ok,) = (done for done in events.completed if done.label == "//t:ok_test")
    # The important output, then the default output group's named set: the same file twice.
    assert ok.success and ok.outputs == (exe, exe)
    bad, good = events.test_results
    assert (bad.label, bad.status, good.label, good.status) == (
        "//t:bad_test", "FAILED", "//t:ok_test", "PASSED")
    assert bad.logs == (bep.File(f"file://{TESTLOGS}/t/bad_test/test.log", "test.log"),)
    assert [file.name for file in bad.outputs] == ["test.log", "test.xml"]
    assert bad.ended == (1796050867064 + 83) / 1000


def test_the_repair_reads_tests_and_executables_from_it() -> None:
    events = parse_bep(LINES)
    assert events.tests == (
        Target("//t:bad_test", f"{BIN}/t/bad_test", "medium", ()),
        Target("//t:ok_test", f"{BIN}/t/ok_test", "small", ("unit",)))
    assert (events.workspace, events.output_base) == ("/ws", "/OB")
    # No label, and the start time in milliseconds alone: older than 7.0.
    assert events.version == BazelVersion(None, older_than=(7, 0))
    assert events.patterns == ("//t:all",)


def on_disk(tmp_path: Path, lines: list[str]) -> Path:
    """The recorded events with the output_base in ``tmp_path``, and its test logs there."""
    ob = tmp_path / "ob"
    text = "\n".join(lines).replace("/OB/", f"{ob}/").replace('"/OB"', json.dumps(str(ob)))
    for test in ("ok_test", "bad_test"):
        log = Path(TESTLOGS.replace("/OB/", f"{ob}/")) / "t" / test / "test.log"
        log.parent.mkdir(parents=True)
        log.write_text(f"{test} ran\n")
        end = 1796050867.2
        os.utime(log, (end, end))
    path = tmp_path / "events.json"
    path.write_text(text + "\n")
    return path


def test_diagnose_reads_the_failed_test_log_from_it(tmp_path: Path) -> None:
    path = on_disk(tmp_path, LINES)
    found = logs.from_bep(str(path))
    ob = tmp_path / "ob"
    log = f"{ob}/execroot/cap/bazel-out/k8-fastbuild/testlogs/t/bad_test/test.log"
    assert found.logs == (logs.TestLog(log, "//t:bad_test", "FAILED"),)
    assert found.passed == 1 and found.notes == ()
    assert found.output_base == str(ob) and found.library_path == "/x/lib"
    assert logs.from_bep(str(path), ["//t:ok_test"]).logs == ()


def test_a_cut_short_last_line_is_a_note(tmp_path: Path) -> None:
    cut = [*LINES[:-1], LINES[-1][: len(LINES[-1]) // 2]]
    events = bep.read(cut)
    assert events.cut_short == events.skipped[-1]
    assert events.cut_short is not None and events.cut_short.line == len(LINES)
    assert events.cut_short.problem is bep.Problem.NOT_JSON
    assert events.events == len(LINES) - 1
    assert parse_bep(cut).tests == parse_bep(LINES).tests
    found = logs.from_bep(str(on_disk(tmp_path, cut)))
    assert len(found.logs) == 1
    assert any(f"ends in the middle of an event (line {len(LINES)})" in n for n in found.notes)


def test_blank_lines_after_the_cut_leave_it_the_last() -> None:
    events = bep.read([*LINES[:3], '{"id": {"progr', "", "  "])
    assert events.cut_short is not None and events.cut_short.line == 4


def test_a_line_that_is_not_json_before_the_end(tmp_path: Path) -> None:
    broken = [LINES[0], "not json", *LINES[1:]]
    events = bep.read(broken)
    assert events.cut_short is None
    assert [(s.line, s.problem) for s in events.skipped] == [(2, bep.Problem.NOT_JSON)]
    # The repair reads on; diagnose refuses the file.
    assert len(parse_bep(broken).tests) == 2
    with pytest.raises(BadInputError, match=r"line 2 is not JSON \(.*\): not a "
                                            r"--build_event_json_file"):
        logs.from_bep(str(on_disk(tmp_path, broken)))


@pytest.mark.parametrize(("line", "problem", "words"), [
    ("[1, 2]", bep.Problem.NO_ID, 'no "id"'),
    ('{"started": {}}', bep.Problem.NO_ID, 'no "id"'),
    ('{"id": 5}', bep.Problem.ID_NOT_OBJECT, 'its "id" is not an object'),
    ('{"id": "x"}', bep.Problem.ID_NOT_OBJECT, 'its "id" is not an object'),
])
def test_a_line_that_is_no_event(tmp_path: Path, line: str, problem: bep.Problem,
                                 words: str) -> None:
    lines = [LINES[0], line, *LINES[1:]]
    assert bep.read(lines).skipped == (bep.Skipped(2, problem),)
    assert len(parse_bep(lines).tests) == 2
    with pytest.raises(BadInputError) as caught:
        logs.from_bep(str(on_disk(tmp_path, lines)))
    assert str(caught.value).endswith(f"line 2 is not a build event ({words}): not a "
                                      "--build_event_json_file")


def test_nothing_but_a_cut_line_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(LINES[0][:40] + "\n")
    with pytest.raises(BadInputError, match=r"not JSON \(.* on line 1\)"):
        logs.from_bep(str(path))
    path.write_text("\n\n")
    assert bep.read(["", ""]) == bep.EventFile(0)
    with pytest.raises(BadInputError, match="empty, not a --build_event_json_file"):
        logs.from_bep(str(path))


def replaced(line: str, key: str, value: object) -> str:
    """``line`` with every field named ``key``, at any depth, holding ``value``."""
    def walk(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: (value if k == key else walk(v)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [walk(v) for v in obj]
        return obj
    return json.dumps(walk(json.loads(line)))


@pytest.mark.parametrize(("key", "value"), [
    ("tag", 5), ("tag", "unit"), ("pathPrefix", "bazel-out"), ("pathPrefix", [1]),
    ("testSize", 3), ("label", ["//t:ok_test"]), ("uri", 7), ("fileSets", {"id": "0"}),
    ("localExecRoot", False), ("status", None), ("optionList", []),
    ("testAttemptStartMillisEpoch", 1.5), ("cmdLine", [1]), ("workspaceDirectory", {}),
])
def test_a_field_of_the_wrong_type_is_dropped_and_noted(key: str, value: object) -> None:
    lines = [replaced(line, key, value) for line in LINES]
    changed = [n for n, (a, b) in enumerate(zip(LINES, lines, strict=True), 1) if a != b]
    # The first line that changed where the reader looks (not in "children", say).
    assert bep.read(lines).misshaped_from in changed
    assert bep.read(lines).misshaped_from == min(
        n for n in changed if bep.read([lines[n - 1]]).misshaped_from is not None)
    parse_bep(lines)


def test_pattern_and_success_of_another_shape_raise_nothing() -> None:
    lines = [replaced(replaced(line, "pattern", 5), "success", "yes") for line in LINES]
    events = bep.read(lines)
    assert events.patterns == ()
    assert all(done.success for done in events.completed)   # a true JSON value, as before
    lines = [json.dumps({"id": {"structuredCommandLine": {"commandLineLabel": "canonical"}}}),
             json.dumps({"id": {"pattern": {"pattern": "//t:all"}}})]
    assert bep.read(lines) == bep.EventFile(2, last_line=2)


def test_named_sets_expand_breadth_first_once_each() -> None:
    def file(name: str) -> dict[str, object]:
        return {"name": name, "uri": f"file:///b/{name}"}
    lines = [json.dumps(e) for e in [
        {"id": {"namedSet": {"id": "2"}}, "namedSetOfFiles": {"files": [file("c")],
                                                               "fileSets": [{"id": "1"}]}},
        {"id": {"namedSet": {"id": "1"}}, "namedSetOfFiles": {"files": [file("b")],
                                                               "fileSets": [{"id": "2"}]}},
        {"id": {"targetCompleted": {"label": "//t:t"}},
         "completed": {"success": True, "importantOutput": [file("a")], "outputGroup": [
             {"name": "debug", "fileSets": [{"id": "2"}]},
             {"name": "default", "fileSets": [{"id": "1"}, {"id": "9"}]}]}},
    ]]
    (done,) = bep.read(lines).completed
    assert [f.name for f in done.outputs] == ["a", "b", "c"]


def test_a_path_from_a_file_uri_or_from_the_exec_root() -> None:
    assert bep.file_path(bep.File("file:///a%20b/c"), None) == "/a b/c"
    remote = bep.File("bytestream://cache/blobs/x/1", "t/x", ("bazel-out", "k8", "bin"))
    assert bep.file_path(remote, None) is None
    assert bep.file_path(remote, "/ob/execroot/w") == "/ob/execroot/w/bazel-out/k8/bin/t/x"
    for prefix, name in ((("..",), "x"), (("/etc",), "x"), (("bazel-out",), "a/../../x"),
                         (("bazel-out",), "")):
        assert bep.file_path(bep.File("bytestream://c/b", name, prefix), "/ob/e/w") is None
    assert bep.file_path(bep.File("bytestream://c/b", "x"), "/ob/e/w") is None


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


def keys(obj: object) -> set[str]:
    if isinstance(obj, dict):
        return set(obj).union(*(keys(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(keys(v) for v in obj))
    return set()


KEYS = sorted(set().union(*(keys(json.loads(line)) for line in LINES)))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(KEYS), value=JSON, at=st.integers(0, len(LINES) - 1))
def test_any_value_in_any_field_raises_nothing(key: str, value: object, at: int) -> None:
    lines = list(LINES)
    lines[at] = replaced(lines[at], key, value)
    parse_bep(lines)
    events = bep.read(lines)
    # Every other line is still an event, and every record holds the types it declares.
    assert events.events >= len(LINES) - 1
    for target in events.configured:
        assert all(isinstance(w, str) for w in (target.label, target.kind, target.size,
                                                *target.tags))
    files = [f for done in events.completed for f in done.outputs]
    files += [f for result in events.test_results for f in result.outputs]
    for file in files:
        assert isinstance(file.uri, str) and isinstance(file.name, str)
        assert file.path_prefix is None or all(isinstance(p, str) for p in file.path_prefix)
        bep.file_path(file, events.exec_root)
    for result in events.test_results:
        assert isinstance(result.status, str)
        assert result.ended is None or isinstance(result.ended, float)
    assert all(isinstance(o.name, str) and isinstance(o.value, str) for o in events.options)

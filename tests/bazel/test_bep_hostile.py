"""Mis-shaped build events: a note or one ``error:`` line with exit code 2, never a traceback
(and never exit 1, which means "loader failures found")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bazel_ldfix.bazel import bepschema
from bazel_ldfix.bazel.targets import parse_bep

pytestmark = pytest.mark.security

GOOD = [
    {"id": {"started": {}}, "started": {"buildToolVersion": "4.2.3",
                                        "workspaceDirectory": "/ws"}},
    {"id": {"targetConfigured": {"label": "//t:t"}},
     "configured": {"targetKind": "cc_test rule", "testSize": "SMALL"}},
]


def diagnose(tmp_path: Path, lines: list[str]) -> subprocess.CompletedProcess[str]:
    bep = tmp_path / "events.json"
    bep.write_text("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "diagnose", "--bep", str(bep)],
                          capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ),
                          timeout=60)


@pytest.mark.parametrize("line", ['{"id": 5}', '{"id": []}', '{"id": "x"}', "[1, 2]", "7"])
def test_an_event_without_an_object_id_is_one_error_line(tmp_path: Path, line: str) -> None:
    result = diagnose(tmp_path, [json.dumps(GOOD[0]), line])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "line 2" in result.stderr


@pytest.mark.parametrize("event", [
    {"id": {"testResult": {"label": "//t:t"}},
     "testResult": {"status": "FAILED", "testActionOutput": [{"name": "test.log", "uri": 7}]}},
    {"id": {"testResult": 5}, "testResult": {"status": "FAILED"}},
    {"id": {"testResult": {"label": ["//t:t"]}},
     "testResult": {"status": "FAILED", "testActionOutput": "test.log"}},
    {"id": {"workspace": {}}, "workspaceInfo": {"localExecRoot": 3}},
    {"id": {"structuredCommandLine": {"commandLineLabel": "canonical"}},
     "structuredCommandLine": {"sections": [{"sectionLabel": "command options",
                                             "optionList": {"option": [5, {"optionName": 1}]}}]}},
])
def test_fields_of_the_wrong_type_are_a_note(tmp_path: Path, event: dict[str, object]) -> None:
    result = diagnose(tmp_path, [json.dumps(GOOD[0]), json.dumps(event)])
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fields of an unexpected type ignored, from line 2" in result.stdout + result.stderr


def test_the_repairs_reader_skips_mis_shaped_events() -> None:
    lines = [json.dumps(e) for e in GOOD] + [
        '{"id": 5}', '{"id": []}', "[]",
        json.dumps({"id": {"targetCompleted": {"label": 3}}, "completed": {"success": True}}),
        json.dumps({"id": {"namedSet": {"id": "0"}},
                    "namedSetOfFiles": {"files": [{"uri": 9}, "x"]}}),
        json.dumps({"id": {"targetCompleted": {"label": "//t:t"}},
                    "completed": {"success": True, "importantOutput": [{"uri": []}],
                                  "outputGroup": [{"name": "default", "fileSets": [{"id": 1}]}]}}),
        json.dumps({"id": {}, "optionsParsed": {"cmdLine": ["--x", 5]}}),
        json.dumps({"id": {"buildFinished": {}}, "finished": {"exitCode": {"code": "0"}}}),
    ]
    events = parse_bep(lines)
    assert events.version.label == "4.2.3" and events.workspace == "/ws"
    assert events.tests == ()  # no usable executable was named
    # A code of the wrong type is dropped, and a code left out is Bazel's 0 (proto3).
    assert events.exit_code == 0 and events.command_line == ()


def test_sanitize_keeps_a_well_shaped_event_whole() -> None:
    event = {"id": {"namedSet": {"id": "3"}},
             "namedSetOfFiles": {"files": [{"name": "a", "uri": "file:///a"}],
                                 "fileSets": [{"id": "4"}]}}
    assert bepschema.sanitize(event) == (event, False)
    assert bepschema.sanitize({"id": 5}) == (None, True)


# -- nesting, huge numbers, NUL bytes ------------------------------------------------------

NESTED = '{"id": {"started": {}}, "started": ' + '{"started": ' * 100_000 + "{}" + \
    "}" * 100_001 + "}"
HUGE = '{"id": {"buildFinished": {}}, "finished": {"exitCode": {"code": 1' + "0" * 100_000 + \
    "}}}"


@pytest.mark.parametrize("line", [NESTED, "[" * 100_000, HUGE],
                         ids=["nested-object", "nested-array", "100000-digit-code"])
def test_json_no_build_event_has_is_one_error_line(tmp_path: Path, line: str) -> None:
    result = diagnose(tmp_path, [json.dumps(GOOD[0]), line])
    assert result.returncode == 2
    assert result.stderr == (f"error: {tmp_path}/events.json: line 2 is not a build event "
                             "(nested deeper, or a number longer, than any build event's): "
                             "not a --build_event_json_file\n")


def test_an_event_nested_within_the_json_readers_reach_is_cut_at_the_schemas_depth() -> None:
    started: dict[str, Any] = {"buildToolVersion": "4.2.3"}
    inner = started
    for _ in range(200):     # "started" in "started": a key of the schema, 200 deep
        inner["started"] = inner = {}
    event, changed = bepschema.sanitize({"id": {"started": {}}, "started": started})
    assert changed and event is not None
    assert event["started"]["buildToolVersion"] == "4.2.3"


def test_a_path_or_label_holding_a_nul_is_dropped(tmp_path: Path) -> None:
    events = parse_bep([json.dumps(e) for e in [
        {"id": {"workspace": {}}, "workspaceInfo": {"localExecRoot": "/ob/exec\u0000root/ws"}},
        {"id": {"targetConfigured": {"label": "//t:t\u0000"}},
         "configured": {"targetKind": "cc_test rule", "tag": ["a\u0000"]}},
    ]])
    assert events.exec_root is None and events.tests == ()
    log = {"id": {"testResult": {"label": "//t:t"}},
           "testResult": {"status": "FAILED", "testActionOutput": [
               {"name": "test.log", "uri": f"file://{tmp_path}/a\u0000b/test.log"}]}}
    result = diagnose(tmp_path, [json.dumps(GOOD[0]), json.dumps(log)])
    assert "Traceback" not in result.stderr
    assert "fields of an unexpected type ignored, from line 2" in result.stdout + result.stderr


def test_a_file_uri_with_a_host_no_parser_reads_names_no_file() -> None:
    from bazel_ldfix.bazel.bep import File, file_path

    assert file_path(File("file://[[[/t/probe_test", "probe_test"), "/ob/execroot/ws") is None


# -- a failed test's log that cannot be read -------------------------------------------------

def _failed_with_log(log: Path) -> list[str]:
    return [json.dumps(GOOD[0]), json.dumps(
        {"id": {"testResult": {"label": "//t:t"}},
         "testResult": {"status": "FAILED", "testActionOutput": [
             {"name": "test.log", "uri": f"file://{log}"}]}})]


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "gone"])
def test_a_failed_test_whose_log_cannot_be_read_is_never_called_green(
        tmp_path: Path, kind: str) -> None:
    log = tmp_path / "t" / "test.log"
    log.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "device":
        log.symlink_to("/dev/zero")
    elif kind == "directory":
        log.mkdir()
    result = diagnose(tmp_path, _failed_with_log(log))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nothing to diagnose" not in result.stdout
    assert "1 failed with a log that cannot be read: //t:t" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_log_named_with_a_nul_in_command_log_is_one_that_cannot_be_read(
        tmp_path: Path) -> None:
    (tmp_path / "WORKSPACE").touch()
    ob = tmp_path / "ob"
    ob.mkdir()
    (ob / "command.log").write_bytes(
        b"FAIL: //t:t (see " + os.fsencode(tmp_path) + b"/t/te\0st.log)\n"
        b"Executed 1 out of 1 test: 1 fails locally.\n")
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", "diagnose",
                             "--output-base", str(ob)], capture_output=True, text=True,
                            cwd=tmp_path, env=dict(os.environ), timeout=60)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2
    assert "1 failed with a log that cannot be read: //t:t" in result.stdout

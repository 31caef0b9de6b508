"""Finding and reading test logs and build-event files: streamed, bounded, checked."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from diagnose_fixtures import fake_bazel
from elfbuild import cc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix.diagnosis import logs, messages, report
from bazel_ldfix.diagnosis.messages import parse_log
from bazel_ldfix.errors import BadInputError, NotAWorkspaceError


def test_lines_are_streamed_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a" * 100 + b"\nshort\r\n\xff\xfe bad utf-8\nlast")
    assert list(logs.read_lines(str(path), max_line=20)) == [
        "a" * 20, "short\r", "\ufffd\ufffd bad utf-8", "last"]


def test_a_huge_log_costs_a_chunk_of_memory(tmp_path: Path) -> None:
    # 64 MiB in one line with no newline, then the loader's message: the worst case.
    path = tmp_path / "huge.log"
    with path.open("wb") as fh:
        block = b"x" * (1 << 20)
        for _ in range(64):
            fh.write(block)
        fh.write(b"\n/b/t: error while loading shared libraries: libz9.so.1: cannot open "
                 b"shared object file: No such file or directory\n")
    for read in (lambda: parse_log(logs.read_lines(str(path))),
                 lambda: messages.read_log(str(path))):
        tracemalloc.start()
        failures = read()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert [(f.soname, f.line_number) for f in failures] == [("libz9.so.1", 2)]
        assert peak < 8 << 20, peak     # a chunk or two; the file is 64 MiB


def test_a_binary_file_is_not_a_log(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="binary data, not a test log"):
        logs.given([str(cc(tmp_path / "prog", src="int main(void){return 0;}"))])
    with pytest.raises(BadInputError, match="no such file"):
        logs.given([str(tmp_path / "nope.log")])


@pytest.mark.parametrize(("log", "exe"), [
    ("testlogs/t/x/test.log", "bin/t/x"),
    ("testlogs/t/x/shard_1_of_2/test.log", "bin/t/x"),
    ("testlogs/t/x/run_2_of_3/test.log", "bin/t/x"),
    ("testlogs/t/x/shard_1_of_2_run_1_of_3/test.log", "bin/t/x"),
    ("testlogs/t/x/test_attempts/attempt_1.log", "bin/t/x"),
    ("testlogs/external/r/p/x/test.log", "bin/external/r/p/x"),
])
def test_the_executable_behind_each_kind_of_log(tmp_path: Path, log: str, exe: str) -> None:
    (tmp_path / log).parent.mkdir(parents=True)
    (tmp_path / log).write_text("")
    (tmp_path / exe).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / exe).write_text("")
    assert logs.executable_for(str(tmp_path / log)) == str(tmp_path / exe)


def test_sandbox_paths_map_to_the_execroot() -> None:
    path = "/ob/sandbox/linux-sandbox/10/execroot/ws/bazel-out/k8-fastbuild/bin/t/x"
    assert logs.unsandbox(path) == "/ob/execroot/ws/bazel-out/k8-fastbuild/bin/t/x"
    assert logs.output_base_of(path) == "/ob"
    assert logs.output_base_of("/elsewhere/x") is None


@pytest.mark.parametrize(("label", "patterns", "selected"), [
    ("//t:x", [], True),
    ("//t:x", ["//t:x"], True),
    ("//t:x", ["//t:y"], False),
    ("//t:x", ["//t:all"], True),
    ("//t:x", ["//t:*"], True),
    ("//t/sub:x", ["//t/..."], True),
    ("//tt:x", ["//t/..."], False),
    ("//t:x", ["//..."], True),
    ("//t:x", ["//...", "-//t:x"], False),
    ("//t:t", ["//t"], True),
    ("@r//p:x", ["@r//..."], True),
    ("@r//p:x", ["//..."], False),
    ("@//t:x", ["//t:x"], True),
    ("//t:x", [":x"], True),           # relative, from the package t
    ("//t/sub:x", ["sub/..."], True),
    (None, ["//..."], False),
])
def test_target_patterns_narrow_the_tests(label: str | None, patterns: list[str],
                                          selected: bool) -> None:
    assert logs.matches(label, patterns, package="t") is selected


def test_a_truncated_bep_file_is_read_up_to_where_it_stops(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    bep = tmp_path / "bep.json"
    events = [
        {"id": {"started": {}}, "started": {"buildToolVersion": "4.2.3"}},
        {"id": {"workspace": {}},
         "workspaceInfo": {"localExecRoot": str(fake.output_base / "execroot" / "ws")}},
        {"id": {"structuredCommandLine": {"commandLineLabel": "canonical"}},
         "structuredCommandLine": {"commandLineLabel": "canonical", "sections": [
             {"sectionLabel": "command options", "optionList": {"option": [
                 {"optionName": "test_env", "optionValue": "LD_LIBRARY_PATH=/a:/b"},
                 {"optionName": "test_env", "optionValue": "LD_LIBRARY_PATH=/kept"}]}}]}},
        {"id": {"testResult": {"label": "//t:app_test", "run": 1, "shard": 1, "attempt": 1}},
         "testResult": {"status": "FAILED", "testActionOutput": [
             {"name": "test.log", "uri": f"file://{fake.log}"},
             {"name": "test.xml", "uri": f"file://{fake.log.parent / 'test.xml'}"}]}},
    ]
    text = "\n".join(json.dumps(e) for e in events) + '\n{"id": {"testSumm'
    bep.write_text(text)
    found = logs.from_bep(str(bep))
    assert [log.label for log in found.logs] == ["//t:app_test"]
    assert found.output_base == str(fake.output_base)
    assert found.library_path == "/kept"        # the last --test_env wins, as in Bazel
    assert "ends in the middle of an event" in found.notes[0]
    flag = report.diagnose(found).findings[0].fix.flag
    assert flag == f"--test_env=LD_LIBRARY_PATH=/kept:{fake.sdk_lib}"


@pytest.mark.parametrize(("content", "message"), [
    ("not json at all\n{}\n", "line 1 is not JSON"),
    ("<html>\n", "not JSON"),
    ("", "empty"),
    ('{"no_id": 1}\n', "not a build event"),
    ('[1, 2]\n', "not a build event"),
])
def test_a_bep_file_that_is_not_one(tmp_path: Path, content: str, message: str) -> None:
    bep = tmp_path / "bep.json"
    bep.write_text(content)
    with pytest.raises(BadInputError, match=message):
        logs.from_bep(str(bep))


def test_a_bep_file_that_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        logs.from_bep(str(tmp_path / "none.json"))


def test_patterns_select_among_the_failed_tests(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    assert logs.find(str(fake.workspace), patterns=["//other/..."]).logs == ()
    assert len(logs.find(str(fake.workspace), patterns=["//t:all"]).logs) == 1


def test_no_workspace_and_no_testlogs(tmp_path: Path) -> None:
    with pytest.raises(NotAWorkspaceError):
        logs.find(str(tmp_path))
    (tmp_path / "WORKSPACE").write_text("")
    with pytest.raises(BadInputError, match="no bazel-testlogs"):
        logs.find(str(tmp_path))


def test_a_log_rewritten_after_the_bep_run_is_flagged(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    bep = tmp_path / "old.json"
    bep.write_text(json.dumps(
        {"id": {"testResult": {"label": "//t:app_test"}},
         "testResult": {"status": "FAILED", "testAttemptStartMillisEpoch": "1000",
                        "testAttemptDurationMillis": "5",
                        "testActionOutput": [{"name": "test.log",
                                              "uri": f"file://{fake.log}"}]}}) + "\n")
    found = logs.from_bep(str(bep))
    assert len(found.logs) == 1
    assert any("was rewritten after the run" in n for n in found.notes)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from([b"x", b"abc ", b"\n", b"ELF", b"version", b"\xff",
                                        b"so", b"shared object", b"\n\n", b"y" * 7])),
       max_line=st.integers(1, 12), chunk=st.integers(1, 9))
def test_searching_in_chunks_finds_the_lines_read_lines_gives(
        tmp_path: Path, pieces: list[bytes], max_line: int, chunk: int) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"".join(pieces))
    needles = (b"ELF", b"version", b"shared object")
    expected = [(n, line) for n, line in enumerate(logs.read_lines(str(path), max_line), 1)
                if any(k.decode() in line for k in needles)]
    assert list(logs.read_matching(str(path), needles, max_line, chunk)) == expected


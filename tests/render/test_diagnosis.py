"""The diagnosis in full: its JSON document and its text, for a real failure."""

from __future__ import annotations

import json
from pathlib import Path

from diagnose_fixtures import fake_bazel

from bazel_ldfix.diagnosis import logs, report
from bazel_ldfix.render import diagnosis as render


def test_json_carries_one_entry_per_failure(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    doc = json.loads(render.to_json(report.diagnose(logs.find(str(fake.workspace)))))
    assert doc["version"] == 1
    entry = only_entry(doc)
    assert set(entry) >= {"test", "log", "error_kind", "soname", "needed_by", "found", "fix"}
    assert set(entry["fix"]) == {"command", "flag", "bazelrc", "build"}
    assert entry["error_kind"] == "cannot_open"
    assert entry["log"] == str(fake.log)


def only_entry(doc: dict[str, object]) -> dict[str, object]:
    failures = doc["failures"]
    assert isinstance(failures, list) and len(failures) == 1, failures
    entry = failures[0]
    assert isinstance(entry, dict)
    return entry


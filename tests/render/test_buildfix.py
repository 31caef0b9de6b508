"""A ``fix`` plan for people (diffs, then what is only described) and for scripts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from diagnose_fixtures import fake_bazel

from bazel_ldfix.buildfix.change import Change, Kind, Plan, Unwritten
from bazel_ldfix.buildfix.planner import TestMissing, plan_fix
from bazel_ldfix.render.buildfix import to_jsonable, to_text


def _plan(tmp_path: Path) -> tuple[Plan, Path, str]:
    """The plan for Bazel 4.2.3's layout: @xsdk//:xdemo imports the unversioned file."""
    fake = fake_bazel(tmp_path)
    build = fake.output_base / "external" / "xsdk" / "BUILD.bazel"
    build.write_text('cc_import(name = "xdemo", shared_library = "lib/libxdemo.so")\n')
    test = TestMissing("//t:app_test", str(fake.executable), ("libxdemo.so.11",))
    return plan_fix([test], str(fake.workspace), str(fake.output_base)), build, str(
        fake.workspace)


def test_a_described_file_gets_its_change_shown_on_the_file_the_rule_wrote(
        tmp_path: Path) -> None:
    plan, build, workspace = _plan(tmp_path)
    text = to_text(plan, workspace)
    lines = text.splitlines()
    assert lines[0].startswith("# not edited: ")
    assert lines[1] == "# The change it needs, shown on the file the rule wrote:"
    diff = "\n".join(lines[2:]) + "\n"
    subprocess.run(["patch", "--quiet", str(build)], input=diff, text=True, check=True)
    assert '"lib/libxdemo.so.11"' in build.read_text()


def test_no_diff_once_refused(tmp_path: Path) -> None:
    plan, _, workspace = _plan(tmp_path)
    text = to_text(plan, workspace, refused="Bazel rejects it")
    assert "@@" not in text and text.splitlines()[-1] == "# cannot fix: Bazel rejects it"


def test_json_has_every_edit_with_its_state(tmp_path: Path) -> None:
    plan, build, workspace = _plan(tmp_path)
    doc = json.loads(json.dumps(to_jsonable(plan, workspace)))
    [edit] = doc["edits"]
    assert edit == {"file": str(build), "label": "@xsdk//:xdemo", "kind": "set",
                    "attribute": "shared_library", "old": "lib/libxdemo.so",
                    "new": "lib/libxdemo.so.11", "why": edit["why"], "state": "described"}
    [f] = doc["files"]
    assert (f["editable"], f["written"]) == (False, False)
    assert doc["problems"] == [] and doc["unprovided"] == []


def test_a_change_not_written_is_named_with_its_reason() -> None:
    change = Change("//t:t", Kind.ADD, "deps", "@x//:x", "//t:t needs libx.so.1", old="x")
    plan = Plan((), (), ("bad",), ("a note",), (Unwritten(change, "a sh_test takes no deps"),))
    [edit] = to_jsonable(plan, "/ws")["edits"]
    assert (edit["state"], edit["reason"], edit["old"], edit["file"]) == (
        "not written", "a sh_test takes no deps", None, None)      # only a SET has an old
    assert to_text(plan, "/ws").splitlines() == [
        '# not written: a sh_test takes no deps. The change: //t:t: add "@x//:x" to deps '
        "(//t:t needs libx.so.1)",
        "# cannot fix: bad", "# note: a note"]

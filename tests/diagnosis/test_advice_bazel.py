"""Advice that Bazel accepts, shown by applying it to a real workspace (Bazel 4.2.3).

A py_test loads a cc_binary extension with ctypes; the extension and a cc_test link
``@vendor//:vendor``, whose ``libvendor.so.3`` needs ``libvendor_core.so.3``. The BUILD fixes
``diagnose`` prints are applied as printed, and the tests then pass under plain ``bazel test``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from bazelws import BAZEL, Workspace
from newcomer_ws import newcomer_workspace

pytestmark = [pytest.mark.newcomer, pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TESTS = ("//app:vendor_test", "//app:ext_test")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = newcomer_workspace(tmp_path_factory.mktemp("advice"))
    yield workspace
    workspace.shutdown()


@pytest.fixture(scope="module")
def diagnosis(ws: Workspace) -> dict[str, Any]:
    run = ws.bazel("test", "--", "//...", "-//app:broken_test")
    assert run.returncode == 3, run.stderr
    result = ws.ldfix("diagnose", "--json")
    assert result.returncode == 1, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def finding(doc: dict[str, Any], test: str, soname: str) -> dict[str, Any]:
    [one] = [f for f in doc["failures"] if f["test"] == test and f["soname"] == soname]
    return one


def test_the_next_failure_is_predicted_for_every_test_with_the_chain(
        diagnosis: dict[str, Any]) -> None:
    for test in TESTS:
        first = finding(diagnosis, test, "libvendor.so.3")
        assert first["seen_in_log"] is True
        after = finding(diagnosis, test, "libvendor_core.so.3")
        assert after["seen_in_log"] is False
        assert after["found"] and after["found"][0].endswith("/vendor/lib/libvendor_core.so.3")


def test_a_dependency_goes_on_the_cc_target_that_links_the_library_never_the_py_test(
        diagnosis: dict[str, Any]) -> None:
    build = finding(diagnosis, "//app:ext_test", "libvendor_core.so.3")["fix"]["build"]
    assert 'add "@vendor//:vendor_core" to the deps of //app:_ext.so' in build
    assert "deps of //app:ext_test" not in json.dumps(diagnosis)
    build = finding(diagnosis, "//app:vendor_test", "libvendor_core.so.3")["fix"]["build"]
    assert 'add "@vendor//:vendor_core" to the deps of //app:vendor_test' in build


def test_a_pattern_with_a_typo_is_named_and_exit_2_in_text_and_json(
        ws: Workspace, diagnosis: dict[str, Any]) -> None:
    result = ws.ldfix("diagnose", "//app:vendr_test")
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: no failed test matches //app:vendr_test in the last")
    assert "//app:vendor_test" in line      # the failed tests there are, to pick from
    as_json = ws.ldfix("diagnose", "--json", "//app:vendr_test")
    assert as_json.returncode == 2
    assert as_json.stderr.splitlines() == [line]
    doc = json.loads(as_json.stdout)
    assert doc["version"] == 1
    assert doc["error"] == {"message": line.removeprefix("error: "), "exit_code": 2}


# Last: it changes the workspace, and its run replaces the failed one diagnose reads.
def test_the_build_fixes_as_printed_make_plain_bazel_test_pass(
        ws: Workspace, diagnosis: dict[str, Any]) -> None:
    vendor_build = ws.root / "third_party" / "vendor.BUILD"
    app_build = ws.root / "app" / "BUILD"
    vendor_text, app_text = vendor_build.read_text(), app_build.read_text()
    for f in diagnosis["failures"]:
        build = f["fix"]["build"] or ""
        # `shared_library = "NEW",  # was "OLD"`: the cc_import change, as printed.
        for new, old in re.findall(r'shared_library = "([^"]+)",  # was "([^"]+)"', build):
            vendor_text = vendor_text.replace(f'"{old}"', f'"{new}"')
        # `add "LABEL" to the deps of TARGET`: the dependency, on the target named.
        for label, target in re.findall(r'add "([^"]+)" to the deps of (//\S+?:[\w.]+)', build):
            name = target.rsplit(":", 1)[1]
            app_text = re.sub(rf'(name = "{re.escape(name)}".*?deps = \[)',
                              lambda m, lab=label: f'{m.group(1)}"{lab}", ', app_text,
                              count=1, flags=re.S)
    assert vendor_text != vendor_build.read_text() and app_text != app_build.read_text()
    vendor_build.write_text(vendor_text)
    app_build.write_text(app_text)
    result = ws.bazel("test", *TESTS)
    assert result.returncode == 0, result.stderr[-3000:] + "\n" + app_text + vendor_text


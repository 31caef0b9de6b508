"""Where `fix` looks under bzlmod (Bazel 7/8), which cannot run here: MODULE.bazel files as
Bazel's documentation writes them, and the canonical repository names Bazel gives.

Canonical names (bazelbuild/bazel, src/main/java/com/google/devtools/build/lib/bazel/bzlmod/
BazelDepGraphFunction.java, ``makeUniqueNameCandidate``): an extension's repos are named
``<bzl repo>+<extension><n>+<name>``, ``use_repo_rule`` being the innate extension
``_repo_rules``; Bazel 7 wrote ``~`` and called the root module's repo ``_main``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bazel_ldfix.buildfix.change import Change, Kind
from bazel_ldfix.buildfix.definitions import Layout, extension_repo, locate
from bazel_ldfix.buildfix.edit import edit_plan

MODULE = '''module(name = "demo")

bazel_dep(name = "rules_cc", version = "0.1.5")

new_local_repository = use_repo_rule(
    "@bazel_tools//tools/build_defs/repo:local.bzl", "new_local_repository")
http_archive = use_repo_rule("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")

new_local_repository(name = "xsdk", path = "/opt/x", build_file = "//third_party:x.BUILD")

http_archive(
    name = "ysdk",
    urls = ["https://example.com/y.tar.gz"],
    build_file_content = """cc_import(
    name = "y",
    shared_library = "lib/liby.so",  # dev link
)
""",
)

prebuilt = use_extension("//tools:extensions.bzl", "prebuilt")
prebuilt.sdk(version = "12")
use_repo(prebuilt, "demo_cuda")
'''


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "MODULE.bazel").write_text(MODULE)
    (tmp_path / "third_party").mkdir()
    (tmp_path / "third_party" / "x.BUILD").write_text(
        'cc_import(name = "x", shared_library = "lib/libx.so")\n')
    return tmp_path


@pytest.mark.parametrize(("name", "expected"), [
    ("+_repo_rules+xsdk", ("", "_repo_rules", "xsdk")),             # Bazel 8
    ("+_repo_rules2+xsdk", ("", "_repo_rules2", "xsdk")),           # a second proxy file
    ("_main~_repo_rules~xsdk", ("_main", "_repo_rules", "xsdk")),   # Bazel 7
    ("+prebuilt+demo_cuda", ("", "prebuilt", "demo_cuda")),
    ("rules_python++python+pythons_hub", None),                     # not one of ours
    ("rules_cc+", None), ("xsdk", None),
])
def test_canonical_names(name: str, expected: tuple[str, str, str] | None) -> None:
    assert extension_repo(name) == expected


@pytest.mark.parametrize("name", ["+_repo_rules+xsdk", "_main~_repo_rules~xsdk", "xsdk"])
def test_a_use_repo_rule_build_file_is_edited(ws: Path, name: str) -> None:
    place = locate(name, "", str(ws), None)
    assert (place.layout, place.file, place.defined_in) == (
        Layout.BUILD_FILE, str(ws / "third_party" / "x.BUILD"), "MODULE.bazel")
    plan = edit_plan([Change(f"@@{name}//:x", Kind.SET, "shared_library", "lib/libx.so.1",
                             "")], str(ws), None, [], [])
    [f] = plan.files
    assert f.after == 'cc_import(name = "x", shared_library = "lib/libx.so.1")\n'


def test_build_file_content_in_module_bazel_is_edited_in_place(ws: Path) -> None:
    plan = edit_plan([Change("@@+_repo_rules+ysdk//:y", Kind.SET, "shared_library",
                             "lib/liby.so.3", "")], str(ws), None, [], [])
    assert not plan.problems, plan.problems
    [f] = plan.files
    assert f.place.layout is Layout.BUILD_FILE_CONTENT
    assert f.path == str(ws / "MODULE.bazel")
    assert f.after == MODULE.replace('"lib/liby.so"', '"lib/liby.so.3"')


def test_a_module_extension_is_described(ws: Path) -> None:
    place = locate("+prebuilt+demo_cuda", "", str(ws), None)
    assert (place.layout, place.rule, place.bzl, place.line) == (
        Layout.EXTENSION, "prebuilt", "//tools:extensions.bzl", 22)
    assert "module extension `prebuilt` (from //tools:extensions.bzl)" in place.describe(
        str(ws))


def test_another_module_s_repository_is_described(ws: Path) -> None:
    place = locate("rules_cc+", "", str(ws), None)
    assert (place.layout, place.rule) == (Layout.MODULE, "rules_cc")
    assert not place.layout.editable

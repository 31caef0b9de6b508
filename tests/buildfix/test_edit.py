"""The BUILD edits of `bazel-ldfix fix`, on real files: one attribute, everything else kept.

Bad input (a file that does not parse, a macro, a read-only file, two fixes that disagree,
a file under output_base) gives a problem and leaves every file as it was.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bazel_ldfix.bazel import buildtext
from bazel_ldfix.buildfix import starlark
from bazel_ldfix.buildfix.change import Change, Kind
from bazel_ldfix.buildfix.definitions import Layout, locate
from bazel_ldfix.buildfix.edit import edit_plan
from bazel_ldfix.errors import CannotEditError

MULTI = '''# top comment
cc_import(
    name = "x",  # the import
    shared_library = 'lib/libx.so',   # odd spacing kept
    hdrs = ["x.h"],
)

cc_test(name = "t", deps = [":x"])
cc_test(
    name = "u",
    deps = [
        ":x",  # why
    ],
)
'''


def set_to(path: str) -> Change:
    return Change("//p:x", Kind.SET, "shared_library", path, "test")


def edit(text: str, *changes: Change) -> str:
    source = starlark.Source.parse(text, "BUILD")
    for c in changes:
        call = source.rule(c.label.rsplit(":", 1)[1])
        assert call is not None
        if c.kind is Kind.SET:
            source = starlark.set_string(source, call, c.attribute, c.value,
                                         after="shared_library")
        else:
            source = starlark.add_to_list(source, call, c.attribute, c.value)
    return source.text


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_a_string_reads_back_as_the_same_string(value: str) -> None:
    # Control characters too, as octal escapes (Bazel reads them back:
    # tests/test_quoting.py).
    assert ast.literal_eval(buildtext.string(value)) == value


def test_a_string_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(CannotEditError, match="not valid UTF-8"):
        buildtext.string("lib/\udcff.so")


def test_only_the_value_of_one_attribute_changes() -> None:
    out = edit(MULTI, set_to("lib/libx.so.1"))
    assert out == MULTI.replace("'lib/libx.so'", "'lib/libx.so.1'")   # its quotes kept


def test_the_interface_shape_adds_one_line_in_the_call_s_layout() -> None:
    out = edit(MULTI, Change("//p:x", Kind.SET, "interface_library", "lib/libx.so", ""),
               set_to("lib/libx.so.1"))
    assert out == MULTI.replace(
        "    shared_library = 'lib/libx.so',   # odd spacing kept\n",
        "    shared_library = 'lib/libx.so.1',   # odd spacing kept\n"
        "    interface_library = \"lib/libx.so\",\n")


def test_a_keyword_added_to_a_one_line_call() -> None:
    text = 'cc_import(name = "x", shared_library = "a.so")\n'
    out = edit(text, Change("//p:x", Kind.SET, "interface_library", "a.so", ""))
    assert out == 'cc_import(name = "x", shared_library = "a.so", interface_library = "a.so")\n'


def test_a_dependency_added_to_one_line_and_multi_line_lists() -> None:
    out = edit(MULTI, Change("//p:t", Kind.ADD, "deps", "@y//:y", ""),
               Change("//p:u", Kind.ADD, "deps", "@y//:y", ""))
    assert 'cc_test(name = "t", deps = [":x", "@y//:y"])\n' in out
    assert '        ":x",  # why\n        "@y//:y",\n    ],\n' in out
    # Already there: nothing changes.
    assert edit(out, Change("//p:t", Kind.ADD, "deps", "@y//:y", "")) == out


def test_a_dependency_added_where_there_were_none() -> None:
    out = edit('cc_test(name = "t", srcs = ["t.c"])\n',
               Change("//p:t", Kind.ADD, "deps", "@y//:y", ""))
    assert out == 'cc_test(name = "t", srcs = ["t.c"], deps = ["@y//:y"])\n'


def test_a_value_that_is_not_a_literal_is_refused() -> None:
    with pytest.raises(CannotEditError, match="not a plain string"):
        edit('cc_import(name = "x", shared_library = LIB)\n', set_to("a.so.1"))
    with pytest.raises(CannotEditError, match="not a plain list"):
        edit('cc_test(name = "t", deps = DEPS + [":x"])\n',
             Change("//p:t", Kind.ADD, "deps", ":y", ""))


def test_utf8_before_the_value_keeps_byte_offsets_right() -> None:
    text = 'cc_import(name = "x", hdrs = ["é.h"], shared_library = "a.so")  # ü\n'
    assert edit(text, set_to("a.so.1")) == text.replace('"a.so"', '"a.so.1"')


# -- through the plan, on files -------------------------------------------------------------

def workspace(tmp_path: Path, build: str, workspace_text: str = "") -> Path:
    (tmp_path / "WORKSPACE").write_text('workspace(name = "w")\n' + workspace_text)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "BUILD").write_text(build)
    return tmp_path


def files_of(root: Path) -> dict[str, str]:
    return {str(p): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_main_repository_import_gets_its_diff(tmp_path: Path) -> None:
    ws = workspace(tmp_path, MULTI)
    plan = edit_plan([set_to("lib/libx.so.1")], str(ws), None, [], [])
    assert not plan.problems
    [f] = plan.files
    assert f.place.layout is Layout.MAIN
    assert "-    shared_library = 'lib/libx.so',   # odd spacing kept\n" in f.diff(str(ws))
    assert f.diff(str(ws)).startswith("--- a/p/BUILD\n+++ b/p/BUILD\n")


@pytest.mark.parametrize(("build", "words"), [
    ('cc_import(name = "x", shared_library = "a.so"\n', "p/BUILD:1: does not parse"),
    ('load("//m.bzl", "sdk_import")\nsdk_import(name = "x", shared_library = "a.so")\n',
     "made by the macro `sdk_import`"),
    ('[cc_import(name = n, shared_library = "a.so") for n in ["x"]]\n',
     'no call with name = "x" at the top level'),
    ('cc_import(name = "x", shared_library = "a.so")\ncc_import(name = "x")\n',
     '2 calls have name = "x"'),
])
def test_bad_input_is_a_problem_and_nothing_changes(tmp_path: Path, build: str,
                                                   words: str) -> None:
    ws = workspace(tmp_path, build)
    before = files_of(ws)
    plan = edit_plan([set_to("a.so.1")], str(ws), None, [], [])
    assert not plan.files
    assert len(plan.problems) == 1 and words in plan.problems[0], plan.problems
    assert files_of(ws) == before


def test_a_read_only_file_is_a_problem(tmp_path: Path) -> None:
    ws = workspace(tmp_path, MULTI)
    os.chmod(ws / "p" / "BUILD", 0o444)
    plan = edit_plan([set_to("lib/libx.so.1")], str(ws), None, [], [])
    assert not plan.files and "read-only" in plan.problems[0]


def test_a_file_under_the_output_base_is_never_edited(tmp_path: Path) -> None:
    ws = workspace(tmp_path, MULTI)
    plan = edit_plan([set_to("lib/libx.so.1")], str(ws), str(tmp_path), [], [])
    assert not plan.files and "under the output_base" in plan.problems[0]


@pytest.mark.parametrize(("value", "ok"), [
    ("lib/libx.so", True), (":lib/libx.so", True), ("//p:lib/libx.so", True),
    (":libx_files", False), ("//other:lib/libx.so", False)])
def test_a_value_that_does_not_name_the_staged_file_is_refused(
        tmp_path: Path, value: str, ok: bool) -> None:
    ws = workspace(tmp_path, f'cc_import(name = "x", shared_library = "{value}")\n')
    change = Change("//p:x", Kind.SET, "shared_library", "lib/libx.so.1", "", "lib/libx.so")
    plan = edit_plan([change], str(ws), None, [], [])
    if ok:
        assert not plan.problems and plan.files
    else:
        assert not plan.files and "not the file lib/libx.so itself" in plan.problems[0]


def test_a_repository_defined_by_a_macro_is_only_described(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "", 'load("//:deps.bzl", "deps")\ndeps()\n')
    place = locate("xsdk", "", str(ws), None)
    assert place.layout is Layout.UNSEEN and not place.layout.editable
    plan = edit_plan([Change("@xsdk//:x", Kind.SET, "shared_library", "a.so.1", "")],
                     str(ws), None, [], [])
    assert not plan.files and plan.described and plan.described_only


def test_build_file_content_edited_inside_its_triple_quotes(tmp_path: Path) -> None:
    content = 'cc_import(\n    name = "x",\n    shared_library = "lib/x.so",  # c\n)\n'
    ws = workspace(tmp_path, "", 'new_local_repository(\n    name = "xsdk",\n'
                                 '    path = "/x",\n'
                                 f'    build_file_content = """{content}""",\n)\n')
    before = (ws / "WORKSPACE").read_text()
    plan = edit_plan([Change("@xsdk//:x", Kind.SET, "shared_library", "lib/x.so.1", "")],
                     str(ws), None, [], [])
    [f] = plan.files
    assert f.place.layout is Layout.BUILD_FILE_CONTENT
    assert f.after == before.replace('"lib/x.so"', '"lib/x.so.1"')


def test_layouts_are_read_from_workspace(tmp_path: Path) -> None:
    ws = workspace(tmp_path, "", (
        'load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")\n'
        'load("//tools:sdk.bzl", my_rule = "sdk_repository")\n'
        'local_repository(name = "l", path = "sdks/l")\n'
        'new_local_repository(name = "n", path = "/n", build_file = "p/n.BUILD")\n'
        'http_archive(name = "h", urls = ["file:///h.tgz"], build_file = "@w//p:h.BUILD")\n'
        'http_archive(name = "o", urls = ["file:///o.tgz"])\n'
        'my_rule(name = "c")\n'))
    assert locate("l", "sub", str(ws), None).file == str(ws / "sdks/l/sub/BUILD")
    assert locate("n", "", str(ws), None).file == str(ws / "p/n.BUILD")
    assert locate("h", "", str(ws), None).file == str(ws / "p/h.BUILD")
    assert locate("o", "", str(ws), None).layout is Layout.ARCHIVE
    custom = locate("c", "", str(ws), None)
    assert (custom.layout, custom.rule, custom.bzl) == (
        Layout.REPOSITORY_RULE, "my_rule", "//tools:sdk.bzl")


# -- edges only on C/C++ rules; a rule that makes the SONAME-named file; line endings -------

@pytest.mark.parametrize(("rule", "words"), [
    ("py_test", "//p:t is a py_test: its deps take no cc_import"),
    ("sh_test", "//p:t is a sh_test: its deps take no cc_import"),
    ("my_cc_test", "//p:t is made by `my_cc_test`, which is not a C/C++ rule"),
])
def test_a_dependency_edge_is_never_written_on_a_rule_that_cannot_carry_it(
        tmp_path: Path, rule: str, words: str) -> None:
    ws = workspace(tmp_path, f'{rule}(name = "t", srcs = ["t.py"], deps = [":lib"])\n')
    before = files_of(ws)
    plan = edit_plan([Change("//p:t", Kind.ADD, "deps", "@y//:y", "why")], str(ws), None,
                     [], [])
    assert not plan.files and not plan.problems and plan.described_only
    [unwritten] = plan.unwritten
    assert unwritten.reason.startswith(words)
    assert files_of(ws) == before


def test_a_dependency_edge_on_a_cc_binary_is_written(tmp_path: Path) -> None:
    ws = workspace(tmp_path, 'cc_binary(name = "_ext.so", linkshared = True, deps = [":x"])\n'
                             'py_test(name = "t", data = [":_ext.so"])\n')
    plan = edit_plan([Change("//p:_ext.so", Kind.ADD, "deps", "@y//:y", "")], str(ws), None,
                     [], [])
    [f] = plan.files
    assert f.after.startswith(
        'cc_binary(name = "_ext.so", linkshared = True, deps = [":x", "@y//:y"])\n')


COPY = ('copy_file(\n    name = "x_libx_so_3",\n    src = "lib/libx-3.1.so",\n'
        '    out = "lib/libx.so.3",\n    allow_symlink = True,\n)')


def copy_changes() -> list[Change]:
    return [Change("//p:x", Kind.RULE, "copy_file", COPY, "why",
                   load=("@bazel_skylib//rules:copy_file.bzl", "copy_file")),
            Change("//p:x", Kind.SET, "shared_library", "lib/libx.so.3", "why",
                   "lib/libx-3.1.so")]


def test_a_rule_that_makes_the_soname_named_file_goes_after_the_import(
        tmp_path: Path) -> None:
    build = ('load("@rules_cc//cc:defs.bzl", "cc_import")\n\n# the SDK\n'
             'cc_import(\n    name = "x",\n    shared_library = "lib/libx-3.1.so",\n)\n\n'
             'cc_test(name = "t", deps = [":x"])\n')
    ws = workspace(tmp_path, build)
    plan = edit_plan(copy_changes(), str(ws), None, [], [])
    [f] = plan.files
    assert f.after == (
        'load("@rules_cc//cc:defs.bzl", "cc_import")\n'
        'load("@bazel_skylib//rules:copy_file.bzl", "copy_file")\n\n# the SDK\n'
        'cc_import(\n    name = "x",\n    shared_library = "lib/libx.so.3",\n)\n\n'
        f'{COPY}\n\ncc_test(name = "t", deps = [":x"])\n')
    # Planned again on the edited file, nothing more is added.
    (ws / "p" / "BUILD").write_text(f.after)
    assert not edit_plan(copy_changes(), str(ws), None, [], []).files


def test_the_load_goes_before_the_first_statement_when_there_is_none(tmp_path: Path) -> None:
    ws = workspace(tmp_path, '# vendored\ncc_import(name = "x", shared_library = '
                             '"lib/libx-3.1.so")\n')
    [f] = edit_plan(copy_changes(), str(ws), None, [], []).files
    assert f.after.startswith('# vendored\nload("@bazel_skylib//rules:copy_file.bzl", '
                              '"copy_file")\n\ncc_import(name = "x", shared_library = '
                              '"lib/libx.so.3")\n\ncopy_file(\n')


def test_a_rule_added_inside_a_one_line_build_file_content(tmp_path: Path) -> None:
    content = 'cc_import(name = "x", shared_library = "lib/libx-3.1.so")\n'
    ws = workspace(tmp_path, "", 'new_local_repository(name = "xsdk", path = "/x", '
                                 f'build_file_content = {json.dumps(content)})\n')
    changes = [dataclasses.replace(c, label="@xsdk//:x") for c in copy_changes()]
    [f] = edit_plan(changes, str(ws), None, [], []).files
    tree = ast.parse(f.after)
    call = tree.body[-1].value  # type: ignore[attr-defined]
    value = ast.literal_eval(call.keywords[-1].value)
    assert value == ('load("@bazel_skylib//rules:copy_file.bzl", "copy_file")\n\n'
                     'cc_import(name = "x", shared_library = "lib/libx.so.3")\n\n'
                     f'{COPY}\n')


def test_a_crlf_workspace_keeps_crlf_inside_its_triple_quoted_content(tmp_path: Path) -> None:
    content = 'cc_import(\n    name = "x",\n    shared_library = "lib/x.so",\n)\n'
    text = ('new_local_repository(\n    name = "xsdk",\n    path = "/x",\n'
            f'    build_file_content = """{content}""",\n)\n').replace("\n", "\r\n")
    ws = workspace(tmp_path, "")
    (ws / "WORKSPACE").write_bytes(text.encode())
    plan = edit_plan([Change("@xsdk//:x", Kind.SET, "interface_library", "lib/x.so", "")],
                     str(ws), None, [], [])
    [f] = plan.files
    assert f.after == text.replace('"lib/x.so",\r\n)', '"lib/x.so",\r\n'
                                   '    interface_library = "lib/x.so",\r\n)')


def test_a_file_that_is_a_symlink_into_the_output_base_is_never_edited(tmp_path: Path) -> None:
    base = tmp_path / "output-base"
    (base / "external" / "x").mkdir(parents=True)
    (base / "external" / "x" / "BUILD").write_text(MULTI)
    (tmp_path / "ws").mkdir()
    ws = workspace(tmp_path / "ws", "")
    (ws / "p" / "BUILD").unlink()
    (ws / "p" / "BUILD").symlink_to(base / "external" / "x" / "BUILD")
    plan = edit_plan([set_to("lib/libx.so.1")], str(ws), str(base), [], [])
    assert not plan.files and "under the output_base" in plan.problems[0]
    assert (base / "external" / "x" / "BUILD").read_text() == MULTI


def system(interface: str, old: str) -> Change:
    return Change("//p:x", Kind.SYSTEM, "interface_library", interface, "test", old)


@pytest.mark.parametrize(("build", "after"), [
    (MULTI, "cc_import(\n"
            '    name = "x",  # the import\n'
            '    interface_library = "lib/libx.so",\n'
            "    system_provided = 1,\n"
            '    hdrs = ["x.h"],\n'
            ")\n"),
    ('cc_import(name = "x", shared_library = "lib/libx.so")\n',
     'cc_import(name = "x", interface_library = "lib/libx.so", system_provided = 1)\n'),
    ('cc_import(\n    name = "x",\n    interface_library = "lib/libx.so",\n'
     '    shared_library = "lib/libx.so.1",  # the stub, staged\n    system_provided = 0,\n)\n',
     'cc_import(\n    name = "x",\n    interface_library = "lib/libx.so",\n'
     '    system_provided = 1,\n)\n'),
])
def test_an_import_made_system_provided_keeps_no_shared_library(
        tmp_path: Path, build: str, after: str) -> None:
    ws = workspace(tmp_path, build)
    old = "lib/libx.so.1" if "libx.so.1" in build else "lib/libx.so"
    plan = edit_plan([system("lib/libx.so", old)], str(ws), None, [], [])
    assert not plan.problems
    [f] = plan.files
    assert after in f.after
    call = starlark.Source.parse(f.after, "BUILD").rule("x")
    assert call is not None
    assert {k.arg for k in call.keywords} >= {"interface_library", "system_provided"}
    assert "shared_library" not in {k.arg for k in call.keywords}
    assert system("lib/libx.so", old).words == (
        'interface_library = "lib/libx.so", system_provided = 1, and no shared_library')


def test_a_system_change_on_a_macro_is_refused(tmp_path: Path) -> None:
    ws = workspace(tmp_path, 'load("//m.bzl", "sdk_import")\n'
                             'sdk_import(name = "x", shared_library = "lib/libx.so")\n')
    plan = edit_plan([system("lib/libx.so", "lib/libx.so")], str(ws), None, [], [])
    assert not plan.files and "made by the macro `sdk_import`" in plan.problems[0]

"""A change in words, a file's change as a diff the real ``patch`` applies, and what a plan
says about itself."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from bazel_ldfix.buildfix.change import Change, FileChange, Kind, Plan, shown, wrapped_name
from bazel_ldfix.buildfix.definitions import Layout, Place


@pytest.mark.parametrize(("change", "words"), [
    (Change("@x//:x", Kind.SET, "shared_library", 'lib/a"b.so.1', ""),
     'shared_library = "lib/a\\"b.so.1"'),
    (Change("//t:t", Kind.ADD, "deps", "@x//:x", ""), 'add "@x//:x" to deps'),
    (Change("@z//:ztop", Kind.WRAP, "deps", ":zmid", ""),
     'rename the cc_import to "ztop_import", and add a cc_library named as it was that '
     'links it and ":zmid"'),
    (Change("@n//:cuda", Kind.SYSTEM, "interface_library", "lib/libcuda.so", ""),
     'interface_library = "lib/libcuda.so", system_provided = 1, and no shared_library'),
])
def test_words_quote_values_as_starlark_reads_them(change: Change, words: str) -> None:
    assert change.words == words
    quoted = words.split('"', 1)[1].rsplit('"', 1)[0] if change.kind is Kind.SET else None
    if quoted is not None:
        assert ast.literal_eval(f'"{quoted}"') == change.value


def test_wrapped_name_and_shown_path() -> None:
    assert wrapped_name("@zsdk//:ztop") == "ztop_import"
    assert shown("/ws/p/BUILD", "/ws") == "p/BUILD"
    assert shown("/ob/external/x/BUILD.bazel", "/ws") == "/ob/external/x/BUILD.bazel"


def _file_change(path: Path, after: str) -> FileChange:
    place = Place(Layout.MAIN, "", "p", str(path))
    change = Change("//p:x", Kind.SET, "shared_library", "lib/libx.so.1", "")
    return FileChange(place, str(path), path.read_text(), after, (change,))


def test_the_diff_is_one_the_real_patch_applies(tmp_path: Path) -> None:
    build = tmp_path / "p" / "BUILD"
    build.parent.mkdir()
    build.write_text('cc_import(\n    name = "x",\n    shared_library = "lib/libx.so",\n)\n')
    after = build.read_text().replace("libx.so", "libx.so.1")
    change = _file_change(build, after)
    diff = change.diff(str(tmp_path))
    assert diff.startswith("--- a/p/BUILD\n+++ b/p/BUILD\n")
    subprocess.run(["patch", "-p1", "--quiet"], input=diff, text=True, cwd=tmp_path,
                   check=True)
    assert build.read_text() == after
    assert change.editable


def test_what_a_plan_says_of_itself(tmp_path: Path) -> None:
    empty = Plan((), (), (), ("a note",))
    assert not empty.needed and not empty.described_only
    build = tmp_path / "BUILD"
    build.write_text("x\n")
    edited = Plan((_file_change(build, "y\n"),), (), (), ())
    assert edited.needed and not edited.described_only
    assert Plan((), (), ("cannot",), ()).needed

"""Which target carries a dependency: labels read back from where Bazel puts outputs, and
the cc_import a repository's BUILD file already has (files laid out as Bazel lays them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bazel_ldfix.bazel import solib
from bazel_ldfix.diagnosis import fixes

pytestmark = pytest.mark.newcomer


def layout(tmp_path: Path) -> tuple[Path, Path]:
    """An output_base with a main repository (through the execroot's symlinks to the source
    tree, as Bazel makes them) and an external one."""
    source = tmp_path / "ws"
    (source / "app" / "ext").mkdir(parents=True)
    (source / "app" / "BUILD").write_text("")
    output_base = tmp_path / "ob"
    execroot = output_base / "execroot" / "ws"
    execroot.mkdir(parents=True)
    os.symlink(source / "app", execroot / "app")
    (output_base / "external" / "sdk" / "py").mkdir(parents=True)
    (output_base / "external" / "sdk" / "BUILD.bazel").write_text(
        'cc_import(name = "core", shared_library = "lib/libcore.so")\n'
        'cc_import(\n    name = "plain",\n    shared_library = "lib/libplain.so.2",\n)\n')
    (output_base / "external" / "sdk" / "py" / "BUILD").write_text("")
    return output_base, execroot


def test_the_package_is_the_deepest_directory_with_a_build_file(tmp_path: Path) -> None:
    _, execroot = layout(tmp_path)
    bin_dir = execroot / "bazel-out" / "k8-fastbuild" / "bin"
    out = bin_dir / "app" / "ext" / "_ext.so"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"")
    # app/ext has no BUILD file: the target is named with a slash, in //app.
    assert solib.label_of_output(str(out)) == "//app:ext/_ext.so"
    top = bin_dir / "app" / "_top.so"
    top.write_bytes(b"")
    # Reached through a runfiles symlink, as a py_test's runfiles reach it.
    runfiles = tmp_path / "t.runfiles" / "ws" / "app"
    runfiles.mkdir(parents=True)
    os.symlink(top, runfiles / "_top.so")
    assert solib.label_of_output(str(runfiles / "_top.so")) == "//app:_top.so"


def test_an_output_of_an_external_repository_is_labelled_in_it(tmp_path: Path) -> None:
    _, execroot = layout(tmp_path)
    out = execroot / "bazel-out" / "k8-opt" / "bin" / "external" / "sdk" / "py" / "_m.so"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"")
    assert solib.label_of_output(str(out)) == "@sdk//py:_m.so"


def test_a_file_outside_bazel_out_has_no_label(tmp_path: Path) -> None:
    lib = tmp_path / "libx.so.1"
    lib.write_bytes(b"")
    assert solib.label_of_output(str(lib)) is None


def test_an_existing_cc_import_is_found_by_the_unversioned_or_own_name(
        tmp_path: Path) -> None:
    output_base, _ = layout(tmp_path)
    repo = str(output_base / "external" / "sdk")
    assert fixes.existing_import("libcore.so.3", repo) == ("core", "lib/libcore.so")
    assert fixes.existing_import("libplain.so.2", repo) == ("plain", "lib/libplain.so.2")
    assert fixes.existing_import("libother.so.1", repo) is None
    assert fixes.existing_import("libcore.so.3", str(tmp_path / "nowhere")) is None
    # libcore.so is not the unversioned name of libcore_extra.so.1.
    assert fixes.existing_import("libcore_extra.so.1", repo) is None


def test_an_import_whose_strings_need_escaping_is_not_printed_back(tmp_path: Path) -> None:
    repo = tmp_path / "sdk"
    repo.mkdir()
    (repo / "BUILD").write_text('cc_import(name = "a\\"b", shared_library = "lib/libq.so")\n')
    assert fixes.existing_import("libq.so.1", str(repo)) is None

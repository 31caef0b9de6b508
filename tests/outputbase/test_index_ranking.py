"""Copies of a soname ranked as the repair ranks them: where the tests' imports lead first,
and every other copy named with the reason it is not the one."""

from __future__ import annotations

import os
from pathlib import Path

from elfbuild import lib

from bazel_ldfix import elf
from bazel_ldfix.bazel import solib
from bazel_ldfix.loader.resolution import PassReason
from bazel_ldfix.outputbase import index


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An older SDK whose copy sorts first, the SDK the tests import, and a test's
    _solib_k8 entry that leads to the second."""
    ext = tmp_path / "ob" / "external"
    old = lib(ext / "a_old_sdk" / "lib" / "libnvx.so.11")
    new = lib(ext / "nvsdk" / "lib" / "libnvx.so.11")
    os.symlink("libnvx.so.11", new.parent / "libnvx.so")
    entry = (tmp_path / "ob" / "execroot" / "ws" / "bazel-out" / "k8-fastbuild" / "bin"
             / "_solib_k8" / "_U@nvsdk_S_S_Cnvx___Ulib" / "libnvx.so")
    entry.parent.mkdir(parents=True)
    os.symlink(new.parent / "libnvx.so", entry)
    return old, new, entry


def test_locate_ranks_the_copy_the_tests_import_first(tmp_path: Path) -> None:
    old, new, entry = _layout(tmp_path)
    ob = str(tmp_path / "ob")
    assert solib.staged(ob) == [str(entry)]
    expect = elf.read_header(str(new))
    plain = index.copies(["libnvx.so.11"], [index.external_root(ob)], expect)
    assert [c.path for c in plain["libnvx.so.11"]] == [str(old), str(new)]   # sort order
    ranked = index.copies(["libnvx.so.11"], [index.external_root(ob)], expect,
                          preferred=index.test_dirs(solib.staged(ob), ()))
    first, other = ranked["libnvx.so.11"]
    assert (first.path, first.passed) == (str(new), None)
    assert other.path == str(old) and other.reason is None
    assert other.passed is not None and str(new) in other.passed


def test_a_copy_found_beside_the_tests_libraries_names_the_others(tmp_path: Path) -> None:
    old, new, _ = _layout(tmp_path)
    expect = elf.read_header(str(new))
    near = index.choose("libnvx.so.11", [str(new)], expect, [str(new.parent)])
    assert near.passed_over == ()
    whole = index.with_others(near, [str(new), str(old)], expect)
    assert [(p.path, p.kind) for p in whole.passed_over] == [
        (str(old), PassReason.NOT_PREFERRED)]

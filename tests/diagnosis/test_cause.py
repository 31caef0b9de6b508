"""The cause a missing library is grouped under, on Bazel 4.2.3's layout, imitated."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from diagnose_fixtures import fake_bazel
from testcontext import context_of

from bazel_ldfix.diagnosis import cause
from bazel_ldfix.diagnosis.cause import CauseKind

SONAME = "libxdemo.so.11"


def test_an_import_of_the_unversioned_file_is_the_cause(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    found = [str(fake.sdk_lib / SONAME)]
    got = cause.of_missing(context_of(fake), SONAME, found)
    assert (got.kind, got.subject) == (CauseKind.IMPORTS_UNVERSIONED, "@xsdk//:xdemo")
    assert got.words == ("@xsdk//:xdemo imports lib/libxdemo.so, not the file named like "
                         "its SONAME")
    assert got.key == ("imports_unversioned", "@xsdk//:xdemo")


def test_an_import_the_test_does_not_depend_on_is_the_cause(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    (fake.output_base / "external" / "xsdk" / "BUILD.bazel").write_text(
        f'cc_import(name = "xdemo11", shared_library = "lib/{SONAME}")\n')
    alone = dataclasses.replace(context_of(fake), imports=(), other_imports=())
    got = cause.of_missing(alone, SONAME, [str(fake.sdk_lib / SONAME)])
    assert (got.kind, got.subject) == (CauseKind.NOT_A_DEPENDENCY, "@xsdk//:xdemo11")


def test_no_import_anywhere_is_said_so(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    alone = dataclasses.replace(context_of(fake), imports=(), other_imports=())
    got = cause.of_missing(alone, SONAME, [str(fake.sdk_lib / SONAME)])
    assert (got.kind, got.subject) == (CauseKind.NO_IMPORT, None)
    assert cause.of_missing(alone, SONAME, []).kind is CauseKind.NO_IMPORT


def test_the_other_causes_name_their_subject_in_their_words() -> None:
    lacking = cause.lacks_version("/l/libv.so.1", ["V1", "V2", "V3", "V4", "V5"])
    assert lacking.words == "the loader took /l/libv.so.1, which defines only V2, V3, V4, V5"
    assert cause.lacks_version("/l/libv.so.1", []).words.endswith("defines no versions")
    symbol = cause.lacks_symbol("/b/t/app", "/l/libq.so")
    assert (symbol.subject, symbol.words) == (
        "/l/libq.so", "the loader took /l/libq.so, which lacks a symbol app uses")
    assert cause.lacks_symbol("/b/t/app").subject == "/b/t/app"
    assert cause.leftover("/ob/bazel-out/x.so").kind is CauseKind.LEFTOVER
    assert {c.kind for c in (cause.dlopen(), cause.wrong_class(), cause.other())} == {
        CauseKind.DLOPEN, CauseKind.WRONG_CLASS, CauseKind.OTHER}

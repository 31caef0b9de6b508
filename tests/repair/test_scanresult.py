"""What a scan keeps of one test's resolution: the names missing, once each, in the
loader's order (the model lists a missing name once per object that needs it, as glibc)."""

from __future__ import annotations

from pathlib import Path

from elfbuild import lib, program

from bazel_ldfix.loader.closure import Options, resolve_file
from bazel_ldfix.repair.scanresult import Outcome


def test_missing_names_each_name_once_in_listing_order(tmp_path: Path) -> None:
    miss_b = lib(tmp_path / "hidden" / "libb.so.2")
    miss_a = lib(tmp_path / "hidden" / "liba.so.1")
    mid = lib(tmp_path / "lib" / "libmid.so", needs=[miss_a, miss_b])
    app = program(tmp_path / "app", needs=[miss_b, mid], runpath="$ORIGIN/lib")
    res = resolve_file(str(app), Options())
    entries = tuple((lib.path, lib.name, lib.needed_by) for lib in res.libraries)
    outcome = Outcome(res.info.header, entries, res.error)
    # libb.so.2 is listed twice (for app and for libmid.so), as the real loader lists it.
    assert [name for path, name, _ in entries if path is None] == [
        "libb.so.2", "liba.so.1", "libb.so.2"]
    assert outcome.missing == ("libb.so.2", "liba.so.1") == res.missing
    assert Outcome(None, (), None).missing == ()

"""Which ``cc_import`` can provide a SONAME no import of the test's build stages, read from
the BUILD file of the package that holds a real copy."""

from __future__ import annotations

from pathlib import Path

from elfbuild import lib

from bazel_ldfix.buildfix.providers import declared_import, package_of


def _sdk(ob: Path, build: str, at: str = "") -> Path:
    """``@zsdk`` with lib/libzmid.so.3 (SONAME libzmid.so.3) and the BUILD file ``build``."""
    repo = ob / "external" / "zsdk"
    copy = lib(repo / "lib" / "libzmid.so.3")
    lib(repo / "lib" / "libother.so.1")
    (repo / at / "BUILD.bazel").write_text(build)
    return copy


def test_the_import_of_the_file_with_that_soname_is_found(tmp_path: Path) -> None:
    copy = _sdk(tmp_path, 'cc_import(name = "other", shared_library = "lib/libother.so.1")\n'
                          'cc_import(name = "zmid", shared_library = "lib/libzmid.so.3")\n')
    found = declared_import("libzmid.so.3", [str(copy)], str(tmp_path))
    assert found is not None
    assert (found.label, found.library_dir, found.file, found.soname, found.verified) == (
        "@zsdk//:zmid", "lib", "libzmid.so.3", "libzmid.so.3", True)
    assert found.target == str(copy)


def test_the_nearest_package_at_or_above_the_copy_holds_it(tmp_path: Path) -> None:
    copy = _sdk(tmp_path, 'cc_import(name = "zmid", shared_library = "libzmid.so.3")\n', "lib")
    found = declared_import("libzmid.so.3", [str(copy)], str(tmp_path))
    assert found is not None and found.label == "@zsdk//lib:zmid"


def test_a_label_a_macro_or_another_soname_provides_nothing(tmp_path: Path) -> None:
    copy = _sdk(tmp_path,
                'cc_import(name = "a", shared_library = ":lib/libzmid.so.3")\n'
                'sdk_import(name = "b", shared_library = "lib/libzmid.so.3")\n'
                'cc_import(name = "c", shared_library = "lib/libother.so.1")\n'
                'cc_import(name = "d", shared_library = "../elsewhere/libzmid.so.3")\n')
    assert declared_import("libzmid.so.3", [str(copy)], str(tmp_path)) is None


def test_a_copy_outside_external_or_no_output_base_provides_nothing(tmp_path: Path) -> None:
    copy = lib(tmp_path / "ws" / "lib" / "libzmid.so.3")
    (tmp_path / "ws" / "BUILD").write_text(
        'cc_import(name = "zmid", shared_library = "lib/libzmid.so.3")\n')
    assert declared_import("libzmid.so.3", [str(copy)], str(tmp_path / "ob")) is None
    assert declared_import("libzmid.so.3", [str(copy)], None) is None


def test_the_package_lists_its_imports_and_the_wrappers_fix_made(tmp_path: Path) -> None:
    copy = _sdk(tmp_path,
                'cc_import(name = "zmid_import", shared_library = "lib/libzmid.so.3")\n'
                'cc_library(name = "zmid", deps = [":zmid_import", "@dep//:d"])\n'
                'cc_import(name = "other", shared_library = "lib/libother.so.1")\n')
    found = declared_import("libzmid.so.3", [str(copy)], str(tmp_path))
    assert found is not None
    package = package_of(found)
    assert [i.label for i in package.imports] == ["@zsdk//:zmid_import", "@zsdk//:other"]
    assert dict(package.wrappers) == {"zmid_import": ("zmid", (":zmid_import", "@dep//:d"))}

"""A file resolved as this machine's loader would, and the unversioned twins of a missing
name, checked against the real loader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfbuild import lib, program

from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.closure import (
    Options,
    Unversioned,
    interp_for,
    resolve_file,
    unversioned_files,
)
from bazel_ldfix.loader.conformance import compare
from bazel_ldfix.loader.resolution import Library, Resolution
from bazel_ldfix.loader.trace import run_trace
from bazel_ldfix.loader.verify import opened_path


def _agreed(path: Path, options: Options) -> Resolution:
    """The model's load of ``path``, asserted to agree with the real loader's trace."""
    model = resolve_file(str(path), options)
    real = run_trace(interp_for(model.info), opened_path(str(path), model.info),
                     library_path=options.library_path, inhibit_cache=options.inhibit_cache,
                     cwd=options.cwd)
    assert compare(model, real) == (), f"model: {model.libraries}\nloader: {real}"
    return model


def _entry(res: Resolution, name: str) -> Library:
    return next(library for library in res.libraries if library.name == name)


def test_resolve_file_finds_what_the_real_loader_finds(tmp_path: Path) -> None:
    libx = lib(tmp_path / "lib" / "libx.so.1")
    app = program(tmp_path / "app", needs=[libx], runpath="$ORIGIN/lib")
    res = _agreed(app, Options())
    assert _entry(res, "libx.so.1").path == str(libx)
    assert res.missing == ()


def test_resolve_file_takes_ld_library_path_from_the_options(tmp_path: Path) -> None:
    libx = lib(tmp_path / "elsewhere" / "libx.so.1")
    app = program(tmp_path / "app", needs=[libx])
    assert _agreed(app, Options()).missing == ("libx.so.1",)
    res = _agreed(app, Options(library_path=str(libx.parent)))
    assert _entry(res, "libx.so.1").path == str(libx)


def test_resolve_file_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="is a directory"):
        resolve_file(str(tmp_path), Options())


def test_resolve_file_refuses_a_file_that_is_not_elf(tmp_path: Path) -> None:
    text = tmp_path / "libx.so"
    text.write_text("INPUT(-lx)\n")
    with pytest.raises(BadInputError):
        resolve_file(str(text), Options())


# -- the unversioned twin of a missing name (what a cc_import of libX.so stages) -----------

def _missing_vendor(tmp_path: Path, staged: Path) -> Library:
    """``app`` needs libvendor.so.3 and searches ``staged`` (RUNPATH) for it, in vain."""
    built = lib(tmp_path / "build" / "libvendor.so", soname="libvendor.so.3")
    app = program(tmp_path / "app", needs=[built], runpath=str(staged))
    res = _agreed(app, Options())
    assert res.missing == ("libvendor.so.3",)
    return _entry(res, "libvendor.so.3")


def test_unversioned_file_with_the_missing_soname_is_named(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    lib(staged / "libvendor.so", soname="libvendor.so.3")
    missing = _missing_vendor(tmp_path, staged)
    assert unversioned_files(missing) == (
        Unversioned(str(staged), "libvendor.so", "libvendor.so.3", None),)


def test_versioned_file_beside_the_link_target_is_named(tmp_path: Path) -> None:
    real = tmp_path / "external" / "vendor"
    target = lib(real / "libvendor.so", soname="libvendor.so.3")
    versioned = lib(real / "libvendor.so.3.1", soname="libvendor.so.3")
    (real / "libvendor.so.3").symlink_to(versioned.name)
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "libvendor.so").symlink_to(target)
    missing = _missing_vendor(tmp_path, staged)
    (found,) = unversioned_files(missing)
    assert found.versioned == os.path.join(real, "libvendor.so.3")


def test_unversioned_file_with_another_soname_is_not_a_twin(tmp_path: Path) -> None:
    staged = tmp_path / "staged"
    lib(staged / "libvendor.so", soname="libvendor.so.2")
    assert unversioned_files(_missing_vendor(tmp_path, staged)) == ()


def test_a_found_library_or_an_unversioned_name_has_no_twin(tmp_path: Path) -> None:
    libx = lib(tmp_path / "lib" / "libx.so.1")
    res = _agreed(program(tmp_path / "app", needs=[libx], runpath="$ORIGIN/lib"), Options())
    assert unversioned_files(_entry(res, "libx.so.1")) == ()
    assert unversioned_files(Library("libx.so", None, None, ())) == ()

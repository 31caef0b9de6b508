"""`check` names a loaded CUDA stub, and `check --matrix` never calls a set that loads
one "all loaded" without saying so, nor counts it as loading everything.

The real loader runs (in trace mode) on a program linked against a gcc-built stub.
"""

from __future__ import annotations

import os
from pathlib import Path

from elfbuild import cuda_stub, lib, program

from bazel_ldfix.loader import cuda, realloader
from bazel_ldfix.loader.closure import Options
from bazel_ldfix.render.resolved import check_text, matrix_text

HOST = cuda.HostDriver((550, 54, 14))


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    stub = lib(tmp_path / "cuda" / "lib64" / "stubs" / "libcuda.so", soname="libcuda.so.1")
    os.symlink("libcuda.so", stub.parent / "libcuda.so.1")
    host = lib(tmp_path / "host" / "libcuda.so.550.54.14", soname="libcuda.so.1")
    os.symlink(host.name, host.parent / "libcuda.so.1")
    app = program(tmp_path / "app", needs=[stub])
    return stub, host, app


def test_check_names_the_stub_it_loaded(tmp_path: Path) -> None:
    stub, _, app = _layout(tmp_path)
    result = realloader.check_file(str(app), Options(str(stub.parent)), HOST)
    (note,) = result.unusable
    assert note.soname == "libcuda.so.1" and note.file.kind is cuda.CudaKind.STUB
    assert "cuda: libcuda.so.1 =>" in check_text(result, color=False)
    assert "CUDA stub" in check_text(result, color=False)


def test_the_matrix_does_not_call_a_stub_all_loaded(tmp_path: Path) -> None:
    stub, host, app = _layout(tmp_path)
    m = realloader.matrix(str(app), [str(stub.parent), str(host.parent)], Options(), HOST)
    rows = {r.label: r for r in m.rows}
    assert rows[f"{stub.parent} only"].unusable
    assert not rows[f"{host.parent} only"].unusable
    assert m.smallest == (str(host.parent),)
    text = matrix_text(m)
    assert f"{stub.parent} only -> all loaded, but libcuda.so.1 =>" in text


def test_check_names_a_stub_it_knows_by_its_code(tmp_path: Path) -> None:
    stub = cuda_stub(tmp_path / "vendor" / "libcuda.so.1")
    app = program(tmp_path / "app", needs=[stub])
    result = realloader.check_file(str(app), Options(str(stub.parent)), HOST)
    (note,) = result.unusable
    assert note.path.endswith("vendor/libcuda.so.1") and note.file.kind is cuda.CudaKind.STUB

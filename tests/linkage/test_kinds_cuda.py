"""`inspect` says "CUDA stub" and "CUDA compat driver" for files where the toolkit puts
them, whether reached through the link or by the real path, and "CUDA stub" for a stub
wherever it lies."""

from __future__ import annotations

import os
from pathlib import Path

from elfbuild import cuda_stub, lib

from bazel_ldfix.linkage import kinds
from bazel_ldfix.loader.cuda import CudaKind
from bazel_ldfix.render.linkage import inspection_document


def test_inspect_names_a_stub_and_a_compat_driver(tmp_path: Path) -> None:
    stub = lib(tmp_path / "lib64" / "stubs" / "libcuda.so", soname="libcuda.so.1")
    compat = lib(tmp_path / "compat" / "libcuda.so.535.104.05", soname="libcuda.so.1")
    os.symlink(compat.name, compat.parent / "libcuda.so.1")
    plain = lib(tmp_path / "lib64" / "libcudart.so.12")
    found = kinds.inspect(str(stub))
    assert found.cuda is CudaKind.STUB and "a CUDA stub" in found.describe()
    via_link = kinds.inspect(str(compat.parent / "libcuda.so.1"))
    assert "a CUDA compat driver" in via_link.describe()
    assert inspection_document(via_link, None)["cuda"] == "compat"
    assert kinds.inspect(str(plain)).cuda is None


def test_inspect_names_a_stub_by_its_code_in_any_directory(tmp_path: Path) -> None:
    stub = cuda_stub(tmp_path / "vendor" / "lib" / "libcuda.so.1", extra=["-Wl,-s"])
    found = kinds.inspect(str(stub))
    assert found.cuda is CudaKind.STUB and "a CUDA stub" in found.describe()
    assert inspection_document(found, None)["cuda"] == "stub"

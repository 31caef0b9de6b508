"""The CUDA driver file rules: stubs by directory or by code, compat drivers by version."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from elfbuild import cc, cuda_driver, cuda_stub, patch_machine

from bazel_ldfix.loader import cuda

_PROC = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
         "Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc version 12.2.0\n")
_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  "
         "Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Feb 22 01:25:25 UTC 2024\n")


def test_the_kernel_module_version_is_read_from_proc_text() -> None:
    assert cuda.parse_proc_version(_PROC) == (535, 104, 5)
    assert cuda.parse_proc_version(_OPEN) == (550, 54, 14)
    assert cuda.parse_proc_version("garbage") is None


def test_a_soname_carries_no_driver_version() -> None:
    assert cuda.version_in_name("/x/libcuda.so.1") is None
    assert cuda.version_in_name("/x/libcuda.so.535.104.05") == (535, 104, 5)


def test_a_file_in_a_stubs_directory_is_a_stub_by_link_or_real_path() -> None:
    by_link = cuda.classify("/t/stubs/libcuda.so.1", "/t/real/libcuda.so")
    by_real = cuda.classify("/t/lib/libcuda.so.1", "/t/stubs/libcuda.so")
    assert by_link is not None and by_link.kind is cuda.CudaKind.STUB
    assert by_real is not None and not by_real.usable


def test_a_compat_driver_is_usable_only_when_newer_than_the_host() -> None:
    real = "/t/compat/libcuda.so.535.104.05"
    older = cuda.classify("/t/compat/libcuda.so.1", real, cuda.HostDriver((550, 54, 14)))
    newer = cuda.classify("/t/compat/libcuda.so.1", real, cuda.HostDriver((525, 60, 13)))
    same = cuda.classify("/t/compat/libcuda.so.1", real, cuda.HostDriver((535, 104, 5)))
    none = cuda.classify("/t/compat/libcuda.so.1", real)
    assert older is not None and not older.usable
    assert newer is not None and newer.usable
    assert same is not None and not same.usable
    assert none is not None and not none.usable


def test_other_files_in_compat_are_not_drivers() -> None:
    assert cuda.classify("/t/compat/libfoo.so.1", "/t/compat/libfoo.so.1") is None
    assert cuda.classify("/t/lib/libcuda.so.1", "/t/lib/libcuda.so.550.54.14") is None


def test_the_host_driver_comes_from_proc_then_from_the_cached_libcuda() -> None:
    assert cuda.host_driver(_PROC, "/usr/lib/libcuda.so.550.54.14").version == (535, 104, 5)
    assert cuda.host_driver(None, "/usr/lib/libcuda.so.550.54.14").version == (550, 54, 14)
    assert cuda.host_driver(None, "/t/stubs/libcuda.so.550.54.14").version is None
    assert cuda.host_driver(None, None, allow_compat=True) == cuda.HostDriver(None, True)


def _stub_everywhere(path: Path) -> bool:
    """Judged by its code alone: found and really in a directory with no special name."""
    return cuda.is_stub_code(str(path)) and cuda.kind_of(str(path), str(path)) is \
        cuda.CudaKind.STUB


def test_a_stub_is_known_by_its_code_under_any_directory_name(tmp_path: Path) -> None:
    stub = cuda_stub(tmp_path / "vendor" / "driver" / "libcuda.so.1")
    assert _stub_everywhere(stub)
    found = cuda.classify(str(stub), str(stub), cuda.HostDriver((580, 159, 4)))
    assert found is not None and found.kind is cuda.CudaKind.STUB and not found.usable


@pytest.mark.parametrize("flags", [
    pytest.param(("-fcf-protection=full",), id="endbr64 first"),
    pytest.param(("-Wl,--hash-style=sysv",), id="DT_HASH only"),
    pytest.param(("-Wl,-s",), id="stripped"),
])
def test_a_stub_is_known_by_its_code_however_it_was_linked(tmp_path: Path,
                                                           flags: tuple[str, ...]) -> None:
    assert _stub_everywhere(cuda_stub(tmp_path / "libcuda.so", extra=flags))


def test_a_stub_without_a_section_table_is_still_known(tmp_path: Path) -> None:
    stub = cuda_stub(tmp_path / "libcuda.so")
    data = bytearray(stub.read_bytes())
    struct.pack_into("<QHHH", data, 40, 0, 64, 0, 0)  # e_shoff, e_ehsize, e_shentsize, e_shnum
    struct.pack_into("<H", data, 62, 0)                # e_shstrndx
    stub.write_bytes(bytes(data))
    assert _stub_everywhere(stub)


def test_a_stub_of_other_libraries_is_known_too(tmp_path: Path) -> None:
    """The toolkit's other stubs (libcublas.so, libnvrtc.so, ...) are of the same kind."""
    assert _stub_everywhere(cuda_stub(tmp_path / "lib" / "libcublas.so",
                                      soname="libcublas.so.13",
                                      functions=("cublasCreate_v2", "cublasSgemm_v2")))


@pytest.mark.parametrize("src, flags", [
    pytest.param("int cuInit(void){return 34;}\nint other(void){return 0;}\n",
                 ("-O2", "-nostdlib"), id="one function does something else"),
    pytest.param("int cuInit(void){return 35;}\n", ("-O2", "-nostdlib"), id="returns 35"),
    pytest.param("int cuInit(void){return 34;}\n", ("-O2",), id="needs libc"),
    pytest.param("int cuInit(void){return 34;}\n", ("-O0", "-nostdlib"), id="unoptimised"),
    pytest.param("int table[4] = {34};\n", ("-O2", "-nostdlib"), id="no function"),
])
def test_what_is_not_a_stub_by_its_code(tmp_path: Path, src: str,
                                        flags: tuple[str, ...]) -> None:
    made = cc(tmp_path / "lib" / "libcuda.so.1", "-shared", "-Wl,-soname,libcuda.so.1",
              *flags, src=src)
    assert not cuda.is_stub_code(str(made))
    assert cuda.classify(str(made), str(made)) is None


def test_a_driver_and_a_stub_of_another_machine_are_not_stubs(tmp_path: Path) -> None:
    assert not cuda.is_stub_code(str(cuda_driver(tmp_path / "compat" / "libcuda.so.1")))
    # Only the x86-64 code is known; another machine's stub is a stub by its directory.
    assert not cuda.is_stub_code(str(patch_machine(cuda_stub(tmp_path / "libcuda.so"), 183)))


def test_the_nvidia_ml_kind_is_a_stub_by_its_directory_only(tmp_path: Path) -> None:
    """libnvidia-ml.so's stub prints a warning (it calls puts, so it needs libc)."""
    src = ('#include <stdio.h>\n'
           'int nvmlInit_v2(void){puts("WARNING: NVML stub");return 999;}\n')
    ml = cc(tmp_path / "stubs" / "libnvidia-ml.so", "-O2", "-shared",
            "-Wl,-soname,libnvidia-ml.so.1", src=src)
    assert not cuda.is_stub_code(str(ml))
    assert cuda.kind_of(str(ml), str(ml)) is cuda.CudaKind.STUB


def test_a_cached_libcuda_that_is_a_stub_by_its_code_gives_no_version(tmp_path: Path) -> None:
    stub = cuda_stub(tmp_path / "usr" / "lib" / "libcuda.so.550.54.14")
    assert cuda.host_driver(None, str(stub)).version is None
    driver = cuda_driver(tmp_path / "usr" / "lib" / "libcuda.so.535.104.05")
    assert cuda.host_driver(None, str(driver)).version == (535, 104, 5)

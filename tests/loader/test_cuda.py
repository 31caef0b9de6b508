"""The CUDA driver file rules: stubs by directory, compat drivers by version."""

from __future__ import annotations

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

"""What `fix` plans for the CUDA driver's names, by the host's driver and the import's file
(bazel_ldfix/buildfix/driver.py); the real-Bazel proof is test_fix_cuda_bazel.py."""

from __future__ import annotations

import os
from pathlib import Path

from elfbuild import cuda_driver, cuda_stub

from bazel_ldfix.bazel.solib import SolibImport
from bazel_ldfix.buildfix import driver
from bazel_ldfix.buildfix.change import Kind
from bazel_ldfix.loader.cuda import NO_HOST_DRIVER, HostDriver

HOST = HostDriver((580, 159, 4))


def imported(top: Path, value: str) -> SolibImport:
    """The import ``@cuda//:cuda`` of ``value``, as its ``_solib_`` entry names it (the
    test has no runfiles manifest: nothing says it is system-provided already)."""
    target = top / "external" / "cuda" / value
    staged = top / "bin" / "_solib_k8" / "_U@cuda_S_S_Ccuda___Ulib64_Sstubs" / target.name
    return SolibImport("@cuda//:cuda", os.path.dirname(value), target.name, str(staged),
                       str(target), "libcuda.so.1", True)


def kit(top: Path) -> None:
    stub = cuda_stub(top / "external" / "cuda" / "lib64" / "stubs" / "libcuda.so")
    (stub.parent / "libcuda.so.1").symlink_to("libcuda.so")


def test_the_stub_becomes_the_interface_of_a_system_provided_import(tmp_path: Path) -> None:
    kit(tmp_path)
    for value in ("lib64/stubs/libcuda.so", "lib64/stubs/libcuda.so.1"):
        decided = driver.decide("libcuda.so.1", "//t:g", str(tmp_path / "g"),
                                imported(tmp_path, value), HOST, False, ())
        assert decided.change is not None and decided.problem is None
        assert (decided.change.kind, decided.change.value, decided.change.old) == (
            Kind.SYSTEM, "lib64/stubs/libcuda.so", value)
        assert "a CUDA stub" in decided.change.why
        assert decided.unprovided is None       # this host has a driver


def test_a_versioned_name_with_no_unversioned_file_beside_it_is_a_problem(
        tmp_path: Path) -> None:
    cuda_stub(tmp_path / "external" / "cuda" / "lib64" / "stubs" / "libcuda.so.1")
    decided = driver.decide("libcuda.so.1", "//t:g", str(tmp_path / "g"),
                            imported(tmp_path, "lib64/stubs/libcuda.so.1"), HOST, False, ())
    assert decided.change is None
    assert decided.problem is not None and "ends in .so" in decided.problem


def test_what_no_change_can_give_follows_the_host(tmp_path: Path) -> None:
    kit(tmp_path)
    imp = imported(tmp_path, "lib64/stubs/libcuda.so")
    none = driver.decide("libcuda.so.1", "//t:g", "", imp, NO_HOST_DRIVER, True, ())
    assert none.unprovided is not None and "this host has no NVIDIA driver" in none.unprovided
    unread = driver.decide("libcuda.so.1", "//t:g", "", imp, HOST, True, ())
    assert unread.unprovided is not None and "finds no usable copy" in unread.unprovided
    compat = str(tmp_path / "compat" / "libcuda.so.1")
    given = driver.decide("libcuda.so.1", "//t:g", "", imp, HOST, True, (compat,))
    assert given.unprovided is not None and f"bazel-ldfix test gives {compat}" in \
        given.unprovided
    # Asked for compat drivers whatever the host has: the host is not said to have none.
    asked = driver.decide("libcuda.so.1", "//t:g", "", imp, HostDriver(None, True), False, ())
    assert asked.unprovided is None


def test_a_compat_driver_is_refused_unless_newer_than_the_host(tmp_path: Path) -> None:
    compat = cuda_driver(tmp_path / "compat" / "libcuda.so.580.95.05")
    (compat.parent / "libcuda.so.1").symlink_to(compat.name)
    link = str(compat.parent / "libcuda.so.1")
    assert driver.refuse(link, HOST) is not None
    assert driver.refuse(link, NO_HOST_DRIVER) is not None
    assert driver.refuse(link, HostDriver((570, 86, 10))) is None
    assert driver.refuse(str(cuda_driver(tmp_path / "lib" / "libcuda.so.1")), HOST) is None

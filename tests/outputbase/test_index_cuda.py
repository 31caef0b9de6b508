"""A CUDA stub or a compat driver the host cannot use is never the copy chosen.

The tree is a toolkit as NVIDIA lays it out, built with gcc: ``stubs/libcuda.so`` with
the ``libcuda.so.1 -> libcuda.so`` link, ``compat/libcuda.so.1 -> libcuda.so.<version>``,
and a host driver directory. The host's driver version is an argument, read here from the
name of the host's own ``libcuda.so.<version>``, never from this machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from elfbuild import cc, cuda_stub, lib

from bazel_ldfix import elf
from bazel_ldfix.loader import cuda
from bazel_ldfix.loader.resolution import PassReason
from bazel_ldfix.outputbase import index

# A program that prints the lines of its own memory map naming libcuda: what it loaded.
_SHOW_MAPS = r"""
#include <stdio.h>
#include <string.h>
int f(void);
int main(void){ char l[4096]; FILE *m = fopen("/proc/self/maps", "r");
  while (fgets(l, sizeof l, m)) if (strstr(l, "libcuda")) fputs(l, stdout);
  return f(); }
"""


def _toolkit(tmp_path: Path, compat_version: str) -> tuple[Path, Path, Path]:
    """output_base/external/cuda with stubs/ and compat/, and a host driver directory."""
    top = tmp_path / "ob" / "external" / "cuda"
    stub = lib(top / "lib64" / "stubs" / "libcuda.so", soname="libcuda.so.1")
    os.symlink("libcuda.so", stub.parent / "libcuda.so.1")
    compat = lib(top / "compat" / f"libcuda.so.{compat_version}", soname="libcuda.so.1")
    os.symlink(compat.name, compat.parent / "libcuda.so.1")
    host = lib(tmp_path / "host" / "libcuda.so.550.54.14", soname="libcuda.so.1")
    os.symlink(host.name, host.parent / "libcuda.so.1")
    return stub, compat, host


def _host(host_lib: Path) -> cuda.HostDriver:
    return cuda.HostDriver(cuda.version_in_name(os.path.realpath(host_lib.parent
                                                                 / "libcuda.so.1")))


def _loaded(tmp_path: Path, stub: Path, library_path: str) -> str:
    """What a program linked against the stub really maps with ``library_path``."""
    app = cc(tmp_path / "app", "-L", str(stub.parent), "-l:libcuda.so", src=_SHOW_MAPS)
    run = subprocess.run([str(app)], env={"LD_LIBRARY_PATH": library_path},
                         capture_output=True, text=True, check=True)
    return run.stdout


def test_an_older_compat_driver_and_the_stub_are_never_chosen(tmp_path: Path) -> None:
    stub, compat, host = _toolkit(tmp_path, "535.104.05")
    root = index.external_root(str(tmp_path / "ob"))
    expect = elf.read_header(str(stub))
    found = index.locate(["libcuda.so.1"], [root], expect, preferred=[str(stub.parent)],
                         cuda=_host(host))["libcuda.so.1"]
    assert found.path is None
    kinds = {p.path: p.kind for p in found.passed_over}
    assert kinds == {str(stub.parent / "libcuda.so.1"): PassReason.CUDA_STUB,
                     str(compat.parent / "libcuda.so.1"): PassReason.CUDA_COMPAT}


def test_without_a_host_driver_a_compat_driver_is_not_chosen(tmp_path: Path) -> None:
    stub, _, _ = _toolkit(tmp_path, "560.28.03")
    root = index.external_root(str(tmp_path / "ob"))
    found = index.locate(["libcuda.so.1"], [root], elf.read_header(str(stub)))
    assert found["libcuda.so.1"].path is None


def test_a_newer_compat_driver_is_chosen_and_really_loaded(tmp_path: Path) -> None:
    stub, compat, host = _toolkit(tmp_path, "560.28.03")
    root = index.external_root(str(tmp_path / "ob"))
    found = index.locate(["libcuda.so.1"], [root], elf.read_header(str(stub)),
                         preferred=[str(stub.parent)], cuda=_host(host))["libcuda.so.1"]
    assert found.path == str(compat.parent / "libcuda.so.1")
    maps = _loaded(tmp_path, stub, found.dir or "")
    assert str(compat) in maps and "stubs" not in maps


def test_a_compat_driver_is_chosen_when_asked_for(tmp_path: Path) -> None:
    stub, compat, host = _toolkit(tmp_path, "535.104.05")
    root = index.external_root(str(tmp_path / "ob"))
    asked = cuda.HostDriver(_host(host).version, allow_compat=True)
    found = index.locate(["libcuda.so.1"], [root], elf.read_header(str(stub)), cuda=asked)
    assert found["libcuda.so.1"].path == str(compat.parent / "libcuda.so.1")


def test_locate_lists_the_stub_and_the_compat_driver_with_why(tmp_path: Path) -> None:
    stub, compat, host = _toolkit(tmp_path, "535.104.05")
    root = index.external_root(str(tmp_path / "ob"))
    listed = index.copies(["libcuda.so.1"], [root], elf.read_header(str(stub)),
                          cuda=_host(host))["libcuda.so.1"]
    reasons = {c.path: c.reason or "" for c in listed}
    assert "CUDA stub" in reasons[str(stub.parent / "libcuda.so.1")]
    assert "compat driver 535.104.05" in reasons[str(compat.parent / "libcuda.so.1")]
    assert "550.54.14" in reasons[str(compat.parent / "libcuda.so.1")]


def test_the_stub_is_what_the_test_loads_unless_the_host_driver_is_given(
        tmp_path: Path) -> None:
    """The failure the rule prevents, through the real loader: the stub's directory on
    LD_LIBRARY_PATH is what a program maps; the host's directory gives the host's driver."""
    stub, _, host = _toolkit(tmp_path, "535.104.05")
    assert str(stub) in _loaded(tmp_path, stub, str(stub.parent))
    assert str(host) in _loaded(tmp_path, stub, str(host.parent))


# A program that calls cuInit through whatever libcuda.so.1 it loads, and prints the result.
_CALLS_CUINIT = r"""
#include <stdio.h>
int cuInit(void);
int main(void){ printf("cuInit %d\n", cuInit()); return 0; }
"""


def test_a_stub_copied_under_another_directory_is_known_by_its_code(tmp_path: Path) -> None:
    """A copy of the stub in ``lib64/driver`` is no directory named ``stubs``: what it
    holds says what it is. The real loader loads it, and cuInit returns 34."""
    top = tmp_path / "ob" / "external" / "cuda"
    copy = cuda_stub(top / "lib64" / "driver" / "libcuda.so.1")
    root = index.external_root(str(tmp_path / "ob"))
    found = index.locate(["libcuda.so.1"], [root], elf.read_header(str(copy)),
                         preferred=[str(copy.parent)],
                         cuda=cuda.HostDriver((580, 159, 4)))["libcuda.so.1"]
    assert found.path is None
    assert [(p.path, p.kind) for p in found.passed_over] == [(str(copy),
                                                              PassReason.CUDA_STUB)]
    app = cc(tmp_path / "app", "-L", str(copy.parent), "-l:libcuda.so.1", src=_CALLS_CUINIT)
    run = subprocess.run([str(app)], env={"LD_LIBRARY_PATH": str(copy.parent)},
                         capture_output=True, text=True, check=True)
    assert run.stdout == "cuInit 34\n"

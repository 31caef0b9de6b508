"""The repair never gives a CUDA stub or a compat driver the host cannot use, and what it
gives is what the real loader loads.

The test is linked against the toolkit's stub, as Bazel links it: a ``_solib_k8`` entry
leads to ``stubs/libcuda.so``, beside which the ``libcuda.so.1 -> libcuda.so`` link sits.
The host's driver version is an argument, not this machine's.
"""

from __future__ import annotations

import os
from pathlib import Path

from elfbuild import cuda_stub, lib, program
from modelhelp import resolver

from bazel_ldfix import elf, pathlist
from bazel_ldfix.bazel.testenv import TestEnvironment
from bazel_ldfix.loader import closure, cuda
from bazel_ldfix.loader.trace import run_trace
from bazel_ldfix.loader.verify import opened_path
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext, Setting
from bazel_ldfix.session import Session

HOST = cuda.HostDriver((550, 54, 14))


class Toolkit:
    def __init__(self, top: Path, compat_version: str) -> None:
        self.ob = top / "ob"
        cuda_top = self.ob / "external" / "cuda"
        self.stub = lib(cuda_top / "lib64" / "stubs" / "libcuda.so", soname="libcuda.so.1")
        os.symlink("libcuda.so", self.stub.parent / "libcuda.so.1")
        self.compat = lib(cuda_top / "compat" / f"libcuda.so.{compat_version}",
                          soname="libcuda.so.1")
        os.symlink(self.compat.name, self.compat.parent / "libcuda.so.1")
        solib = self.ob / "execroot" / "ws" / "bin" / "_solib_k8" / "cuda"
        solib.mkdir(parents=True)
        os.symlink(self.stub, solib / "libcuda.so")
        exe = program(self.ob / "execroot" / "ws" / "bin" / "t" / "gpu_test",
                      needs=[self.stub], runpath="$ORIGIN/../_solib_k8/cuda")
        self.inputs = [TestInput("//t:gpu_test", str(exe))]
        self.links = top / "links"
        self.links.mkdir(mode=0o700)

    def plan(self, host: cuda.HostDriver) -> Repair:
        env = TestEnvironment(pathlist.split(None), "the test's own value",
                              {t.label: None for t in self.inputs})
        models = Models()
        who = Session("/", {}, store_root=str(self.links.parent), driver=host)
        context = PlanContext(str(self.ob), resolver(models), models=models, session=who,
                              setting=Setting(no_cache=True))
        return plan_repair(self.inputs, env, context)


def _real_libcuda(executable: str, value: str | None) -> str | None:
    """The real path of the libcuda.so.1 the real loader loads for ``executable``."""
    info = elf.read_elf(executable)
    trace = run_trace(closure.interp_for(info), opened_path(executable, info),
                      library_path=value, inhibit_cache=False)
    return next((os.path.realpath(o.path) for o in trace.objects
                 if o.name == "libcuda.so.1" and o.path), None)


def test_the_stub_beside_the_test_library_and_an_older_compat_are_not_given(
        tmp_path: Path) -> None:
    kit = Toolkit(tmp_path, "535.104.05")
    r = kit.plan(HOST)
    assert r.unresolved == ("libcuda.so.1",)
    assert r.ld_library_path is None
    assert _real_libcuda(kit.inputs[0].executable, r.ld_library_path) is None


def test_a_compat_driver_newer_than_the_host_is_given_and_loaded(tmp_path: Path) -> None:
    kit = Toolkit(tmp_path, "560.28.03")
    r = kit.plan(HOST)
    assert r.unresolved == ()
    assert _real_libcuda(kit.inputs[0].executable, r.ld_library_path) == str(kit.compat)


def test_the_stub_is_never_linked_by_its_soname(tmp_path: Path) -> None:
    """Without the ``libcuda.so.1`` link, the stub is the only file whose SONAME is
    libcuda.so.1: the SONAME-link step must not make a link to it."""
    kit = Toolkit(tmp_path, "535.104.05")
    (kit.stub.parent / "libcuda.so.1").unlink()
    r = kit.plan(HOST)
    assert r.unresolved == ("libcuda.so.1",) and r.links == ()


def test_a_stub_under_another_directory_name_is_not_given(tmp_path: Path) -> None:
    """A copy of the stub in ``lib64/driver``, known by its code: `test` and `env` leave
    libcuda.so.1 unresolved rather than give it."""
    kit = Toolkit(tmp_path, "535.104.05")
    copy = cuda_stub(kit.ob / "external" / "cuda" / "lib64" / "driver" / "libcuda.so.1")
    r = kit.plan(HOST)
    assert r.unresolved == ("libcuda.so.1",) and r.ld_library_path is None
    (missing,) = r.missing
    assert str(copy) in [p.path for p in missing.passed_over]

"""`bazel-ldfix fix` never imports a CUDA stub or a compat driver the host cannot use, and
leaves the driver to the system, against a real Bazel 4.2.3 and the loader.

The toolkit is built with gcc: ``lib64/stubs/libcuda.so`` (SONAME ``libcuda.so.1``, every
function returns 34), its ``libcuda.so.1`` link, and ``compat/libcuda.so.580.95.05`` with
its links (a driver look-alike that needs libc; cuInit returns 0). A second toolkit holds
the same stub in ``lib64/driver``, a directory with no special name. Each import has its
own BUILD file, so each fix is judged alone:

- ``//t``: the import names the stub (``shared_library = "lib64/stubs/libcuda.so"``);
- ``//o``: it names the ``libcuda.so.1`` link, as `fix` used to write it;
- ``//m``: it names the stub in ``lib64/driver``;
- ``//c``: it names the compat driver's ``libcuda.so.1``;
- ``//b`` and ``//n``: the toolkit's stubs of other libraries, ``libcublas.so`` (with a
  ``libcublas.so.13`` link beside it) and ``libnvrtc.so`` (with none).

This host has no NVIDIA driver (the tests are skipped on one that has): no BUILD change
can give libcuda.so.1 here, and `fix` says so. Each test prints what cuInit returned, and
that is what is read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace
from elfbuild import cuda_driver, cuda_stub

from bazel_ldfix.errors import LdfixError
from bazel_ldfix.loader import ldcache


def _host_has_a_driver() -> bool:
    if os.path.exists("/proc/driver/nvidia/version"):
        return True
    try:
        return ldcache.read_cache("/etc/ld.so.cache").lookup("libcuda.so.1") is not None
    except (OSError, LdfixError):
        return False


pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH"),
              pytest.mark.skipif(_host_has_a_driver(), reason="this host has an NVIDIA "
                                 "driver: the tests are about a host without one")]

# Each package's test: the file its import names, and the function it calls.
PACKAGES = {"t": ("lib64/stubs/libcuda.so", "cuInit"),
            "o": ("lib64/stubs/libcuda.so.1", "cuInit"),
            "m": ("lib64/driver/libcuda.so", "cuInit"),
            "c": ("compat/libcuda.so.1", "cuInit"),
            "b": ("lib64/stubs/libcublas.so", "cublasCreate_v2"),
            "n": ("lib64/stubs/libnvrtc.so", "nvrtcVersion")}
TESTS = [f"//{p}:gpu_test" for p in PACKAGES]


def calls(function: str) -> str:
    return (f'#include <stdio.h>\nint {function}(void);\n'
            f'int main(void) {{ int r = {function}(); printf("{function} %d\\n", r); '
            "return r; }\n")


def toolkit(top: Path, stub_dir: str) -> Path:
    stub = cuda_stub(top / stub_dir / "libcuda.so")
    (stub.parent / "libcuda.so.1").symlink_to("libcuda.so")
    compat = cuda_driver(top / "compat" / "libcuda.so.580.95.05")
    (compat.parent / "libcuda.so.1").symlink_to(compat.name)
    (compat.parent / "libcuda.so").symlink_to("libcuda.so.1")
    blas = cuda_stub(top / stub_dir / "libcublas.so", soname="libcublas.so.13",
                     functions=["cublasCreate_v2"])
    (blas.parent / "libcublas.so.13").symlink_to(blas.name)
    cuda_stub(top / stub_dir / "libnvrtc.so", soname="libnvrtc.so.13",
              functions=["nvrtcVersion"])
    return top


@pytest.fixture(scope="module")
def kits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("cuda")
    paths = {"lib64/stubs": toolkit(top / "cuda", "lib64/stubs"),
             "lib64/driver": toolkit(top / "moved", "lib64/driver")}
    files = {"third_party/BUILD": "", "WORKSPACE": ""}
    for package, (value, function) in PACKAGES.items():
        path = paths["lib64/driver" if package == "m" else "lib64/stubs"]
        files["WORKSPACE"] += (f'new_local_repository(\n    name = "cuda_{package}",\n'
                               f'    path = "{path}",\n'
                               f'    build_file = "//third_party:cuda_{package}.BUILD",\n)\n')
        files[f"third_party/cuda_{package}.BUILD"] = (
            'package(default_visibility = ["//visibility:public"])\n\n'
            f'cc_import(\n    name = "cuda",\n    shared_library = "{value}",\n)\n')
        files[f"{package}/BUILD"] = ('cc_test(name = "gpu_test", srcs = ["g.c"], '
                                     f'deps = ["@cuda_{package}//:cuda"])\n')
        files[f"{package}/g.c"] = calls(function)
    host = cuda_driver(top / "host" / "libcuda.so.580.159.04")
    (host.parent / "libcuda.so.1").symlink_to(host.name)
    ws = make_workspace(top / "ws", files, env=clean_env())
    try:
        yield ws
    finally:
        ws.shutdown()


def build_file(ws: Workspace, package: str) -> Path:
    return ws.root / "third_party" / f"cuda_{package}.BUILD"


def test_the_stub_staged_under_the_driver_s_name_is_what_bazel_test_loads(
        kits: Workspace) -> None:
    """What `fix` used to write: the test loads the stub, and cuInit returns 34."""
    result = kits.bazel("test", "//o:gpu_test")
    assert result.returncode == 3, result.stderr[-3000:]
    assert "cuInit 34" in kits.test_log("o", "gpu_test")


def test_check_imports_no_stub_and_says_this_host_has_no_driver(kits: Workspace) -> None:
    result = kits.ldfix("fix", "--check", "//t:gpu_test")
    assert result.returncode == 1, result.stderr[-3000:]
    assert ('-    shared_library = "lib64/stubs/libcuda.so",\n'
            '+    interface_library = "lib64/stubs/libcuda.so",\n'
            "+    system_provided = 1,\n") in result.stdout
    assert "libcuda.so.1\"" not in result.stdout
    assert "# still missing: //t:gpu_test needs libcuda.so.1" in result.stdout
    assert "this host has no NVIDIA driver" in result.stdout
    assert "no BUILD change needed" not in result.stderr


def test_check_undoes_the_stub_that_an_earlier_fix_imported(kits: Workspace) -> None:
    """The test loads the stub, so it misses nothing; `fix --check` still fails."""
    result = kits.ldfix("fix", "--check", "//o:gpu_test")
    assert result.returncode == 1, result.stderr[-3000:]
    assert ('-    shared_library = "lib64/stubs/libcuda.so.1",\n'
            '+    interface_library = "lib64/stubs/libcuda.so",\n'
            "+    system_provided = 1,\n") in result.stdout
    assert "no BUILD change needed" not in result.stderr


def test_a_stub_under_another_directory_name_is_known_by_its_code(kits: Workspace) -> None:
    result = kits.ldfix("fix", "--check", "//m:gpu_test")
    assert result.returncode == 1, result.stderr[-3000:]
    assert '+    interface_library = "lib64/driver/libcuda.so",\n' in result.stdout
    assert "lib64/driver/libcuda.so.1" not in result.stdout
    env = kits.ldfix("env", "//m:gpu_test")
    assert "lib64/driver" not in env.stdout
    assert "a CUDA stub" in env.stderr


def test_a_compat_driver_is_imported_only_where_the_host_can_use_it(kits: Workspace) -> None:
    """No driver here: the compat driver is the system's business too. Asked for compat
    drivers (BAZEL_LDFIX_CUDA_COMPAT=1), the import is left as it is."""
    result = kits.ldfix("fix", "--check", "//c:gpu_test")
    assert result.returncode == 1, result.stderr[-3000:]
    assert ('-    shared_library = "compat/libcuda.so.1",\n'
            '+    interface_library = "compat/libcuda.so",\n') in result.stdout
    document = json.loads(kits.ldfix("fix", "--check", "--json", "//c:gpu_test").stdout)
    (edit,) = document["edits"]
    assert (edit["kind"], edit["old"], edit["new"]) == (
        "system", "compat/libcuda.so.1", "compat/libcuda.so")
    assert "a compat driver 580.95.05: this host has no NVIDIA driver" in edit["why"]
    asked = kits.ldfix("fix", "--check", "//c:gpu_test", env={"BAZEL_LDFIX_CUDA_COMPAT": "1"})
    assert asked.returncode == 0, asked.stdout + asked.stderr[-3000:]
    assert "no BUILD change needed" in asked.stderr


def test_the_stub_of_another_library_is_never_imported_nor_copied(kits: Workspace) -> None:
    """Not the driver's: the real library is to be imported, which `fix` cannot guess."""
    linked = kits.ldfix("fix", "--check", "//b:gpu_test")
    assert linked.returncode == 68, linked.stderr[-3000:]
    assert ("# cannot fix: @cuda_b//:cuda: lib64/stubs/libcublas.so.13 will not do: a CUDA "
            "stub, for linking only") in linked.stdout
    assert "+    shared_library" not in linked.stdout
    alone = kits.ldfix("fix", "--check", "//n:gpu_test")
    assert alone.returncode == 68, alone.stderr[-3000:]
    assert "no file named libnvrtc.so.13 is in its package; a copy of it will not do: a " \
        "CUDA stub" in alone.stdout
    assert "genrule" not in alone.stdout and "copy_file" not in alone.stdout


def test_the_written_change_is_analysed_and_stages_no_stub(kits: Workspace) -> None:
    stubbed = TESTS[:3]
    written = kits.ldfix("fix", "--write", *stubbed)
    assert written.returncode == 1, written.stderr[-3000:]
    assert "Bazel rejects" not in written.stderr
    for package in ("t", "o", "m"):
        text = build_file(kits, package).read_text()
        assert "system_provided = 1," in text and "shared_library" not in text
        assert f"bazel-ldfix: wrote {build_file(kits, package)}" in written.stderr
    check = kits.ldfix("fix", "--check", *stubbed)
    assert check.returncode == 1, check.stderr[-3000:]
    assert "--- a/" not in check.stdout
    assert check.stdout.count("this host has no NVIDIA driver") == 3
    assert "no BUILD change can give 3 needed libraries" in check.stderr
    # From a clean output tree, no test loads the stub: the loader looks for the host's
    # driver, and there is none.
    assert kits.bazel("clean").returncode == 0
    plain = kits.bazel("test", *stubbed)
    assert plain.returncode == 3, plain.stderr[-3000:]
    for package in ("t", "o", "m"):
        log = kits.test_log(package, "gpu_test")
        assert "libcuda.so.1: cannot open shared object file" in log
        assert "cuInit 34" not in log
    # The diagnosis of that run agrees with fix: the host lacks the driver, no BUILD
    # change gives it.
    told = kits.ldfix("diagnose")
    assert "which the system provides: this host has none" in told.stdout, told.stdout
    assert " fix " not in told.stdout


def test_with_a_driver_given_the_written_tests_load_it(kits: Workspace) -> None:
    """A stand-in for the host's driver, given through the environment: the import stages
    nothing that comes before it."""
    host = kits.root.parent / "host"
    result = kits.bazel("test", f"--test_env=LD_LIBRARY_PATH={host}", *TESTS[:3])
    assert result.returncode == 0, result.stderr[-3000:]
    for package in ("t", "o", "m"):
        assert "cuInit 0" in kits.test_log(package, "gpu_test")

"""A ``_solib_`` directory whose name rules_cc hashed, on recorded input.

bazelbuild/rules_cc ``cc/private/link/dynamic_library_symlink.bzl``, ``_get_mangled_name``:
the directory is ``maybe_hash_preserve_extension(escaped rule path + "__" + escaped library
dir)``; a name longer than a file name may be (255) becomes the SHA-256 of it in hex, with
what follows its last "." kept as an extension. Such a name does not decode; the import is
found from the staged symlink's target and the repository's BUILD file, and checked by
hashing the candidate label again. The loader's message comes from a real run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnose_fixtures import LOG_HEADER, run
from elfbuild import cc

from bazel_ldfix.bazel import solib
from bazel_ldfix.diagnosis import logs, report

REPO = "+nvidia_tensorrt_extension+nvidia_tensorrt_runtime_for_cuda_12_linux_x86_64"
LIB_DIR = ("targets/x86_64-linux/lib/stubs_and_runtime_libraries_for_inference_"
           "with_a_very_long_directory_name_as_vendors_ship_them")
NAME = "nvinfer_runtime_shared_library"


def hashed_layout(tmp: Path, build: str) -> tuple[Path, str]:
    """A failed //t:x_test linking @@REPO//:NAME through a hashed _solib_ directory."""
    ob = tmp / "ob"
    cfg = ob / "execroot" / "_main" / "bazel-out" / "k8-fastbuild"
    repo = ob / "external" / REPO
    sdk = repo / LIB_DIR
    real = cc(sdk / "libnvinfer.so.10", "-shared", "-Wl,-soname,libnvinfer.so.10",
              src="int nv_value(void){return 10;}")
    (sdk / "libnvinfer.so").symlink_to(real.name)
    (repo / "BUILD.bazel").write_text(build)
    escaped = (solib.escaped_path(f"_@@{REPO}//:{NAME}") + "__"
               + solib.escaped_path("_" + LIB_DIR))
    assert len(escaped) > 255
    hashed = solib.hashed_name(escaped)
    solib_dir = cfg / "bin" / "_solib_k8" / hashed
    solib_dir.mkdir(parents=True)
    (solib_dir / "libnvinfer.so").symlink_to(sdk / "libnvinfer.so")
    exe = cc(cfg / "bin" / "t" / "x_test", "-L", str(solib_dir), "-l:libnvinfer.so",
             "-Wl,--enable-new-dtags", f"-Wl,-rpath,$ORIGIN/../_solib_k8/{hashed}",
             src="int nv_value(void); int main(void){return nv_value() != 10;}")
    result = run([str(exe)])
    assert result.returncode == 127, result.lines
    log = cfg / "testlogs" / "t" / "x_test" / "test.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join([h.format(label="//t:x_test") for h in LOG_HEADER]
                             + result.lines) + "\n")
    (log.parent / "test.xml").write_text('<testsuites><testsuite tests="1" errors="1">')
    return log, hashed


def test_the_hash_is_sha256_hex_and_keeps_an_extension() -> None:
    assert solib.hashed_name("short") == "short"
    long = "_U" + "x" * 300 + ".dir"
    hashed = solib.hashed_name(long)
    assert len(hashed) == 64 + len(".dir") and hashed.endswith(".dir")


def test_a_hashed_directory_names_its_import_verified_by_the_hash(tmp_path: Path) -> None:
    build = (f'cc_import(name = "other", shared_library = "{LIB_DIR}/libother.so")\n'
             f'cc_import(\n    name = "{NAME}",\n'
             f'    shared_library = "{LIB_DIR}/libnvinfer.so",\n)\n')
    log, hashed = hashed_layout(tmp_path, build)
    assert solib.decode_solib_dir(hashed) is None
    (finding,) = report.diagnose(logs.given([str(log)])).findings
    build_fix = finding.fix.build
    assert build_fix is not None
    assert f"@@{REPO}//:{NAME} (a cc_import" in build_fix
    assert f'shared_library = "{LIB_DIR}/libnvinfer.so.10"' in build_fix
    assert "did not lead back" not in build_fix       # verified


def test_without_a_matching_build_file_the_label_is_a_marked_guess(tmp_path: Path) -> None:
    log, _ = hashed_layout(tmp_path, "# generated elsewhere\n")
    (finding,) = report.diagnose(logs.given([str(log)])).findings
    build_fix = finding.fix.build
    assert build_fix is not None
    assert f"@@{REPO}//:nvinfer (a cc_import" in build_fix
    assert "check it with `bazel query`" in build_fix


# -- names that decode ------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "decoded"), [
    # seen on Bazel 4.2.3
    ("_U@xsdk_S_S_Cxdemo___Ulib", ("@xsdk//:xdemo", "lib")),
    ("_U@demo_Utensorrt_S_S_Cdemoinfer___Ulib", ("@demo_tensorrt//:demoinfer", "lib")),
    ("_U_S_St_Clocal_Uimp___Ut_Ssub_Udir", ("//t:local_imp", "t/sub_dir")),
    ("_U_S_Sdeep_Spkg_Ua_Cmy_Uimp-x___Udeep_Spkg_Ua_Sa_Ub_Sc",
     ("//deep/pkg_a:my_imp-x", "deep/pkg_a/a_b/c")),
    ("_U@xsdk_Uv_S_S_Cxdemo_Uif___Ulib", ("@xsdk_v//:xdemo_if", "lib")),
    # newer Bazel escapes @ too
    ("_U_A_Axsdk_S_S_Cxdemo___Ulib", ("@@xsdk//:xdemo", "lib")),
    # a library at the repository's root
    ("_U@r_S_S_Cx___U", ("@r//:x", "")),
])
def test_solib_directory_names_decode_to_the_cc_import(name: str,
                                                       decoded: tuple[str, str]) -> None:
    assert solib.decode_solib_dir(name) == decoded


@pytest.mark.parametrize("name", ["libfoo", "_solib_k8", "_Ux_Zy", "_U@x_S_S_Cy",
                                  "_U@x_S_S_Cy___Ua___Ub"])
def test_other_names_are_not_decoded(name: str) -> None:
    assert solib.decode_solib_dir(name) is None


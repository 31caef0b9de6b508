"""Canonical repository names of Bazel 7 and 8 printed as the main repository writes them.

The layout is bzlmod's (the main repository's directory is ``_main``; an SDK repository
made by a module extension is ``+nvsdk_ext+nvsdk`` on Bazel 8, ``_main~nvsdk_ext~nvsdk`` on
Bazel 7); the ``_solib_k8`` directory name is escaped as Bazel does (``Actions.java``,
PATH_ESCAPER: ``_`` -> ``_U``, ``/`` -> ``_S``, ``\\`` -> ``_B``, ``:`` -> ``_C``, ``@`` ->
``_A``); the ``_repo_mapping`` file is in the form of ``RepoMappingManifestAction.java``
(``"%s,%s,%s\\n"``: source canonical name, apparent name, target directory; the main
repository's canonical name is empty). The loader's message comes from running the test
program for real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnose_fixtures import LOG_HEADER, run
from elfbuild import cc

from bazel_ldfix.bazel import runfiles, solib
from bazel_ldfix.diagnosis import logs, report


def escape(text: str) -> str:
    return "".join({"_": "_U", "/": "_S", "\\": "_B", ":": "_C", "@": "_A"}.get(c, c)
                   for c in text)


def bzlmod_layout(tmp: Path, canonical: str, mapping: str) -> Path:
    """A failed //t:x_test linking @@<canonical>//:nvinfer; the path of its test.log."""
    ob = tmp / "ob"
    execroot = ob / "execroot" / "_main"
    cfg = execroot / "bazel-out" / "k8-fastbuild"
    sdk = ob / "external" / canonical / "lib"
    real = cc(sdk / "libnvinfer.so.11", "-shared", "-Wl,-soname,libnvinfer.so.11",
              src="int nv_value(void){return 11;}")
    (sdk / "libnvinfer.so").symlink_to(real.name)
    solib_name = escape(f"_@@{canonical}//:nvinfer") + "__" + escape("_lib")
    solib = cfg / "bin" / "_solib_k8" / solib_name
    solib.mkdir(parents=True)
    (solib / "libnvinfer.so").symlink_to(sdk / "libnvinfer.so")
    exe = cc(cfg / "bin" / "t" / "x_test", "-L", str(solib), "-l:libnvinfer.so",
             "-Wl,--enable-new-dtags", f"-Wl,-rpath,$ORIGIN/../_solib_k8/{solib_name}",
             src="int nv_value(void); int main(void){return nv_value() != 11;}")
    tree = Path(str(exe) + ".runfiles")
    (tree / "_main" / "t").mkdir(parents=True)
    (tree / "_main" / "t" / "x_test").symlink_to(exe)
    (tree / "_repo_mapping").write_text(mapping)
    # The link recorded the SONAME, libnvinfer.so.11; the _solib_ directory stages only
    # libnvinfer.so: the loader stops.
    result = run([str(tree / "_main" / "t" / "x_test")])
    assert result.returncode == 127, result.lines
    log = cfg / "testlogs" / "t" / "x_test" / "test.log"
    log.parent.mkdir(parents=True)
    header = [h.format(label="//t:x_test") for h in LOG_HEADER]
    log.write_text("\n".join(header + result.lines) + "\n")
    (log.parent / "test.xml").write_text('<testsuites><testsuite tests="1" errors="1">')
    return log


BAZEL8 = ("+nvsdk_ext+nvsdk",
          ",my_project,_main\n"
          ",nvsdk,+nvsdk_ext+nvsdk\n"
          "+nvsdk_ext+nvsdk,nvsdk,+nvsdk_ext+nvsdk\n")
BAZEL7 = ("_main~nvsdk_ext~nvsdk",
          ",my_project,_main\n"
          ",nvsdk,_main~nvsdk_ext~nvsdk\n")


@pytest.mark.parametrize(("canonical", "mapping"), [BAZEL8, BAZEL7], ids=["bazel8", "bazel7"])
def test_the_build_fix_names_the_import_by_its_apparent_name(tmp_path: Path, canonical: str,
                                                             mapping: str) -> None:
    log = bzlmod_layout(tmp_path, canonical, mapping)
    (finding,) = report.diagnose(logs.given([str(log)])).findings
    assert finding.soname == "libnvinfer.so.11"
    build = finding.fix.build
    assert build is not None
    assert "@nvsdk//:nvinfer (a cc_import" in build
    assert canonical + "//" not in build
    assert 'shared_library = "lib/libnvinfer.so.11"' in build


def test_without_a_mapping_the_canonical_label_is_printed(tmp_path: Path) -> None:
    log = bzlmod_layout(tmp_path, "+nvsdk_ext+nvsdk", "")
    (finding,) = report.diagnose(logs.given([str(log)])).findings
    assert finding.fix.build is not None
    assert "@@+nvsdk_ext+nvsdk//:nvinfer (a cc_import" in finding.fix.build


def test_the_mapping_file() -> None:
    mapping = runfiles.parse_repo_mapping(
        ",my_project,_main\n"
        ",nvsdk,+nvsdk_ext+nvsdk\n"
        ",cuda,rules_cuda++toolchain+local_cuda\n"
        "+nvsdk_ext+nvsdk,nvsdk,+nvsdk_ext+nvsdk\n"      # another repository's view
        "+other+*,x,+other+x\n"                           # compact form, not the main's
        "broken line\n")
    assert mapping.label("@@+nvsdk_ext+nvsdk//:nvinfer") == "@nvsdk//:nvinfer"
    assert mapping.label("@@rules_cuda++toolchain+local_cuda//lib:cudart") == "@cuda//lib:cudart"
    assert mapping.label("@@_main//t:x") == "//t:x"
    assert mapping.label("@@+other+x//:y") == "@@+other+x//:y"      # not visible from main
    assert mapping.label("//t:x") == "//t:x"


def test_the_decoder_reads_bazel_8s_solib_names() -> None:
    name = escape("_@@+nvsdk_ext+nvsdk//:nvinfer") + "__" + escape("_lib")
    assert name == "_U_A_A+nvsdk_Uext+nvsdk_S_S_Cnvinfer___Ulib"
    assert solib.decode_solib_dir(name) == ("@@+nvsdk_ext+nvsdk//:nvinfer", "lib")

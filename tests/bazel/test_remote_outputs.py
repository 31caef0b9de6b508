"""Outputs a remote cache holds, on recorded input: BEP files named by bytestream URIs,
and what a test stages read from its runfiles manifest when there is no runfiles tree.

The real run, Bazel 4.2.3 with a loopback HTTP cache, is test_bazel_remote_cache.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from diagnose_fixtures import fake_bazel
from elfbuild import cc

from bazel_ldfix.bazel import bep, runfiles
from bazel_ldfix.bazel.targets import parse_bep
from bazel_ldfix.bazel.testenv import environment_of
from bazel_ldfix.bazel.version import BazelVersion
from bazel_ldfix.loader.closure import host_of, interp_for
from bazel_ldfix.loader.search import Loader, Loaders
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext

pytestmark = pytest.mark.remote

SHA = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"


def bazel7_events(exec_root: str, *, prefix: list[str] | None = None,
                  name: str = "t/x_test") -> list[str]:
    """A Bazel 7 test build's events with ``--remote_build_event_upload=minimal`` (the
    default): every File is a ``bytestream://`` URI with ``pathPrefix`` and ``name``
    (build_event_stream.proto, message File: name, uri, path_prefix, digest, length), the
    outputs in the ``default`` output group's named sets (``--legacy_important_outputs``
    is false from Bazel 7: no ``importantOutput``)."""
    file = {"name": name, "uri": f"bytestream://cache.example:443/blobs/{SHA}/8216",
            "pathPrefix": prefix if prefix is not None else ["bazel-out", "k8-fastbuild",
                                                              "bin"],
            "digest": SHA, "length": "8216"}
    events = [
        {"id": {"started": {}}, "started": {"buildToolVersion": "7.4.1",
                                             "workspaceDirectory": "/ws"}},
        {"id": {"workspace": {}}, "workspaceInfo": {"localExecRoot": exec_root}},
        {"id": {"targetConfigured": {"label": "//t:x_test"}},
         "configured": {"targetKind": "cc_test rule", "testSize": "MEDIUM"}},
        {"id": {"namedSet": {"id": "0"}}, "namedSetOfFiles": {"files": [file]}},
        {"id": {"targetCompleted": {"label": "//t:x_test", "configuration": {"id": "abc"}}},
         "completed": {"success": True, "outputGroup": [
             {"name": "default", "fileSets": [{"id": "0"}]}]}},
        {"id": {"buildFinished": {}}, "finished": {"exitCode": {"name": "SUCCESS"}}},
    ]
    return [json.dumps(e) for e in events]


def test_a_bytestream_uri_gives_the_path_from_path_prefix_and_name(tmp_path: Path) -> None:
    root = str(tmp_path / "execroot" / "_main")
    events = parse_bep(bazel7_events(root))
    (test,) = events.tests
    # Not on disk (the cache did not download it): named all the same, for the caller to
    # fetch or to report.
    assert test.executable == f"{root}/bazel-out/k8-fastbuild/bin/t/x_test"
    assert events.version.label == "7.4.1"


def test_a_path_prefix_that_leaves_the_exec_root_is_not_followed(tmp_path: Path) -> None:
    root = str(tmp_path / "execroot" / "_main")
    for prefix, name in ((["..", "..", "etc"], "x_test"), (["/etc"], "x_test"),
                         (["bazel-out"], "../../x_test")):
        events = parse_bep(bazel7_events(root, prefix=prefix, name=name))
        assert events.tests == ()


def test_a_file_uri_is_read_as_before(tmp_path: Path) -> None:
    exe = cc(tmp_path / "bin" / "x_test", src="int main(void){return 0;}")
    file = {"name": "x_test", "uri": f"file://{exe}"}
    assert bep.file_path(bep.File(file["uri"], file["name"]), None) == str(exe)


# SourceManifestAction.java, ManifestType.SOURCE_SYMLINKS: "<root-relative path> <target>",
# the trailing space kept for an empty file; newer Bazel escapes a path with a space,
# newline or backslash (\s, \n, \b) on a line that begins with a space.
def test_the_runfiles_manifest_in_both_forms() -> None:
    text = ("_main/_solib_k8/_U_A_Axsdk_S_S_Cxdemo___Ulib/libxdemo.so "
            "/ob/execroot/_main/bazel-out/k8-fastbuild/bin/_solib_k8/libxdemo.so\n"
            "_main/t/__init__.py \n"
            " _main/t/with\\sspace.so /ob/a\\sb/with\\sspace.so\n"
            " _main/t/back\\bslash /ob/x\\by\n")
    entries = list(runfiles.parse_manifest(text))
    assert entries == [
        runfiles.Entry("_main/_solib_k8/_U_A_Axsdk_S_S_Cxdemo___Ulib/libxdemo.so",
                       "/ob/execroot/_main/bazel-out/k8-fastbuild/bin/_solib_k8/libxdemo.so"),
        runfiles.Entry("_main/t/__init__.py", None),
        runfiles.Entry("_main/t/with space.so", "/ob/a b/with space.so"),
        runfiles.Entry("_main/t/back\\slash", "/ob/x\\y"),
    ]


def test_without_a_runfiles_tree_the_manifest_leads_to_the_staged_copy(tmp_path: Path) -> None:
    # fake_bazel: //t:app_test links @xsdk's libxdemo.so (SONAME libxdemo.so.11) through
    # its _solib_k8 symlink. An older copy at a shorter path would win a plain walk.
    fake = fake_bazel(tmp_path, command_log=False)
    decoy = cc(fake.output_base / "external" / "o" / "libxdemo.so.11", "-shared",
               "-Wl,-soname,libxdemo.so.11", src="int xdemo_value(void){return 10;}")
    runfiles_dir = Path(str(fake.executable) + ".runfiles")
    shutil.rmtree(runfiles_dir)             # --nobuild_runfile_links
    solib = fake.bin / "_solib_k8" / "_U@xsdk_S_S_Cxdemo___Ulib" / "libxdemo.so"
    Path(str(fake.executable) + ".runfiles_manifest").write_text(
        f"ws/_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib/libxdemo.so {solib}\n"
        f"ws/t/app_test {fake.executable}\n")
    env = environment_of([], {}, {}, ["//t:app_test"], BazelVersion("7.4.1"))

    def planned() -> Repair:
        loaders = Loaders(lambda info, e: Loader(host_of(interp_for(info)), e),
                          lambda info: None)
        return plan_repair([TestInput("//t:app_test", str(fake.executable))], env,
                           PlanContext(str(fake.output_base), loaders))

    # The executable's RUNPATH names the _solib_ directory relative to its real path, so
    # even so the walk would be asked; the manifest's entry makes the staged copy first.
    (missing,) = planned().missing
    assert missing.dir == str(fake.sdk_lib)
    assert str(decoy.parent) not in (missing.dir or "")

    # A staged shared object that is not on disk is a note, not an error.
    Path(str(fake.executable) + ".runfiles_manifest").write_text(
        f"ws/_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib/libxdemo.so {solib}\n"
        f"ws/t/libplugin.so {fake.bin / 't' / 'libplugin.so'}\n")
    result = planned()
    assert [m.dir for m in result.missing] == [str(fake.sdk_lib)]
    assert result.notes == (f"//t:app_test: cannot read {fake.bin / 't' / 'libplugin.so'}: "
                            "not on disk (a remote cache that did not download it?)",)

"""A real Bazel 4.2.3 with a remote cache on the loopback interface, after `bazel clean`.

With ``--remote_download_minimal`` nothing a remote cache holds is downloaded: after a
`bazel clean`, the build step leaves the test executable remote, writes no runfiles tree
(the flag implies ``--nobuild_runfile_links``), and only the runfiles manifest and the
``_solib_`` symlinks (made locally) are on disk. An older copy of the SDK sits at a shorter
path under output_base/external, so a walk without the test's own staging picks it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, import_repository, make_workspace, sdk
from httpcache import http_cache

pytestmark = [pytest.mark.remote, pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

CHECKS_VALUE = """
int xdemo_value(void);
int main(void) { return xdemo_value() == 11 ? 0 : 1; }
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("remote")
    sdk(top / "sdks" / "xsdk", "xdemo", "11")
    # The same soname, an older build (it answers 10): the wrong library.
    sdk(top / "sdks" / "o", "xdemo", "11", src="int xdemo_value(void){return 10;}")
    files = {
        "WORKSPACE": import_repository("xsdk", top / "sdks" / "xsdk", "xdemo")
        + import_repository("o", top / "sdks" / "o", "xdemo"),
        "t/BUILD": 'cc_test(name = "x_test", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])\n',
        "t/x.c": CHECKS_VALUE,
    }
    workspace = make_workspace(top / "ws", files, env=clean_env())
    yield workspace
    workspace.shutdown()


def test_after_bazel_clean_with_minimal_downloads_the_right_copy_is_chosen(
        ws: Workspace) -> None:
    with http_cache() as (url, store):
        cache = f"--remote_cache={url}"
        filled = ws.bazel("build", cache, "//t:x_test", "@o//:xdemo")
        assert filled.returncode == 0, filled.stderr
        assert store.puts > 0
        assert ws.bazel("clean").returncode == 0
        executable = ws.output_base / "execroot/ws/bazel-out/k8-fastbuild/bin/t/x_test"
        assert not executable.exists()

        # The shorter path ranks first in output_base/external: only the test's own staging
        # (its runfiles manifest and _solib_ symlink) can lead to the right copy.
        located = ws.ldfix("locate", "--json", "--output-base", str(ws.output_base),
                           "libxdemo.so.11")
        ranked = [c["dir"] for c in json.loads(located.stdout)["libxdemo.so.11"]]
        assert ranked[0].endswith("/external/o/lib"), ranked

        hits_before = store.hits["ac"]
        shown = ws.ldfix("env", "--format", "json", cache, "--remote_download_minimal",
                         "//t:x_test")
        assert shown.returncode == 0, shown.stderr
        assert store.hits["ac"] > hits_before      # the outputs came from the cache
        external = ws.output_base / "external"
        (missing,) = json.loads(shown.stdout)["missing"]
        assert missing["dir"] == f"{external}/xsdk/lib"
        # No runfiles tree: what the test stages was read from its runfiles manifest.
        assert executable.is_file()
        assert not Path(str(executable) + ".runfiles").exists()
        assert Path(str(executable) + ".runfiles_manifest").is_file()

        result = ws.ldfix("test", cache, "--remote_download_minimal", "//t:x_test")
        assert result.returncode == 0, result.stderr
        # The output_base is written once, then $OUTPUT_BASE.
        assert f"$OUTPUT_BASE is {os.path.dirname(external)}" in result.stderr
        assert "libxdemo.so.11 is in $OUTPUT_BASE/external/xsdk/lib" in result.stderr
        assert f"{external}/o/lib" not in result.stderr
        assert "$OUTPUT_BASE/external/o/lib" not in result.stderr
        assert "PASSED" in result.stdout + result.stderr


def test_an_executable_that_stays_remote_is_a_note_and_bazel_test_still_runs(
        ws: Workspace, tmp_path: Path) -> None:
    # The download step fails (a wrapper around the real Bazel makes every `bazel build`
    # exit 2): the executable stays remote, nothing can be read, the user's own
    # `bazel test` still runs, and its exit code is the tool's.
    assert BAZEL is not None
    wrapper = tmp_path / "bazel"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = build ]; then exit 2; fi\n'
        f'exec {BAZEL} "$@"\n')
    wrapper.chmod(0o755)
    with http_cache() as (url, _store):
        cache = f"--remote_cache={url}"
        # A new, empty cache: clean first, so that the build runs and fills it.
        assert ws.bazel("clean").returncode == 0
        assert ws.bazel("build", cache, "//t:x_test").returncode == 0
        assert ws.bazel("clean").returncode == 0
        result = ws.ldfix("test", "--bazel", str(wrapper), cache, "--remote_download_minimal",
                          "//t:x_test")
    assert "cannot read its executable" in result.stderr
    assert "failed with exit code 2" in result.stderr
    assert "no test could be examined" in result.stderr
    # Bazel ran the test (unrepaired, so it fails in the loader): exit code 3, not 4.
    assert result.returncode == 3, result.stderr
    assert "libxdemo.so.11: cannot open shared object file" in ws.test_log("t", "x_test")

"""`fix --write` on a `build_file_content` in each form a person writes it, on a real
Bazel 4.2.3: the edit changes only the bytes it means to change, and Bazel reads the
result (its analysis, then a plain `bazel test` that passes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bazelws import BAZEL, clean_env, make_workspace, sdk

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


def content(library: str) -> str:
    return ('package(default_visibility = ["//visibility:public"])\n'
            f'cc_import(name = "{library}", shared_library = "lib/lib{library}.so")\n')


def main_src(name: str, value: int) -> str:
    return f"int {name}_value(void);\nint main(void) {{ return {name}_value() == {value} " \
           "? 0 : 1; }\n"


def test_each_form_of_build_file_content_keeps_its_form_and_bazel_reads_it(
        tmp_path: Path) -> None:
    sdks = tmp_path / "sdks"
    forms = {   # repository: (library, soversion, the literal as written)
        # Raw, as a person writes one that holds a backslash.
        "rsdk": ("rdemo", "3", 'r"""\n# printf "a\\n"\n' + content("rdemo") + '"""'),
        "ssdk": ("sdemo", "4", repr(content("sdemo"))),     # '...\n...', one line
        "tsdk": ("tdemo", "5", "'''" + content("tdemo") + "'''"),
        "dsdk": ("ddemo", "6", '"""\n' + content("ddemo") + '"""'),
    }
    workspace = ""
    files = {}
    for repo, (library, soversion, literal) in forms.items():
        sdk(sdks / repo, library, soversion)
        workspace += (f'new_local_repository(\n    name = "{repo}",\n'
                      f'    path = "{sdks / repo}",\n    build_file_content = {literal},\n)\n')
        files[f"t/{library}.c"] = main_src(library, int(soversion))
    assert "build_file_content = 'package(" in workspace    # a one-line, single-quoted one
    assert '# printf "a\\n"' in workspace
    files["WORKSPACE"] = workspace
    files["t/BUILD"] = "".join(
        f'cc_test(name = "needs_{library[0]}", srcs = ["{library}.c"], '
        f'deps = ["@{repo}//:{library}"])\n' for repo, (library, _, _) in forms.items())
    ws = make_workspace(tmp_path / "ws", files, env=clean_env())
    try:
        labels = [f"//t:needs_{library[0]}" for library, _, _ in forms.values()]
        before = (ws.root / "WORKSPACE").read_text()
        result = subprocess.run([sys.executable, "-m", "bazel_ldfix", "fix", "--write",
                                 "--verify", *labels], cwd=ws.root, env=ws.env,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        expected = before
        for library, soversion, _ in forms.values():
            expected = expected.replace(f"lib/lib{library}.so",
                                        f"lib/lib{library}.so.{soversion}")
        assert (ws.root / "WORKSPACE").read_text() == expected
        assert "bazel-ldfix: verified: plain `bazel test` passes with the change" in \
            result.stderr
    finally:
        ws.shutdown()

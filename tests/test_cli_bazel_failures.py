"""What `env` and `test` say when Bazel itself cannot help: paths a real Bazel cannot be
made to take on demand (not installed, crashing), so a stand-in script plays it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("BAZEL", None)
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def fake_bazel(tmp_path: Path, script: str) -> Path:
    (tmp_path / "WORKSPACE").touch()
    path = tmp_path / "bazel"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def test_bazel_not_installed(tmp_path: Path) -> None:
    (tmp_path / "WORKSPACE").touch()
    for command in ("env", "test"):
        result = run(command, "--bazel", str(tmp_path / "nope"), "//...", cwd=tmp_path)
        assert result.returncode == 65
        assert result.stderr.splitlines() == [
            f"error: cannot run {tmp_path / 'nope'}: No such file or directory"]


def test_a_crashing_bazel_is_reported_with_its_exit_code_and_last_words(tmp_path: Path) -> None:
    bazel = fake_bazel(tmp_path, 'echo "FATAL: the server crashed" >&2\nexit 37\n')
    result = run("env", "--bazel", str(bazel), "//...", cwd=tmp_path)
    assert result.returncode == 66
    assert result.stderr.splitlines() == [
        "FATAL: the server crashed",  # Bazel's own output, passed through as it came
        "error: the build step of `bazel test` failed (exit code 37); see Bazel's output above"]
    # `test` exits with Bazel's own code.
    assert run("test", "--bazel", str(bazel), "//...", cwd=tmp_path).returncode == 37
    # A query step that fails shows the command, its exit code and its last words.
    info = fake_bazel(tmp_path, 'case "$1" in info) echo "FATAL: no server" >&2; exit 37;; '
                                'esac\nexit 0\n')
    result = run("env", "--bazel", str(info), "//...", cwd=tmp_path)
    assert result.returncode == 66
    assert result.stderr.splitlines() == [
        f"error: `{info} info output_base` failed (exit code 37)", "    FATAL: no server"]


def test_an_output_base_that_bazel_names_but_does_not_exist(tmp_path: Path) -> None:
    # A build step that leaves no events, and an `info` that names a directory not there.
    bazel = fake_bazel(tmp_path, f'case "$1" in info) echo "{tmp_path}/gone";; esac\n')
    result = run("test", "--bazel", str(bazel), "//...", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: output_base {tmp_path}/gone does not exist"


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    result = run("env", "--format", "yaml", "//...", cwd=tmp_path)
    assert result.returncode == 2
    assert "Invalid value for '--format'" in result.stderr
    assert run("frobnicate", cwd=tmp_path).returncode == 2

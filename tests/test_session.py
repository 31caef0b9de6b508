"""Where the user is: the installed command's directory, or the one `bazel run` names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from elfbuild import lib, program

from bazel_ldfix.session import of_process as from_environ


def test_installed_command_is_where_the_process_is() -> None:
    inv = from_environ({"RUNFILES_DIR": "/r", "HOME": "/h"}, "/here")
    assert inv.cwd == "/here" and inv.workspace is None and not inv.by_bazel_run
    # Not started by `bazel run`: the environment is the user's own, untouched.
    assert dict(inv.env) == {"RUNFILES_DIR": "/r", "HOME": "/h"}


def test_bazel_run_puts_the_user_in_build_working_directory() -> None:
    environ = {"BUILD_WORKING_DIRECTORY": "/ws/sub", "BUILD_WORKSPACE_DIRECTORY": "/ws",
               "RUNFILES_DIR": "/r", "RUNFILES_MANIFEST_FILE": "/r/MANIFEST",
               "JAVA_RUNFILES": "/r", "PYTHON_RUNFILES": "/r", "PATH": "/usr/bin"}
    inv = from_environ(environ, "/out/bin/bazel-ldfix.runfiles/bazel_ldfix")
    assert inv.cwd == "/ws/sub" and inv.workspace == "/ws" and inv.by_bazel_run
    # The tool's own runfiles are not the user's tests' business.
    assert dict(inv.env) == {"BUILD_WORKING_DIRECTORY": "/ws/sub",
                             "BUILD_WORKSPACE_DIRECTORY": "/ws", "PATH": "/usr/bin"}


def test_only_the_workspace_variable_still_means_bazel_run() -> None:
    inv = from_environ({"BUILD_WORKSPACE_DIRECTORY": "/ws"}, "/elsewhere")
    assert inv.cwd == "/ws" and inv.workspace == "/ws"


def test_an_empty_variable_is_not_a_directory() -> None:
    inv = from_environ({"BUILD_WORKING_DIRECTORY": "", "BUILD_WORKSPACE_DIRECTORY": ""}, "/p")
    assert inv.cwd == "/p" and not inv.by_bazel_run


def test_relative_paths_are_read_in_build_working_directory(tmp_path: Path) -> None:
    """As under `bazel run`: the process starts elsewhere, the user's paths are relative."""
    x = lib(tmp_path / "user" / "x" / "libx.so.1")
    program(tmp_path / "user" / "bin" / "app", needs=[x])
    elsewhere = tmp_path / "runfiles"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(BUILD_WORKING_DIRECTORY=str(tmp_path / "user"),
               BUILD_WORKSPACE_DIRECTORY=str(tmp_path / "user"))
    result = subprocess.run(
        [sys.executable, "-m", "bazel_ldfix", "resolve", "--library-path", "x", "bin/app"],
        cwd=elsewhere, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == "bin/app"
    assert "libx.so.1 [LD_LIBRARY_PATH] x/libx.so.1" in result.stdout

    # The same command without the variables reads the paths where the process is.
    del env["BUILD_WORKING_DIRECTORY"], env["BUILD_WORKSPACE_DIRECTORY"]
    result = subprocess.run(
        [sys.executable, "-m", "bazel_ldfix", "resolve", "bin/app"],
        cwd=elsewhere, env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "bin/app" in result.stderr

"""One session per run: what every command takes from where the user is, and the exit code a
command returns, through `main` and through click's own main alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from elfbuild import lib, program
from terminal import on_terminal

from bazel_ldfix import cli
from bazel_ldfix.cli.process import prog_of
from bazel_ldfix.session import BazelChoice, LoaderChoice, Session, of_process


def session_under_bazel_run(user_dir: Path, **env: str) -> Session:
    # `bazel run` starts the tool elsewhere (its runfiles tree) and names the user's directory.
    return of_process({"BUILD_WORKING_DIRECTORY": str(user_dir), **env}, "/nowhere/runfiles")


def test_relative_paths_are_the_users_not_the_processs(tmp_path: Path) -> None:
    session = session_under_bazel_run(tmp_path, LD_LIBRARY_PATH="/opt/a")
    options = session.options(LoaderChoice(None, False, "sysroot", "tools/ld.so"))
    assert (options.root, options.cwd, options.loader) == (
        str(tmp_path / "sysroot"), str(tmp_path), str(tmp_path / "tools" / "ld.so"))
    assert options.library_path == "/opt/a"        # the user's LD_LIBRARY_PATH
    assert session.loaders("tools/ld.so").loader == str(tmp_path / "tools" / "ld.so")
    assert session.loaders(None).loader is None     # this machine's own
    bazel = session.bazel()
    assert bazel.cwd == str(tmp_path)               # Bazel runs where the user is


def test_library_path_option_wins_over_the_environment(tmp_path: Path) -> None:
    session = session_under_bazel_run(tmp_path, LD_LIBRARY_PATH="/opt/a")
    assert session.options(LoaderChoice("/opt/b", True)).library_path == "/opt/b"
    assert session.options(LoaderChoice("", True)).library_path == ""   # given empty: empty


def test_bazel_is_the_option_then_the_environment_then_bazel(tmp_path: Path) -> None:
    assert session_under_bazel_run(tmp_path).bazel().argv("info", ())[0] == "bazel"
    named = session_under_bazel_run(tmp_path, BAZEL="/opt/bazelisk")
    assert named.bazel().argv("info", ())[0] == "/opt/bazelisk"
    assert named.bazel(BazelChoice("/usr/bin/bazel")).argv("info", ())[0] == "/usr/bin/bazel"


@pytest.mark.parametrize("kind, code", [("shared-object", 0), ("pie", 1)])
def test_click_main_exits_with_the_code_the_command_returns(
        tmp_path: Path, kind: str, code: int) -> None:
    libx = lib(tmp_path / "libx.so.1", soname="libx.so.1")
    result = CliRunner().invoke(cli.cli, ["inspect", "--require", kind, str(libx)])
    assert result.exit_code == code, result.output


def test_main_returns_the_code_the_command_returns(tmp_path: Path) -> None:
    libx = lib(tmp_path / "a" / "libx.so.1", soname="libx.so.1")
    app = program(tmp_path / "app", needs=[libx])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    missing = subprocess.run([sys.executable, "-m", "bazel_ldfix", "resolve", str(app)],
                             capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "libx.so.1" in missing.stdout
    found = subprocess.run([sys.executable, "-m", "bazel_ldfix", "resolve", "--library-path",
                            str(libx.parent), str(app)], capture_output=True, text=True,
                           env=env)
    assert found.returncode == 0, found.stdout + found.stderr


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    app = program(tmp_path / "app", needs=[lib(tmp_path / "a" / "libx.so.1",
                                               soname="libx.so.1")])
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NO_COLOR")}
    assert "\x1b[" in on_terminal(["resolve", str(app)], env=env, stderr=False)[1]
    assert "\x1b[" not in on_terminal(["resolve", str(app)], env={**env, "NO_COLOR": ""},
                                     stderr=False)[1]
    piped = subprocess.run([sys.executable, "-m", "bazel_ldfix", "resolve", str(app)],
                           capture_output=True, text=True, env=env)
    assert "libx.so.1" in piped.stdout and "\x1b[" not in piped.stdout


def in_removed_directory(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The tool started from a directory removed while the shell sat in it."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run(["sh", "-c", script, "sh", str(gone), sys.executable, "-m",
                           "bazel_ldfix", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("args", [("locate", "libx.so.1"), ("env", "//...")])
def test_a_removed_working_directory_is_one_error_line_and_exit_2(
        tmp_path: Path, args: tuple[str, ...]) -> None:
    result = in_removed_directory(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: the current directory cannot be used (it was removed); cd to a directory "
        "that exists"]


def test_a_removed_working_directory_is_a_json_error_when_json_is_asked(
        tmp_path: Path) -> None:
    result = in_removed_directory(tmp_path, "env", "--format", "json", "//...")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"] == {
        "message": "the current directory cannot be used (it was removed); cd to a "
                   "directory that exists", "exit_code": 2}


def recording_bazel(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in that records each time it is started (to show it never is)."""
    record = tmp_path / "started"
    bazel = tmp_path / "bazel"
    bazel.write_text(f'#!/bin/sh\necho "$@" >> {record}\nexit 0\n')
    bazel.chmod(0o755)
    return bazel, record


@pytest.mark.parametrize("command", ["env", "test", "fix"])
@pytest.mark.parametrize("variable, value, source, held", [
    ("XDG_CACHE_HOME", "x:y", "$XDG_CACHE_HOME", ":"),
    ("HOME", "h;ome", "$HOME", ";")])
def test_a_cache_path_the_loader_cannot_take_stops_a_repair_before_bazel_runs(
        tmp_path: Path, command: str, variable: str, value: str, source: str,
        held: str) -> None:
    # A links directory under it could not be an entry of LD_LIBRARY_PATH: the loader
    # splits that list at ':' and ';'.
    bazel, record = recording_bazel(tmp_path)
    (tmp_path / "WORKSPACE").touch()
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "XDG_CACHE_HOME", "BAZEL")}
    env[variable] = str(tmp_path / value)
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", command, "--bazel",
                             str(bazel), "//..."], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 2
    root = tmp_path / value / (".cache/bazel-ldfix" if variable == "HOME" else "bazel-ldfix")
    assert result.stderr.splitlines() == [
        f"error: the cache directory {root} (from {source}) holds '{held}', which the "
        "loader reads as a separator in LD_LIBRARY_PATH, so no links directory under it "
        "can be given to the tests; set XDG_CACHE_HOME to a path without ':' or ';'"]
    assert not record.exists()      # Bazel never ran
    assert not (tmp_path / value).exists()


def test_a_cache_path_with_a_colon_does_not_stop_what_gives_the_loader_nothing(
        tmp_path: Path) -> None:
    libx = lib(tmp_path / "a" / "libx.so.1", soname="libx.so.1")
    app = program(tmp_path / "app", needs=[libx])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "x:y")
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", "resolve",
                             "--library-path", str(libx.parent), str(app)],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


def script(path: Path) -> Path:
    """An installed ``bazel-ldfix`` at ``path``, as pip writes one: this interpreter, then
    the entry point."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport sys\nfrom bazel_ldfix.cli import main\n"
                    "sys.exit(main())\n")
    path.chmod(0o755)
    return path


def test_the_suggested_commands_start_as_the_user_ran_the_tool(tmp_path: Path) -> None:
    installed = script(tmp_path / "my tools" / "bin" / "bazel-ldfix")
    elsewhere = script(tmp_path / "other" / "bazel-ldfix")
    linked = tmp_path / "links" / "bazel-ldfix"
    linked.parent.mkdir()
    linked.symlink_to(installed)       # `ln -s .venv/bin/bazel-ldfix ~/.local/bin/`
    main_py = "/src/bazel_ldfix/__main__.py"
    python = "/opt/my python/bin/python3"
    # `python -m bazel_ldfix`: the interpreter by its full path, quoted for the shell.
    assert prog_of(main_py, python, {}) == "'/opt/my python/bin/python3' -m bazel_ldfix"
    # The script by the name a shell finds it by, when PATH finds that very file...
    assert prog_of(str(installed), python, {"PATH": str(installed.parent)}) == "bazel-ldfix"
    assert prog_of(str(linked), python, {"PATH": str(linked.parent)}) == "bazel-ldfix"
    assert prog_of(str(installed), python, {"PATH": str(linked.parent)}) == "bazel-ldfix"
    # ... else as it was named: another one comes first on PATH, or none is on it.
    assert prog_of("my tools/bin/bazel-ldfix", python,
                   {"PATH": f"{elsewhere.parent}:{installed.parent}"}) == \
        "'my tools/bin/bazel-ldfix'"
    assert prog_of(".venv/bin/bazel-ldfix", python, {"PATH": "/usr/bin"}) == \
        ".venv/bin/bazel-ldfix"
    # Under `bazel run`, the command that runs it again.
    assert prog_of("/x/bazel-ldfix.runfiles/bazel_ldfix/rules/main.py", python, {},
                   by_bazel_run=True) == "bazel run @bazel_ldfix//:bazel-ldfix --"


def test_a_suggested_command_pasted_into_a_shell_runs_the_same_tool(tmp_path: Path) -> None:
    script(tmp_path / "my tools" / "bin" / "bazel-ldfix")
    (tmp_path / "WORKSPACE").write_text("")
    bazel = tmp_path / "bazel"
    bazel.write_text("#!/bin/sh\necho started >> \"$0.log\"\n")   # never started here
    bazel.chmod(0o755)
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    # An option of the tool's after Bazel's arguments: refused with the command line that
    # works, which names the script as it was run, relative to where the user is.
    ran = subprocess.run(["my tools/bin/bazel-ldfix", "test", "--bazel", str(bazel),
                          "//app:all", "--no-repair", "--dry-run"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ran.returncode == 2, ran.stderr
    suggested = ran.stderr.split("before the Bazel arguments: ", 1)[1].strip()
    assert suggested.startswith("'my tools/bin/bazel-ldfix' test ")
    pasted = subprocess.run(["bash", "-c", suggested], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.split()[1:] == ["test", "//app:all"]   # the command, not run
    assert not (tmp_path / "bazel.log").exists()

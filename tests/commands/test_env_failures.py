"""What `env` and `test` say when Bazel itself cannot help: paths a real Bazel cannot be
made to take on demand (not installed, crashing), so a stand-in script plays it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("BAZEL", None)
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


# The event a real Bazel ends every --build_event_json_file with.
LAST_EVENT = ('{"id":{"buildFinished":{}},"finished":{"exitCode":{"name":"SUCCESS"}},'
              '"lastMessage":true}')


def fake_bazel(tmp_path: Path, script: str) -> Path:
    """A bazel running ``script``; a build step's event file holds Bazel's last event."""
    (tmp_path / "WORKSPACE").touch()
    path = tmp_path / "bazel"
    path.write_text("#!/bin/sh\nfor arg in \"$@\"; do\n  case \"$arg\" in "
                    "--build_event_json_file=*) echo '" + LAST_EVENT + "' > \"${arg#*=}\";; "
                    "esac\ndone\n" + script)
    path.chmod(0o755)
    return path


def test_bazel_not_installed(tmp_path: Path) -> None:
    (tmp_path / "WORKSPACE").touch()
    for command in ("env", "test"):
        result = run(command, "--bazel", str(tmp_path / "nope"), "//...", cwd=tmp_path)
        assert result.returncode == 65
        assert result.stderr.splitlines() == [
            f"error: cannot run {tmp_path / 'nope'}: No such file or directory (named by "
            "--bazel)"]


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
    # A build step whose events name no output_base, and an `info` that names a directory
    # not there:
    # `env` stops; `test` says there is no repair and runs `bazel test` as given.
    bazel = fake_bazel(tmp_path, f'echo "$@" >> {tmp_path}/calls.log\n'
                                 f'case "$1" in info) echo "{tmp_path}/gone";; esac\n')
    result = run("env", "--bazel", str(bazel), "//...", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: output_base {tmp_path}/gone does not exist"
    result = run("test", "--bazel", str(bazel), "//...", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == (f"bazel-ldfix: no repair: output_base {tmp_path}/gone "
                                     "does not exist; running `bazel test` unchanged")
    assert (tmp_path / "calls.log").read_text().splitlines()[-1] == "test //..."


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    result = run("env", "--format", "yaml", "//...", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: invalid value for '--format'")
    assert run("frobnicate", cwd=tmp_path).returncode == 2


def fake_bazel_with_a_test(tmp_path: Path, on_test: str,
                           executable: Path | None = None) -> tuple[Path, Path]:
    """A bazel whose build step reports one test (a copy of /bin/true, or ``executable``)
    in its events, and whose other commands run ``on_test``; every call's arguments are
    logged."""
    exe = tmp_path / "bin" / "t" / "probe_test"
    if executable != exe:
        exe.parent.mkdir(parents=True)
        exe.write_bytes(Path(executable or "/bin/true").read_bytes())
        exe.chmod(0o755)
    log = tmp_path / "calls.log"
    root = f"{tmp_path}/ob/execroot/ws"
    events = "\n".join([
        '{"id":{"workspace":{}},"workspaceInfo":{"localExecRoot":"' + root + '"}}',
        '{"id":{"targetConfigured":{"label":"//t:probe_test"}},'
        '"configured":{"targetKind":"cc_test rule","testSize":"SMALL"}}',
        '{"id":{"targetCompleted":{"label":"//t:probe_test"}},"completed":{"success":true,'
        f'"importantOutput":[{{"name":"t/probe_test","uri":"file://{exe}"}}]}}}}',
        LAST_EVENT])
    (tmp_path / "ob" / "execroot" / "ws").mkdir(parents=True)
    (tmp_path / "events.json").write_text(events + "\n")
    script = f"""echo "$@" >> {log}
for arg in "$@"; do
  case "$arg" in --build_event_json_file=*) cp {tmp_path}/events.json "${{arg#*=}}"; exit 4;;
  esac
done
{on_test}
"""
    return fake_bazel(tmp_path, script), log


def test_startup_options_come_before_the_command(tmp_path: Path) -> None:
    bazel, log = fake_bazel_with_a_test(tmp_path, "exit 0\n")
    result = run("test", "--bazel", str(bazel), "--no-cache",
                 "--startup-option=--output_user_root=/tmp/our", "//t:probe_test",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert [c.split()[:2] for c in calls] == [["--output_user_root=/tmp/our", "test"]] * 2
    assert calls[-1].split()[2:] == ["//t:probe_test"]  # /bin/true needs nothing: no flag


def test_bazels_output_is_read_to_its_end_when_our_stderr_is_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed stderr (a pipe whose reader left) stops the copying, not the reading: a
    Bazel left writing into a full pipe would never finish."""
    import io

    from bazel_ldfix.bazel import client

    class Gone(io.BytesIO):
        def write(self, data: bytes) -> int:  # type: ignore[override]
            raise BrokenPipeError(32, "Broken pipe")

    class Stderr:
        buffer = Gone()

    monkeypatch.setattr(client.sys, "stderr", Stderr())
    lines = io.BytesIO(b"".join(b"line %d\n" % i for i in range(10_000)))
    client._copy_lines(lines, ())
    assert lines.read() == b""  # every line was read

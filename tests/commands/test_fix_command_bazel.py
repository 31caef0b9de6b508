"""A signal while `fix` waits on Bazel, on a real Bazel 4.2.3 behind a wrapper.

The wrapper is a shell script named `bazel`, first on PATH, as a company's wrapper or
bazelisk is. For the command the test is about, it starts the real client as a child (not
by exec), writes both ids into a FIFO, which the test reads, and then waits on a FIFO no
one writes: the step lasts until it is ended, whether or not its client is done. The
signal is sent once the ids are read, with no waiting for time.

The rules: no process of the run is left (neither the wrapper nor its client, which would
hold Bazel's lock), the Bazel server is spared, and what `fix` wrote is put back as it
was, bytes, mode and mtime, with one line that says so.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, LOADS_X, Workspace, clean_env, make_workspace, sdk

from tests.test_children import gone, pids

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

VENDOR_BUILD = ('cc_import(\n'
                '    name = "xdemo",\n'
                '    shared_library = "lib/libxdemo.so",  # the dev link\n'
                '    visibility = ["//visibility:public"],\n'
                ')\n')
MTIME_NS = 1_500_000_000_000_000_000


@dataclass
class Case:
    ws: Workspace
    top: Path
    env: dict[str, str]
    server: str

    @property
    def build(self) -> Path:
        return self.ws.root / "vendor" / "BUILD"

    def wrap(self, when: str, unless: str = "") -> Path:
        """The wrapper: the commands whose words match the shell pattern ``when``, and not
        ``unless``, are held (see the module docstring); the others exec the real Bazel.
        The FIFO it names is new."""
        fifo = self.top / "started"
        if fifo.exists():
            fifo.unlink()
        os.mkfifo(fifo)
        real = shlex.quote(str(BAZEL))
        (self.top / "bin" / "bazel").write_text(
            "#!/bin/sh\n"
            'case " $* " in\n'
            + (f'  {unless}) exec {real} "$@";;\n' if unless else "")
            + f"  {when})\n"
            f'    {real} "$@" &\n'
            f'    echo "$$ $!" > {fifo}\n'
            f"    read never < {self.top / 'hold'}\n"
            "    wait $!;;\n"
            f'  *) exec {real} "$@";;\n'
            "esac\n")
        return fifo

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "bazel_ldfix", *args],
                                cwd=self.ws.root, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    top = tmp_path_factory.mktemp("fixsignals")
    sdk(top / "ws" / "vendor", "xdemo", "11")
    ws = make_workspace(top / "ws", {
        "vendor/BUILD": VENDOR_BUILD,
        "t/BUILD": 'cc_test(name = "needs_x", srcs = ["x.c"], deps = ["//vendor:xdemo"])\n',
        "t/x.c": LOADS_X,
    }, env=clean_env())
    (top / "bin").mkdir()
    (top / "bin" / "bazel").touch(mode=0o755)
    os.mkfifo(top / "hold")
    env = {k: v for k, v in ws.env.items() if k != "BAZEL"}
    env["PATH"] = f"{top / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    try:
        server = ws.bazel("info", "server_pid", check=True).stdout.strip()
        yield Case(ws, top, env, server)
    finally:
        ws.shutdown()


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT]


@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_during_the_analysis_ends_its_bazel_and_restores_the_build_file(
        case: Case, sig: signal.Signals) -> None:
    case.build.write_text(VENDOR_BUILD)
    case.build.chmod(0o640)
    os.utime(case.build, ns=(MTIME_NS, MTIME_NS))
    before = case.build.read_bytes()
    fifo = case.wrap('*" --nobuild "*')       # the analysis: bazel build --nobuild
    proc = case.start("fix", "--write", "//t:needs_x")
    started = pids(fifo)                    # the wrapper and the client it started
    assert case.build.read_bytes() != before    # written, not yet analysed
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + sig, err[-3000:]
    assert err.splitlines()[-2:] == [
        "bazel-ldfix: Bazel did not analyse the change; every file written was restored "
        "as it was",
        f"bazel-ldfix: interrupted by {sig.name}; stopped (exit code {128 + sig})"]
    assert "Traceback" not in err
    assert all(gone(pid) for pid in started), started
    assert case.build.read_bytes() == before
    st = os.stat(case.build)
    assert (st.st_mode & 0o7777, st.st_mtime_ns) == (0o640, MTIME_NS)
    # The server was not touched: the same one answers the next command.
    assert case.ws.bazel("info", "server_pid", check=True).stdout.strip() == case.server


def test_a_signal_while_plain_fix_has_the_change_analysed_restores_the_file(
        case: Case) -> None:
    # Without --write the change is written only for Bazel to analyse it: a signal then
    # puts the file back as it was, as for --write, and no diff is shown.
    case.build.write_text(VENDOR_BUILD)
    case.build.chmod(0o640)
    os.utime(case.build, ns=(MTIME_NS, MTIME_NS))
    before = case.build.read_bytes()
    fifo = case.wrap('*" --nobuild "*')
    proc = case.start("fix", "//t:needs_x")
    started = pids(fifo)
    assert case.build.read_bytes() != before
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert err.splitlines()[-2] == ("bazel-ldfix: Bazel did not analyse the change; every "
                                    "file written was restored as it was")
    assert out == ""
    assert all(gone(pid) for pid in started), started
    assert case.build.read_bytes() == before
    st = os.stat(case.build)
    assert (st.st_mode & 0o7777, st.st_mtime_ns) == (0o640, MTIME_NS)


def test_a_signal_during_the_verify_run_reaches_its_whole_group(case: Case) -> None:
    case.build.write_text(VENDOR_BUILD)
    # The user's `bazel test` after the change, not the build step (which writes events).
    fifo = case.wrap('*" test "*', unless="*--build_event_json_file=*")
    try:
        proc = case.start("fix", "--write", "--verify", "//t:needs_x")
        started = pids(fifo)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=300)
        # The wrapper dies of the SIGTERM passed on to its group: `--verify` exits with
        # its code, as a shell would say it, and says the tests were not verified.
        assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
        assert "bazel-ldfix: bazel was killed by SIGTERM (exit code 143)" in err
        assert err.splitlines()[-1] == ("bazel-ldfix: not verified: plain `bazel test` "
                                        "exited 143")
        assert all(gone(pid) for pid in started), started
        # Bazel accepted the change before: it stays.
        assert '"lib/libxdemo.so.11"' in case.build.read_text()
        assert case.ws.bazel("info", "server_pid", check=True).stdout.strip() == case.server
    finally:
        case.build.write_text(VENDOR_BUILD)

"""`check` says what happened rather than blaming itself: a program naming the loader by
another path of the same file, a PT_INTERP set aside, a file on which the real loader
crashed. The real loader is asked the same question first, for the facts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import program
from elfcraft import craft

from bazel_ldfix.loader import host

HOST_LOADER = host.host_loader()[0]
DT_GNU_HASH = 0x6FFFFEF5


def check(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "check", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def traced(path: Path) -> subprocess.CompletedProcess[bytes]:
    """The real loader, in trace mode, on ``path``."""
    return subprocess.run([HOST_LOADER, str(path)], capture_output=True, timeout=60,
                          env={"LD_TRACE_LOADED_OBJECTS": "1"})


def other_names_of_the_loader() -> list[str]:
    """Paths other than the host loader's own that name the same file on this machine
    (Debian's multiarch path, a path through `..`)."""
    real = os.path.realpath(HOST_LOADER)
    names = [real, os.path.join("/lib", os.path.basename(os.path.dirname(real)),
                                os.path.basename(real)),
             os.path.join(os.path.dirname(HOST_LOADER), "..",
                          os.path.basename(os.path.dirname(HOST_LOADER)),
                          os.path.basename(HOST_LOADER))]
    return [n for n in dict.fromkeys(names)
            if n != HOST_LOADER and os.path.exists(n) and os.path.samefile(n, HOST_LOADER)]


@pytest.mark.parametrize("interp", other_names_of_the_loader())
def test_a_program_naming_the_loader_by_another_path_agrees(tmp_path: Path,
                                                            interp: str) -> None:
    app = program(tmp_path / "app", extra=[f"-Wl,--dynamic-linker,{interp}"])
    # The real loader, run at its own path, lists itself under the program's name for it.
    assert f"{interp} => {HOST_LOADER}".encode() in traced(app).stdout
    result = check("--json", str(app))
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["disagreements"] == [] and doc["loads"]
    assert doc["loader_note"] == (f"PT_INTERP {interp} is the same file as {HOST_LOADER}, "
                                  f"which was run and lists itself as {interp} => "
                                  f"{HOST_LOADER}; that entry is not compared")


def test_a_program_whose_pt_interp_is_set_aside_agrees(tmp_path: Path) -> None:
    fake = tmp_path / "ld.sh"
    fake.write_text("#!/bin/sh\n")
    app = program(tmp_path / "app", extra=[f"-Wl,--dynamic-linker,{fake}"])
    result = check(str(app))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is not a trusted loader and was not run" in result.stdout
    assert f"the loader run, {HOST_LOADER}, lists itself under PT_INTERP" in result.stdout
    assert "a bug in bazel-ldfix" not in result.stdout


def test_a_file_on_which_the_real_loader_crashes_is_the_files_failure(
        tmp_path: Path) -> None:
    # A library whose DT_GNU_HASH points far outside it: glibc reads the table as it maps
    # the library; the model, which never needs the table, finds nothing wrong.
    libx = craft(tmp_path / "libx.so.1", soname="libx.so.1",
                 extra=[(DT_GNU_HASH, 0x7FFF0000)])
    app = program(tmp_path / "app", needs=[libx], rpath=str(tmp_path))
    crashed = traced(app).returncode
    if crashed >= 0:
        pytest.skip(f"this machine's loader does not crash on it (exit code {crashed})")
    name = signal.Signals(-crashed).name
    result = check(str(app))
    assert result.returncode == 1, result.stdout + result.stderr    # it does not load
    assert "a bug in bazel-ldfix" not in result.stdout
    assert result.stdout.splitlines()[-1] == (
        f"the real loader was killed by {name} loading it: a start of this program would "
        "stop there too; an object it loads is malformed in a part the model does not "
        "read (the model expected a clean load)")
    doc = json.loads(check("--json", str(app)).stdout)
    assert doc["disagreements"] == [] and not doc["loads"] and name in doc["crash"]

"""Nothing an inspected file names is run: only a trusted loader is asked how it searches.

Each hostile interpreter below would leave a marker file if it were started: a shell script,
a static program and a path relative to the current directory. The commands that ask a
loader (resolve, check, check --matrix) must model or trace the file with the host's own
loader instead, say so, and leave no marker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import cc, lib, program

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, UntrustedLoaderError
from bazel_ldfix.loader import host
from bazel_ldfix.loader.host import parse_probe

pytestmark = pytest.mark.security


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60)


def host_loader() -> str:
    """The loader the running Python was started with, read from its own PT_INTERP."""
    interp = elf.read_elf("/proc/self/exe").interp
    assert interp is not None
    return interp


def script_interp(tmp_path: Path, marker: Path) -> Path:
    script = tmp_path / "evil" / "ld.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    return script


def static_interp(tmp_path: Path, marker: Path) -> Path:
    src = (f'#include <stdio.h>\nint main(void){{FILE*f=fopen("{marker}","w");'
           'if(f)fclose(f);return 0;}')
    out = tmp_path / "evil" / "ld-static"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-static", "-o", str(out), "-x", "c", "-"], input=src.encode(),
                   check=True, capture_output=True)
    return out


def hostile_program(tmp_path: Path, interp: str) -> Path:
    libx = lib(tmp_path / "x" / "libx.so.1")
    return program(tmp_path / "bin" / "app", needs=[libx], runpath="$ORIGIN/../x",
                   extra=[f"-Wl,--dynamic-linker,{interp}"])


@pytest.fixture(params=["script", "static", "relative"])
def planted(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(program, marker, directory to run in) for each kind of hostile interpreter."""
    marker = tmp_path / "MARKER"
    if request.param == "script":
        interp = str(script_interp(tmp_path, marker))
    elif request.param == "static":
        interp = str(static_interp(tmp_path, marker))
    else:
        script_interp(tmp_path, marker)
        interp = "evil/ld.sh"  # taken from the current directory by anything that runs it
    app = hostile_program(tmp_path, interp)
    assert elf.read_elf(str(app)).interp == interp
    return app, marker, tmp_path


def test_resolve_models_a_hostile_interpreter_with_the_host_loader(
        planted: tuple[Path, Path, Path]) -> None:
    app, marker, cwd = planted
    result = run("resolve", "--json", str(app), cwd=cwd)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["missing"] == []
    assert any("is not a trusted loader and was not run" in n and host_loader() in n
               for n in doc["notes"])
    text = run("resolve", str(app), cwd=cwd)
    assert "note: PT_INTERP" in text.stdout
    assert not marker.exists()


def test_check_traces_with_the_host_loader_never_the_named_one(
        planted: tuple[Path, Path, Path]) -> None:
    app, marker, cwd = planted
    result = run("check", "--json", str(app), cwd=cwd)
    doc = json.loads(result.stdout)
    assert doc["interpreter"] == host_loader()
    assert "libx.so.1" in [o["soname"] for o in doc["objects"]]
    assert "was not run" in doc["interpreter_note"]
    matrix = run("check", "--matrix", str(app.parent.parent / "x"), str(app), cwd=cwd)
    assert "Traceback" not in matrix.stderr
    assert not marker.exists()


def test_check_refuses_to_trace_a_program_naming_an_audit_library(tmp_path: Path) -> None:
    """The loader calls into DT_AUDIT libraries even in trace mode."""
    marker = tmp_path / "MARKER"
    audit = cc(tmp_path / "audit.so", "-shared", src=(
        '#include <stdio.h>\nunsigned la_version(unsigned v){FILE*f=fopen("'
        f'{marker}","w");if(f)fclose(f);return v;}}'))
    app = program(tmp_path / "app", extra=[f"-Wl,--audit,{audit}"])
    assert elf.read_elf(str(app)).has_audit
    result = run("check", str(app))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "DT_AUDIT" in result.stderr
    assert not marker.exists()


def test_the_host_loader_is_the_running_pythons_and_is_trusted() -> None:
    path, elf_class, machine = host.host_loader()
    assert path == host_loader()
    exe = elf.read_header("/proc/self/exe")
    assert (elf_class, machine) == (exe.elf_class, exe.machine)


def test_a_loader_others_can_change_is_not_trusted(tmp_path: Path) -> None:
    real = os.path.realpath(host_loader())
    copy = tmp_path / "ld.so"
    shutil.copy(real, copy)
    tmp_path.chmod(0o755)
    copy.chmod(0o755)
    assert host.check_trusted(str(copy)) == str(copy)
    copy.chmod(0o775)
    with pytest.raises(UntrustedLoaderError, match="writable by others"):
        host.check_trusted(str(copy))
    copy.chmod(0o755)
    os.chown(copy, 65534, 65534)
    with pytest.raises(UntrustedLoaderError, match="not owned by root"):
        host.check_trusted(str(copy))
    os.chown(copy, 0, 0)
    tmp_path.chmod(0o777)
    with pytest.raises(UntrustedLoaderError):
        host.check_trusted(str(copy))


def test_loader_option_names_the_loader_to_ask(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    app = hostile_program(tmp_path, str(script_interp(tmp_path, marker)))
    copy = tmp_path / "myld.so"
    shutil.copy(os.path.realpath(host_loader()), copy)
    result = run("check", "--json", "--loader", str(copy), str(app))
    doc = json.loads(result.stdout)
    assert doc["interpreter"] == str(copy)
    assert doc["loads"] is True
    missing = run("resolve", "--loader", str(tmp_path / "nope"), str(app))
    assert missing.returncode == 2 and missing.stderr.startswith("error: --loader")
    assert not marker.exists()


def test_a_file_with_the_standard_interpreter_gets_no_note(tmp_path: Path) -> None:
    app = program(tmp_path / "app")
    doc = json.loads(run("resolve", "--json", str(app)).stdout)
    assert doc["notes"] == []


def test_diagnose_models_the_test_with_the_host_loader_never_the_named_one(
        tmp_path: Path) -> None:
    """The failed test's executable names a hostile interpreter: diagnose still explains
    the failure (with the host loader's rules) and the marker never appears."""
    from diagnose_fixtures import fake_bazel

    from bazel_ldfix.diagnosis import logs, report

    fake = fake_bazel(tmp_path)
    marker = tmp_path / "MARKER"
    interp = script_interp(tmp_path, marker)
    solib = "_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib"
    cc(fake.executable, "-L", str(fake.bin / solib), "-l:libxdemo.so",
       "-Wl,--enable-new-dtags", f"-Wl,-rpath,$ORIGIN/../{solib}",
       f"-Wl,--dynamic-linker,{interp}",
       src="int xdemo_value(void); int main(void){return xdemo_value() != 11;}")
    assert elf.read_elf(str(fake.executable)).interp == str(interp)
    result = report.diagnose(logs.find(str(fake.workspace)))
    assert result.exit_code == 1
    assert [f.soname for f in result.findings] == ["libxdemo.so.11"]
    assert not marker.exists()


def test_diagnose_asks_the_loader_named_with_loader(tmp_path: Path) -> None:
    from diagnose_fixtures import fake_bazel

    fake = fake_bazel(tmp_path)
    copy = tmp_path / "myld.so"
    shutil.copy(os.path.realpath(host_loader()), copy)
    result = run("diagnose", "--json", "--loader", str(copy), cwd=fake.workspace)
    assert result.returncode == 1, result.stderr
    finding = json.loads(result.stdout)["failures"][0]
    assert finding["soname"] == "libxdemo.so.11"
    assert finding["needed_by_source"] == "loader model"
    gone = run("diagnose", "--loader", str(tmp_path / "nope"), cwd=fake.workspace)
    assert "--loader" in gone.stdout + gone.stderr and "Traceback" not in gone.stderr


# -- the probe (LD_DEBUG=libs) ------------------------------------------------------------------

_SUBDIRS = ["glibc-hwcaps/x86-64-v3", "glibc-hwcaps/x86-64-v2", "tls/x86_64", "tls/x86_64",
            "tls", "x86_64", ""]


def _search_line(dirs: list[str], what: str) -> str:
    entries = [f"{d}/{s}" if s else d for d in dirs for s in _SUBDIRS]
    return f"     4242:\t search path={':'.join(entries)}\t\t({what})\n"


def test_parse_probe_reads_tokens_subdirectories_and_system_dirs() -> None:
    probe_dir = "/nonexistent-bazel-ldfix-probe/lib/x86_64-linux-gnu/@/x86_64/@"
    text = ("     4242:\tfind library=libbazel-ldfix-probe.so [0]; searching\n"
            + _search_line([probe_dir], "LD_LIBRARY_PATH")
            + _search_line(["/lib/x86_64-linux-gnu", "/usr/lib", "/opt/x86_64"],
                           "system search path"))
    host = parse_probe("/lib64/ld-linux-x86-64.so.2", text)
    assert host.lib == "lib/x86_64-linux-gnu"
    assert host.platform == "x86_64"
    assert host.subdirs == tuple(_SUBDIRS)
    assert host.system_dirs == ("/lib/x86_64-linux-gnu", "/usr/lib", "/opt/x86_64")
    assert host.hwcaps == ("x86-64-v3", "x86-64-v2")


def test_parse_probe_refuses_output_without_search_paths() -> None:
    with pytest.raises(BadInputError):
        parse_probe("/lib/ld-musl-x86_64.so.1", "musl libc (x86_64)\nVersion 1.2.3\n")


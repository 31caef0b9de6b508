"""Bounded work on any file: offsets checked against the file, FIFOs never waited on, caps
no real file reaches, and one ``error:`` line instead of a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from elfbuild import lib, program
from elfcraft import DT_VERNEED, craft, verneed_bomb

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError, MalformedElfError, NotElfError

pytestmark = pytest.mark.security

NEAR_2_63 = (1 << 63) - 8


def run(*args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NO_COLOR")}
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], capture_output=True,
                            text=True, env=env, cwd=cwd, timeout=60)
    return result, time.monotonic() - start


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


# -- offsets near 2**63 ----------------------------------------------------------------------

def test_a_program_header_offset_near_2_63_is_a_short_file(tmp_path: Path) -> None:
    bad = craft(tmp_path / "libbad.so", needed=["libc.so.6"], phoff=NEAR_2_63)
    with pytest.raises(NotElfError, match="file too short"):
        elf.read_elf(str(bad))
    result, _ = run("resolve", str(bad))
    assert result.returncode == 2
    assert one_error_line(result).endswith("(empty or truncated)")


def test_a_needed_string_offset_near_2_63_is_malformed(tmp_path: Path) -> None:
    bad = craft(tmp_path / "libbad.so", needed_offsets=[NEAR_2_63])
    with pytest.raises(MalformedElfError, match="outside the file"):
        elf.read_elf(str(bad))
    result, _ = run("resolve", str(bad))
    assert result.returncode == 2 and "outside the file" in one_error_line(result)


def test_a_candidate_with_a_header_offset_near_2_63_stops_the_model_not_the_tool(
        tmp_path: Path) -> None:
    craft(tmp_path / "lib" / "libbad.so", needed=["libc.so.6"], phoff=NEAR_2_63)
    app = program(tmp_path / "app", needs=[lib(tmp_path / "build" / "libbad.so")])
    result, _ = run("resolve", "--library-path", str(tmp_path / "lib"), str(app))
    assert "Traceback" not in result.stderr
    assert result.returncode == 1
    assert "cannot read file data" in result.stdout


# -- FIFOs ------------------------------------------------------------------------------------

def test_a_fifo_given_to_resolve_or_check_is_refused_at_once(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "libpipe.so")
    for command in ("resolve", "check"):
        result, took = run(command, str(pipe))
        assert took < 10  # the interpreter's start-up; a wait on the FIFO never ends
        assert result.returncode == 2
        assert one_error_line(result) == f"error: {pipe}: is a FIFO, not a regular file"


def test_a_fifo_where_the_loader_searches_stops_the_model_and_check_refuses_to_run(
        tmp_path: Path) -> None:
    """The real loader would wait for a writer on it; neither command may."""
    built = lib(tmp_path / "build" / "libx.so.1")
    app = program(tmp_path / "app", needs=[built])
    search = tmp_path / "search"
    fifo(search / "libx.so.1")
    resolved, took = run("resolve", "--library-path", str(search), str(app))
    assert took < 10 and resolved.returncode == 1 and "Traceback" not in resolved.stderr
    assert "a FIFO, not a regular file" in resolved.stdout
    checked, took = run("check", "--library-path", str(search), str(app))
    assert took < 10 and checked.returncode == 2
    assert "the real loader would block on it" in one_error_line(checked)
    matrix, took = run("check", "--matrix", str(search), str(app))
    assert took < 10 and matrix.returncode == 2 and one_error_line(matrix)


def test_a_fifo_under_external_is_a_passed_over_copy(tmp_path: Path) -> None:
    base = tmp_path / "ob"
    lib(base / "external" / "good" / "libx.so.1")
    fifo(base / "external" / "evil" / "libx.so.1")
    result, took = run("locate", "--no-cache", "--output-base", str(base), "libx.so.1")
    assert took < 10 and result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    evil = next(line for line in result.stdout.splitlines() if "evil" in line)
    assert "a FIFO" in evil


def test_a_fifo_as_a_sysroots_cache_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fifo(root / "etc" / "ld.so.cache")
    app = program(tmp_path / "app")
    result, took = run("resolve", "--root", str(root), str(app))
    assert took < 10 and result.returncode == 2
    assert one_error_line(result) == (
        f"error: cannot read ld.so cache {root}/etc/ld.so.cache: is a FIFO, not a regular file")


def test_a_fifo_as_a_sysroots_ld_so_conf_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fifo(root / "etc" / "ld.so.conf")
    app = program(tmp_path / "app")
    result, took = run("resolve", "--root", str(root), str(app))
    assert took < 10 and "Traceback" not in result.stderr


# -- caps ---------------------------------------------------------------------------------------

def test_more_needed_entries_than_any_real_file_is_malformed(tmp_path: Path) -> None:
    many = craft(tmp_path / "libmany.so", needed=["libc.so.6"] * 16_000)
    start = time.monotonic()
    with pytest.raises(MalformedElfError, match="DT_NEEDED entries"):
        elf.read_elf(str(many))
    assert time.monotonic() - start < 5
    result, _ = run("resolve", str(many))
    assert result.returncode == 2 and "DT_NEEDED" in one_error_line(result)


def test_many_needed_entries_below_the_cap_resolve_once_each(tmp_path: Path) -> None:
    """Duplicates within the cap are a result, not a hang."""
    many = craft(tmp_path / "libmany.so", needed=["libc.so.6"] * 4000)
    result, _took = run("resolve", "-v", str(many))   # -v: system libraries unfolded
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("libc.so.6 [") >= 1


def test_a_symbol_version_bomb_is_malformed(tmp_path: Path) -> None:
    """4,096 x 4,096 entries in a few kilobytes would take minutes to walk."""
    bomb = craft(tmp_path / "libbomb.so", needed=["libc.so.6"],
                 blob=verneed_bomb(4096, 4096), blob_tags=[DT_VERNEED])
    start = time.monotonic()
    with pytest.raises(MalformedElfError, match="symbol-version entries"):
        elf.read_elf(str(bomb))
    assert time.monotonic() - start < 5


def test_a_modest_version_chain_is_read(tmp_path: Path) -> None:
    fine = craft(tmp_path / "libfine.so", needed=["libc.so.6"],
                 blob=verneed_bomb(2, 3), blob_tags=[DT_VERNEED])
    info = elf.read_elf(str(fine))
    assert [len(n.versions) for n in info.version_needs] == [3, 3]


def test_a_string_longer_than_any_name_is_malformed(tmp_path: Path) -> None:
    long = craft(tmp_path / "liblong.so", needed=["x" * 10_000])
    with pytest.raises(MalformedElfError, match="longer than"):
        elf.read_elf(str(long))


def test_a_directory_is_still_reported_as_one(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="is a directory"):
        elf.read_elf(str(tmp_path))


def test_files_with_offsets_near_2_63_under_external_do_not_break_locate(
        tmp_path: Path) -> None:
    base = tmp_path / "ob"
    lib(base / "external" / "good" / "libx.so.1")
    craft(base / "external" / "bad1" / "libx.so.1", needed=["libc.so.6"], phoff=NEAR_2_63)
    craft(base / "external" / "bad2" / "libx.so.1", needed_offsets=[NEAR_2_63])
    result, _ = run("locate", "--no-cache", "--output-base", str(base), "libx.so.1")
    assert result.returncode == 0 and "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert "good" in lines[1]  # the usable copy first
    assert any("bad1" in line and "not loadable" in line for line in lines)
    assert any("bad2" in line and "not loadable" in line for line in lines)


def test_a_loader_that_hangs_is_an_error_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever blocks the loader (a FIFO the model cannot see, a hung NFS mount), the
    probe and the trace end in one BadInputError."""
    from bazel_ldfix.loader import host, trace

    # Static, so that LD_TRACE_LOADED_OBJECTS does not make its own loader list it and exit.
    stuck = tmp_path / "stuck-ld.so"
    subprocess.run(["cc", "-static", "-o", str(stuck), "-x", "c", "-"], check=True,
                   input=b"#include <unistd.h>\nint main(void){sleep(30);return 0;}")
    monkeypatch.setattr(host, "PROBE_TIMEOUT", 1)
    monkeypatch.setattr(trace, "TIMEOUT", 1)
    start = time.monotonic()
    with pytest.raises(BadInputError, match="did not answer within 1 s"):
        host.ask(str(stuck))
    with pytest.raises(BadInputError, match="did not finish listing"):
        trace.run_trace(str(stuck), str(stuck), library_path=None, inhibit_cache=True)
    assert time.monotonic() - start < 20


def test_a_fifo_as_a_log_or_build_event_file_is_refused_at_once(tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "test.log")
    for args in (["--log", str(pipe)], ["--bep", str(pipe)]):
        result, took = run("diagnose", *args, cwd=tmp_path)
        assert took < 10 and result.returncode == 2
        assert str(pipe) in one_error_line(result)

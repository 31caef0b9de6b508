"""Names from the output_base in what the tool prints: escaped before the text is split into
lines, so that none forges a line; a directory LD_LIBRARY_PATH cannot name (':' or ';') is
reached through a link, and the tests still run.

The library sits in a directory of ``external/`` with such a name. The quick tests let a
stand-in Bazel name the test; the ``bazel`` ones have Bazel 4.2.3 build and run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bazelws import BAZEL, clean_env, make_workspace, needs_x
from elfbuild import lib, program

from bazel_ldfix import quoting
from tests.commands.test_env_failures import fake_bazel, fake_bazel_with_a_test

FORGED = "x\nevery test loads, nothing to add\n"
SEPARATED = ("a:b", "c;d")
# What `bazel query --output=xml` prints when no rule matches.
QUERY = '<?xml version="1.1" encoding="UTF-8" standalone="no"?><query version="2"/>'



def run(*args: str, cwd: Path, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("BAZEL", "LD_LIBRARY_PATH")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd,
                          env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


def library_in(tmp_path: Path, directory: str) -> Path:
    """A stand-in Bazel whose one test needs libgone.so.1, which only
    ``OUTPUT_BASE/external/<directory>`` holds."""
    found = lib(tmp_path / "ob" / "external" / directory / "libgone.so.1",
                soname="libgone.so.1")
    elsewhere = lib(tmp_path / "gone" / "libgone.so.1", soname="libgone.so.1")
    exe = program(tmp_path / "bin" / "t" / "probe_test", needs=[elsewhere])
    elsewhere.unlink()
    bazel, _log = fake_bazel_with_a_test(tmp_path, f'case "$1" in query) echo {QUERY!r};; '
                                                   "esac\n", executable=exe)
    assert found.exists()
    return bazel


def test_a_directory_name_with_a_newline_forges_no_line_of_the_summary(
        tmp_path: Path) -> None:
    bazel = library_in(tmp_path, FORGED)
    result = run("env", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert all(line.startswith("bazel-ldfix: ") for line in lines), lines
    assert "bazel-ldfix: every test loads, nothing to add" not in lines
    assert any(line.endswith("is in $OUTPUT_BASE/external/x\\nevery test loads, nothing "
                             "to add\\n") for line in lines), lines
    # The flag itself is quoted for a shell, which keeps the newline inside its quotes.
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {result.stdout}"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split("\0")[0].endswith(f"/external/{FORGED}")


@pytest.mark.parametrize("name", SEPARATED)
def test_a_directory_ld_library_path_cannot_name_is_reached_through_a_link(
        tmp_path: Path, name: str) -> None:
    bazel = library_in(tmp_path, name)
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run("env", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path,
                 env=cache)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert (f"bazel-ldfix:   libgone.so.1 is in $OUTPUT_BASE/external/{name}, given by a "
            "link: the directory's name holds ':' or ';', which LD_LIBRARY_PATH cannot "
            "carry") in result.stderr.splitlines()
    links = tmp_path / "cache" / "bazel-ldfix" / "links"
    (flag,) = result.stdout.split()
    assert flag.startswith(f"--test_env=LD_LIBRARY_PATH={links}/") and name not in flag
    doc = json.loads(run("env", "--format", "json", "--bazel", str(bazel), "--no-cache",
                         "//t:probe_test", cwd=tmp_path, env=cache).stdout)
    assert [m["exposure"] for m in doc["missing"]] == ["link"]
    # `test` runs the tests, with the link.
    result = run("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path,
                 env=cache)
    assert result.returncode == 0, result.stderr


def test_the_diagnosis_offers_no_flag_that_would_split_a_directory() -> None:
    from bazel_ldfix.diagnosis import fixes

    assert fixes.library_path_value(("/base",), ("/found/a:b",)) is None
    assert fixes.library_path_value(("/base",), (), ("/found/c;d",)) is None
    assert fixes.library_path_value(("/base",), ("/found/x",)) == "/base:/found/x"


def test_a_bazel_path_with_a_newline_forges_no_line_of_an_error(tmp_path: Path) -> None:
    weird = tmp_path / "x\nerror: forged"
    weird.mkdir()
    bazel = fake_bazel(weird, 'case "$1" in info) echo "FATAL: no server" >&2; exit 37;; '
                              "esac\n")
    result = run("locate", "--bazel", str(bazel), "libx.so.1", cwd=tmp_path)
    assert result.returncode == 66
    assert result.stderr.splitlines() == [
        f"error: `{quoting.printable(str(bazel))} info output_base` failed (exit code 37)",
        "    FATAL: no server"]


# -- with Bazel 4.2.3 ------------------------------------------------------------------------

def _sdk_in(top: Path, directory: str) -> dict[str, str]:
    """//t:needs_x, whose versioned library is in ``directory`` of its repository, with
    ``lib/libxdemo.so`` (what the rule imports) a symlink to it."""
    files = needs_x(top)
    sdk = top / "sdks" / "xsdk"
    (sdk / directory).mkdir()
    (sdk / "lib" / "libxdemo.so.11").rename(sdk / directory / "libxdemo.so.11")
    (sdk / "lib" / "libxdemo.so").unlink()
    (sdk / "lib" / "libxdemo.so").symlink_to(f"../{directory}/libxdemo.so.11")
    return files


@pytest.mark.bazel
@pytest.mark.skipif(BAZEL is None, reason="no bazel")
def test_bazel_runs_a_test_whose_library_is_in_a_directory_named_with_a_newline(
        tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", _sdk_in(tmp_path, FORGED), env=clean_env())
    try:
        result = ws.ldfix("test", "--no-cache", "//t:needs_x")
        assert result.returncode == 0, result.stderr     # the loader found it
        ours = [line for line in result.stderr.splitlines()
                if line.startswith("bazel-ldfix")]
        assert "bazel-ldfix: every test loads, nothing to add" not in ours
        assert any("/x\\nevery test loads, nothing to add\\n" in line
                   for line in ours), "\n".join(ours)
    finally:
        ws.shutdown()


@pytest.mark.bazel
@pytest.mark.skipif(BAZEL is None, reason="no bazel")
def test_bazel_runs_a_test_whose_library_is_in_a_directory_with_a_colon(
        tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", _sdk_in(tmp_path, "a:b"),
                        env={**clean_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    try:
        result = ws.ldfix("test", "--no-cache", "//t:needs_x")
        assert result.returncode == 0, result.stderr     # reached through a link
        assert "given by a link: the directory's name holds ':' or ';'" in result.stderr
    finally:
        ws.shutdown()

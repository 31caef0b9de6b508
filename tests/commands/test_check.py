"""``check`` as a user runs it: the model and the real loader on the same real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import lib, program
from toolrun import missing_app, run


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return missing_app(tmp_path)


def test_check_lists_every_missing_library_and_agrees_with_the_model(app: Path) -> None:
    x_dir = app.parent.parent / "x"
    missing = run("check", str(app))
    assert missing.returncode == 1
    assert "libx.so.1 => not found" in missing.stdout
    assert missing.stdout.rstrip().endswith("the model agrees with the loader")
    ok = run("check", "--json", "--library-path", str(x_dir), str(app))
    assert ok.returncode == 0, ok.stdout
    doc = json.loads(ok.stdout)
    assert doc["loads"] is True and doc["disagreements"] == [] and doc["missing"] == []
    assert {"soname": "liby.so.2", "path": f"{x_dir}/../y/liby.so.2"} in doc["objects"]


def test_check_runs_the_real_path_of_a_program_started_through_a_symlink(
        app: Path, tmp_path: Path) -> None:
    # $ORIGIN of a program is its real directory: a runfiles-style symlink must not move
    # it. From deep/real/, $ORIGIN/../../x is tmp_path/x; from the link's directory it
    # would be tmp_path/../x, which does not exist.
    real = program(tmp_path / "deep" / "real" / "tool",
                   needs=[app.parent.parent / "x" / "libx.so.1"], runpath="$ORIGIN/../../x")
    (tmp_path / "runfiles").mkdir()
    (tmp_path / "runfiles" / "tool").symlink_to(real)
    result = run("check", "--json", str(tmp_path / "runfiles" / "tool"))
    doc = json.loads(result.stdout)
    assert doc["disagreements"] == []
    assert doc["missing"] == [] and doc["loads"] is True


def test_matrix_names_the_directories_that_are_needed(tmp_path: Path) -> None:
    a = lib(tmp_path / "da" / "liba.so.11")
    b = lib(tmp_path / "db" / "libb.so.13")
    app = program(tmp_path / "app", needs=[a, b])
    (tmp_path / "dc").mkdir()
    dirs = [str(tmp_path / d) for d in ("da", "db", "dc")]
    result = run("check", *(f"--matrix={d}" for d in dirs), str(app))
    assert result.returncode == 0, result.stdout + result.stderr
    rows = result.stdout.splitlines()
    assert rows[1].split("->")[1].strip() == "liba.so.11, libb.so.13 missing"
    assert rows[2].split("->")[1].strip() == "libb.so.13 missing"
    assert rows[3].split("->")[1].strip() == "liba.so.11 missing"
    assert rows[5].split("->")[1].strip() == "all loaded"
    assert rows[6].strip() == f"smallest set: {dirs[0]}:{dirs[1]}"


def _can_bind_mount() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind /etc/ld.so.cache "
                            "/etc/ld.so.cache"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_bind_mount(), reason="needs root and unshare -m")
def test_check_names_libraries_only_the_cache_reaches_and_a_stale_ldconfig(
        tmp_path: Path) -> None:
    # A private /etc/ld.so.conf and cache, mounted over the real ones in a private mount
    # namespace: libcached.so.1 is in the cache; libstale.so.1 is in a configured
    # directory but was added after ldconfig ran.
    conf_dir = tmp_path / "conf-lib"
    cached = lib(conf_dir / "libcached.so.1")
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{conf_dir}\n")
    cache = tmp_path / "ld.so.cache"
    subprocess.run(["ldconfig", "-C", str(cache), "-f", str(conf)], check=True)
    stale = lib(conf_dir / "libstale.so.1")
    app = program(tmp_path / "app", needs=[cached, stale])
    script = ('mount --bind "$1" /etc/ld.so.cache && mount --bind "$2" /etc/ld.so.conf && '
              'shift 2 && exec "$@"')
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(cache), str(conf),
         sys.executable, "-m", "bazel_ldfix", "check", "--json", str(app)],
        capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc["missing"]) == {"libcached.so.1", "libstale.so.1"}
    notes = {n["soname"]: n["note"] for n in doc["notes"]}
    assert notes["libcached.so.1"].startswith(f"only /etc/ld.so.cache reaches it ({cached})")
    assert notes["libstale.so.1"].startswith(f"ldconfig is stale: {stale} exists")
    assert doc["disagreements"] == []


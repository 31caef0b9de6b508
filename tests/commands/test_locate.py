"""`bazel-ldfix locate` as a user runs it, on a made output_base."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from elfbuild import lib, patch_machine


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "locate", *args],
                          capture_output=True, text=True, env=env)


def test_locate_lists_every_copy_best_first(tmp_path: Path) -> None:
    ext = tmp_path / "ob" / "external"
    good = lib(ext / "cuda" / "lib" / "libcudart.so.13")
    arm = ext / "cuda" / "targets" / "sbsa-linux" / "lib" / "libcudart.so.13"
    arm.parent.mkdir(parents=True)
    arm.write_bytes(good.read_bytes())
    patch_machine(arm, 183)
    (ext / "linked").symlink_to(ext / "cuda")  # a symlinked repository: the same files
    for attempt in ("--no-cache", None, None):  # a walk, then a cold and a warm cache
        args = ["--output-base", str(tmp_path / "ob"), "--json", "libcudart.so.13",
                "libnope.so.1"]
        result = run(*args, *([attempt] if attempt else []), home=tmp_path / "cache")
        assert result.returncode == 1, result.stderr  # libnope.so.1 exists nowhere
        doc = json.loads(result.stdout)
        assert doc["libnope.so.1"] == []
        copies = doc["libcudart.so.13"]
        assert [(c["dir"], c["machine"], c["class"]) for c in copies] == [
            (str(good.parent), "x86-64", "ELFCLASS64"),
            (str(arm.parent), "aarch64", "ELFCLASS64")]


def test_locate_without_an_external_directory_is_bad_input(tmp_path: Path) -> None:
    result = run("--output-base", str(tmp_path), "libx.so.1", home=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: {tmp_path}/external does not exist: is {tmp_path} a Bazel output_base?"]

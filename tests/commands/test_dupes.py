"""``dupes`` as a user runs it: the global lookup scope in the real loader's order, the
loader options of ``resolve``, and bad input as one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from elfbuild import lib, program
from toolrun import run

from bazel_ldfix.loader.host import host_loader


def _real_order(app: Path, library_path: str) -> list[str]:
    """The real loader's load order (the global scope's), the vDSO left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env["LD_LIBRARY_PATH"] = library_path
    out = subprocess.run([host_loader()[0], "--list", str(app)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [os.path.basename(line.split()[0]) for line in out.splitlines()
            if "vdso" not in line]


def test_the_scope_is_the_real_loaders_order_and_library_path_reaches_it(
        tmp_path: Path) -> None:
    liby = lib(tmp_path / "l" / "liby.so.2")
    libx = lib(tmp_path / "l" / "libx.so.1", needs=[liby])
    app = program(tmp_path / "app", needs=[libx])
    unfound = json.loads(run("dupes", "--json", str(app)).stdout)
    assert unfound["version"] == 1 and unfound["missing"] == ["libx.so.1"]
    result = run("dupes", "--json", "--library-path", str(libx.parent), str(app))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["missing"] == [] and doc["split"] == []
    assert doc["scope"][0] == str(app)
    assert doc["scope"][1:] == _real_order(app, str(libx.parent))


def test_a_file_that_is_not_linked_elf_is_bad_input(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    result = run("dupes", str(notes))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"error: {notes}: not an ELF file, not a linked ELF object (a shared object or a "
        "program)"]

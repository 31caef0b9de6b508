"""``resolve`` as a user runs it: real files, real loader, real exit codes (``check`` too,
where both read a file the same way)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import cc, lfs_pointer, lib, patch_class, program, truncated
from terminal import on_terminal
from toolrun import missing_app, run


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return missing_app(tmp_path)


def test_resolve_exits_1_and_explains_every_search_step_of_a_miss(app: Path) -> None:
    result = run("resolve", str(app))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == str(app)
    assert any(line.endswith("libx.so.1 not found") for line in lines)
    steps = [line.split("┊ ", 1)[1] for line in lines if "┊ " in line]
    assert steps[0] == "searched, in this order:"
    assert [s.split(":")[0] for s in steps[1:6]] == [
        "1. rpath", "2. LD_LIBRARY_PATH", "3. runpath", "4. ld.so.cache", "5. default"]
    assert "\x1b[" not in result.stdout  # not a terminal: no colour


def test_resolve_library_path_replaces_ld_library_path(app: Path) -> None:
    x_dir = app.parent.parent / "x"
    result = run("resolve", "--json", "--library-path", str(x_dir), str(app),
                 env={"LD_LIBRARY_PATH": "/nonexistent"})
    assert result.returncode == 0, result.stdout
    doc = json.loads(result.stdout)
    assert doc["version"] == 1 and doc["file"] == str(app) and doc["missing"] == []
    by_name = {lib["soname"]: lib for lib in doc["libraries"]}
    assert by_name["libx.so.1"]["path"] == f"{x_dir}/libx.so.1"
    assert by_name["libx.so.1"]["via"] == "LD_LIBRARY_PATH"
    assert by_name["libx.so.1"]["needed_by"] == [str(app)]
    assert by_name["liby.so.2"]["via"] == "runpath"
    assert by_name["liby.so.2"]["error"] is None


def test_resolve_json_of_several_files_is_a_list(app: Path) -> None:
    result = run("resolve", "--json", str(app), "/bin/true")
    docs = json.loads(result.stdout)
    assert [d["file"] for d in docs] == [str(app), "/bin/true"]
    assert docs[0]["missing"] == ["libx.so.1"]
    missing = next(lib for lib in docs[0]["libraries"] if lib["soname"] == "libx.so.1")
    assert missing["path"] is None
    assert [t["via"] for t in missing["tried"]] == [
        "rpath", "LD_LIBRARY_PATH", "runpath", "ld.so.cache", "default"]


def test_missing_libraries_are_red_on_a_terminal_unless_no_color(app: Path) -> None:
    def on_tty(env: dict[str, str]) -> str:
        base = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        code, text = on_terminal(["resolve", str(app)], env={**base, **env}, stderr=False)
        assert code == 1
        return text

    assert "\x1b[31mlibx.so.1 not found" in on_tty({})
    assert "\x1b[" not in on_tty({"NO_COLOR": "1"})


def _archive(path: Path) -> None:
    """A real static archive: one gcc-built object, put in by binutils' ar."""
    obj = cc(path.parent / "x.o", "-c", src="int x(void) { return 1; }")
    subprocess.run(["ar", "rcs", str(path), str(obj)], check=True)
    obj.unlink()


@pytest.mark.parametrize("make, message", [
    (lambda d: (d / "libc.so").write_text("/* GNU ld script */\nGROUP ( libc.so.6 )\n"),
     "not an ELF file (a linker script, a Git LFS pointer or a text file?)"),
    (lambda d: lfs_pointer(d / "libc.so"),
     "not an ELF file (a linker script, a Git LFS pointer or a text file?)"),
    (lambda d: _archive(d / "libc.so"),
     "not an ELF file: a static archive (ar), which is linked into programs, never loaded"),
    (lambda d: truncated(d / "libc.so", Path("/bin/true"), 40),
     "file too short (empty or truncated)"),
    (lambda d: (d / "libc.so").mkdir(), "is a directory"),
    (lambda d: None, "No such file or directory"),
])
def test_bad_input_is_one_line_and_exit_2(
        tmp_path: Path, make: Callable[[Path], object], message: str) -> None:
    make(tmp_path)
    for command in ("resolve", "check"):
        result = run(command, str(tmp_path / "libc.so"))
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [f"error: {tmp_path / 'libc.so'}: {message}"]
        assert result.stdout == ""


def test_a_32_bit_file_without_its_loader_is_bad_input(tmp_path: Path) -> None:
    copy = tmp_path / "app32"
    shutil.copy("/bin/true", copy)
    patch_class(copy, 1)
    result = run("resolve", str(copy))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_a_statically_linked_program_needs_nothing(tmp_path: Path) -> None:
    static = cc(tmp_path / "static", "-static", src="int main(void){return 0;}")
    result = run("resolve", str(static))
    assert result.returncode == 0
    assert "statically linked" in result.stdout
    checked = run("check", str(static))
    assert checked.returncode == 0, checked.stdout
    assert "statically linked" in checked.stdout


def _sysroot(root: Path) -> Path:
    """A small sysroot: its own loader and libc, a system library, an ld.so.conf directory."""
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "ld.so.conf").write_text("/opt/sdk/lib\n")
    for real, inside in [("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"),
                         ("/lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libc.so.6")]:
        (root / inside).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(real, root / inside)
    sdk = lib(root / "opt" / "sdk" / "lib" / "libsdk.so.3")
    system = lib(root / "usr" / "lib" / "x86_64-linux-gnu" / "libsys.so.1")
    return program(root / "usr" / "bin" / "app", needs=[sdk, system])


@pytest.mark.parametrize("with_cache", [False, True])
def test_root_resolves_inside_a_sysroot(tmp_path: Path, with_cache: bool) -> None:
    root = tmp_path / "root"
    app = _sysroot(root)
    if with_cache:
        subprocess.run(["ldconfig", "-r", str(root)], check=True)
        assert (root / "etc" / "ld.so.cache").exists()
    result = run("resolve", "--json", "--root", str(root), str(app))
    assert result.returncode == 0, result.stdout + result.stderr
    by_name = {lib["soname"]: lib for lib in json.loads(result.stdout)["libraries"]}
    assert by_name["libsdk.so.3"]["path"] == f"{root}/opt/sdk/lib/libsdk.so.3"
    assert by_name["libsdk.so.3"]["via"] == "ld.so.cache"
    assert by_name["libc.so.6"]["path"] == f"{root}/lib/x86_64-linux-gnu/libc.so.6"
    # Without the cache only the sysroot's system directories are searched.
    bare = run("resolve", "--json", "--inhibit-cache", "--root", str(root), str(app))
    assert bare.returncode == 1
    doc = json.loads(bare.stdout)
    assert doc["missing"] == ["libsdk.so.3"]
    system = next(lib for lib in doc["libraries"] if lib["soname"] == "libsys.so.1")
    assert (system["path"], system["via"]) == (
        f"{root}/usr/lib/x86_64-linux-gnu/libsys.so.1", "default")

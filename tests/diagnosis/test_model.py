"""The diagnosis names every library a test misses, the chain included: what the real
loader misses first, then what it misses next once the library found in the output_base is
given to it.

gcc builds the test and an SDK laid out as Bazel lays out an external repository; the real
loader (in ldd's trace mode, which lists every name it cannot find) is asked before and after.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from elfbuild import lib, program
from elftools.elf.elffile import ELFFile

from bazel_ldfix.diagnosis import model


def _not_found(exe: Path, library_path: str | None = None) -> set[str]:
    """The names the real loader cannot find for ``exe`` with this LD_LIBRARY_PATH."""
    with open(exe, "rb") as f:
        interp = next(seg.get_interp_name() for seg in ELFFile(f).iter_segments()
                      if seg["p_type"] == "PT_INTERP")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env["LD_TRACE_LOADED_OBJECTS"] = "1"    # ldd's mode: every name, found or not
    if library_path is not None:
        env["LD_LIBRARY_PATH"] = library_path
    out = subprocess.run([interp, str(exe)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[0] for line in out.splitlines() if "=> not found" in line}


def _layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A test needing libtop.so.1, which the output_base's sdk has and which needs
    libdeep.so.2, which nothing has (it was built elsewhere and is gone)."""
    ob = tmp_path / "ob"
    gone = lib(tmp_path / "elsewhere" / "libdeep.so.2")
    top = lib(ob / "external" / "sdk" / "lib" / "libtop.so.1", needs=[gone])
    exe = program(tmp_path / "bin" / "t", needs=[top])
    os.unlink(gone)
    return exe, ob, top.parent


def test_the_chain_is_what_the_real_loader_misses_once_each_found_library_is_given(
        tmp_path: Path) -> None:
    exe, ob, sdk_lib = _layout(tmp_path)
    first, then = _not_found(exe), _not_found(exe, str(sdk_lib))
    assert first == {"libtop.so.1"} and then == {"libdeep.so.2"}
    assert set(model.model_missing(None, str(exe), str(ob), None)) == first | then


def test_a_test_that_loads_misses_nothing(tmp_path: Path) -> None:
    exe, ob, sdk_lib = _layout(tmp_path)
    lib(sdk_lib / "libdeep.so.2")
    assert _not_found(exe, str(sdk_lib)) == set()
    assert model.model_missing(None, str(exe), str(ob), str(sdk_lib)) == ()


def test_a_missing_library_found_nowhere_ends_its_chain(tmp_path: Path) -> None:
    exe, ob, sdk_lib = _layout(tmp_path)
    os.unlink(sdk_lib / "libtop.so.1")
    assert _not_found(exe) == {"libtop.so.1"}
    assert model.model_missing("//t:t", str(exe), str(ob), None) == ("libtop.so.1",)

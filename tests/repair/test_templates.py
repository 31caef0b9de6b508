"""What an object names as places to load from (what could name a test's own files when
its outcome is moved to a twin), read by the ELF reader and checked against pyelftools."""

from __future__ import annotations

from pathlib import Path

from elfbuild import cc, lib
from elftools.elf.elffile import ELFFile

from bazel_ldfix import elf
from bazel_ldfix.repair.templates import named_paths


def _oracle(path: Path) -> tuple[str, ...]:
    """Search paths, interpreter and DT_NEEDED paths, as pyelftools reads them."""
    with path.open("rb") as f:
        e = ELFFile(f)
        dynamic = e.get_section_by_name(".dynamic")
        tags = {t.entry.d_tag: t for t in dynamic.iter_tags()}
        rpath = tags["DT_RPATH"].rpath if "DT_RPATH" in tags else ""
        runpath = tags["DT_RUNPATH"].runpath if "DT_RUNPATH" in tags else ""
        interp = next((s.get_interp_name() for s in e.iter_segments()
                       if s["p_type"] == "PT_INTERP"), "")
        needed = [t.needed for t in dynamic.iter_tags("DT_NEEDED") if "/" in t.needed]
    return (*rpath.split(":"), *runpath.split(":"), interp, *needed)


def test_search_paths_interpreter_and_needed_paths_are_named(tmp_path: Path) -> None:
    by_path = lib(tmp_path / "libp.so", soname="")      # no SONAME: linked by its path
    app = cc(tmp_path / "app", str(by_path), "-Wl,--enable-new-dtags",
             "-Wl,-rpath,$ORIGIN/lib:/opt/x", src="int main(void){return 0;}")
    named = named_paths(elf.read_elf(str(app)))
    assert named == _oracle(app)
    assert "$ORIGIN/lib" in named and "/opt/x" in named and str(by_path) in named


def test_a_library_with_an_rpath_names_it_and_no_interpreter(tmp_path: Path) -> None:
    dep = lib(tmp_path / "d" / "libd.so.1")
    libx = lib(tmp_path / "libx.so.1", needs=[dep], rpath="$ORIGIN/d")
    assert named_paths(elf.read_elf(str(libx))) == _oracle(libx)
    assert named_paths(None) == ()


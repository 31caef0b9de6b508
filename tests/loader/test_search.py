"""Each rule of the search model, on files built for it, checked against the real glibc loader.

Every test runs the model and ``ld.so`` in trace mode on the same file and asserts both that
they agree and what the outcome is, so a rule that both get wrong in the same way still
fails. The names say the rule (libtree's tests/NN_rule_name style).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import (
    DT_RUNPATH,
    DT_SONAME,
    cc,
    empty,
    lfs_pointer,
    lib,
    patch_class,
    patch_data,
    patch_machine,
    program,
    retag,
    truncated,
)

from bazel_ldfix import elf
from bazel_ldfix.loader import cacheflags, closure, host, ldcache, realloader
from bazel_ldfix.loader.conformance import Disagreement, compare
from bazel_ldfix.loader.resolution import Environment, Resolution, Via
from bazel_ldfix.loader.search import Loader
from bazel_ldfix.loader.trace import Trace, run_trace
from bazel_ldfix.loader.verify import opened_path

INTERP = "/lib64/ld-linux-x86-64.so.2"
pytestmark = pytest.mark.skipif(not os.path.exists(INTERP), reason="needs the x86-64 glibc loader")


@functools.cache
def _host() -> host.Host:
    return host.probe(INTERP)


@functools.cache
def _cache() -> Callable[[str], str | None]:
    cache = ldcache.read_cache("/etc/ld.so.cache")
    return functools.partial(cache.lookup, flags_ok=cacheflags.expected_flags(
        elf.ELFCLASS64, 62), hwcaps_active=_host().hwcaps)


def both(file: Path, *, library_path: str | None = None, cwd: Path | None = None,
         cache: bool = False) -> tuple[Resolution, Trace]:
    """The model's and the real loader's load of ``file``, asserted to agree."""
    where = os.path.realpath(cwd) if cwd is not None else "/"
    env = Environment(library_path, where, _cache() if cache else None)
    model = Loader(_host(), env).resolve(str(file))
    real = run_trace(INTERP, opened_path(str(file), model.info), library_path=library_path,
                     inhibit_cache=not cache, cwd=where)
    assert compare(model, real) == (), f"model: {model.libraries}\nloader: {real}"
    return model, real


def found(res: Resolution) -> dict[str, str | None]:
    """Name to path, first entry of each name."""
    out: dict[str, str | None] = {}
    for library in res.libraries:
        out.setdefault(library.name, library.path)
    return out


def names(res: Resolution) -> list[str]:
    return [library.name for library in res.libraries]


# -- RPATH, RUNPATH, LD_LIBRARY_PATH --------------------------------------------------------

def test_rpath_comes_before_ld_library_path(tmp_path: Path) -> None:
    a = lib(tmp_path / "a" / "libx.so")
    lib(tmp_path / "b" / "libx.so")
    app = program(tmp_path / "app", needs=[a], rpath=str(tmp_path / "a"))
    res, _ = both(app, library_path=str(tmp_path / "b"))
    assert found(res)["libx.so"] == f"{tmp_path}/a/libx.so"
    assert res.libraries[1].via is Via.RPATH


def test_ld_library_path_comes_before_runpath(tmp_path: Path) -> None:
    a = lib(tmp_path / "a" / "libx.so")
    lib(tmp_path / "b" / "libx.so")
    app = program(tmp_path / "app", needs=[a], runpath=str(tmp_path / "a"))
    res, _ = both(app, library_path=str(tmp_path / "b"))
    assert found(res)["libx.so"] == f"{tmp_path}/b/libx.so"
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/a/libx.so"


def test_rpath_of_loader_chain_applies_when_requester_has_no_runpath(tmp_path: Path) -> None:
    # app (RPATH a) -> libmid (RPATH m:m2) -> libleaf (nothing) -> libdeep (only in m2)
    # and libdeep2 (only in a): libleaf's search walks its loaders up to the program.
    deep = lib(tmp_path / "m2" / "libdeep.so")
    deep2 = lib(tmp_path / "a" / "libdeep2.so")
    leaf = lib(tmp_path / "m" / "libleaf.so", needs=[deep, deep2])
    mid = lib(tmp_path / "a" / "libmid.so", needs=[leaf], rpath=f"{tmp_path}/m:{tmp_path}/m2")
    app = program(tmp_path / "app", needs=[mid], rpath=str(tmp_path / "a"))
    res, _ = both(app)
    assert found(res)["libleaf.so"] == f"{tmp_path}/m/libleaf.so"    # libmid's own RPATH
    assert found(res)["libdeep.so"] == f"{tmp_path}/m2/libdeep.so"   # libmid's, inherited
    assert found(res)["libdeep2.so"] == f"{tmp_path}/a/libdeep2.so"  # the program's


def test_rpath_of_loader_chain_is_ignored_when_requester_has_runpath(tmp_path: Path) -> None:
    deep = lib(tmp_path / "a" / "libdeep.so")
    mid = lib(tmp_path / "a" / "libmid.so", needs=[deep], runpath="/nonexistent")
    app = program(tmp_path / "app", needs=[mid], rpath=str(tmp_path / "a"))
    res, _ = both(app)
    assert found(res)["libmid.so"] == f"{tmp_path}/a/libmid.so"
    assert found(res)["libdeep.so"] is None
    assert "libdeep.so" in res.missing


def test_ancestor_with_runpath_contributes_nothing_but_the_chain_goes_on(tmp_path: Path) -> None:
    # app (RPATH a) -> libmid (RUNPATH b) -> libleaf -> libdeep, in a and in b: libleaf's
    # search skips libmid (its RUNPATH is not an RPATH and is not inherited), then uses app's.
    lib(tmp_path / "b" / "libdeep.so")
    deep = lib(tmp_path / "a" / "libdeep.so")
    leaf = lib(tmp_path / "b" / "libleaf.so", needs=[deep])
    mid = lib(tmp_path / "a" / "libmid.so", needs=[leaf], runpath=str(tmp_path / "b"))
    app = program(tmp_path / "app", needs=[mid], rpath=str(tmp_path / "a"))
    res, _ = both(app)
    assert found(res)["libleaf.so"] == f"{tmp_path}/b/libleaf.so"
    assert found(res)["libdeep.so"] == f"{tmp_path}/a/libdeep.so"


def test_rpath_of_an_object_that_also_has_runpath_is_ignored(tmp_path: Path) -> None:
    # libmid has DT_RPATH a and DT_RUNPATH b: get-dynamic-info.h drops the RPATH, so libleaf
    # (loaded by libmid) cannot inherit it.
    deep = lib(tmp_path / "a" / "libdeep.so")
    leaf = lib(tmp_path / "b" / "libleaf.so", needs=[deep])
    mid = retag(lib(tmp_path / "l" / "libmid.so", soname=str(tmp_path / "b"), needs=[leaf],
                    rpath=str(tmp_path / "a")), DT_SONAME, DT_RUNPATH)
    info = elf.read_elf(str(mid))
    assert (info.rpath, info.runpath) == (str(tmp_path / "a"), str(tmp_path / "b"))
    app = program(tmp_path / "app", needs=[mid], runpath=str(tmp_path / "l"))
    res, _ = both(app)
    assert found(res)["libleaf.so"] == f"{tmp_path}/b/libleaf.so"
    assert res.missing == ("libdeep.so",)


def test_runpath_is_not_inherited(tmp_path: Path) -> None:
    deep = lib(tmp_path / "a" / "libdeep.so")
    mid = lib(tmp_path / "a" / "libmid.so", needs=[deep])
    app = program(tmp_path / "app", needs=[mid], runpath=str(tmp_path / "a"))
    res, _ = both(app)
    assert found(res)["libmid.so"] == f"{tmp_path}/a/libmid.so"
    assert res.missing == ("libdeep.so",)


def test_empty_ld_library_path_element_is_the_current_directory(tmp_path: Path) -> None:
    x = lib(tmp_path / "work" / "libx.so")
    app = program(tmp_path / "app", needs=[x])
    res, real = both(app, library_path="/nonexistent::", cwd=tmp_path / "work")
    # Printed as the loader builds it: "" + "libx.so", no "./".
    assert found(res)["libx.so"] == "libx.so"
    assert real.objects[1].path == "libx.so"


def test_empty_rpath_element_is_the_current_directory(tmp_path: Path) -> None:
    x = lib(tmp_path / "work" / "libx.so")
    app = program(tmp_path / "app", needs=[x], rpath="/nonexistent::/nonexistent2")
    res, _ = both(app, cwd=tmp_path / "work")
    assert found(res)["libx.so"] == "libx.so"


def test_semicolon_separates_ld_library_path_elements(tmp_path: Path) -> None:
    x = lib(tmp_path / "b" / "libx.so")
    app = program(tmp_path / "app", needs=[x])
    res, _ = both(app, library_path=f"/nonexistent;{tmp_path}/b")
    assert found(res)["libx.so"] == f"{tmp_path}/b/libx.so"


def test_duplicate_search_directories_are_tried_once(tmp_path: Path) -> None:
    x = lib(tmp_path / "b" / "libx.so")
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/a:{tmp_path}/a/:{tmp_path}/b")
    res, _ = both(app)
    rpath_dirs = next(s.dirs for s in res.libraries[1].steps if s.via is Via.RPATH)
    assert rpath_dirs == (f"{tmp_path}/a", f"{tmp_path}/b")
    assert found(res)["libx.so"] == f"{tmp_path}/b/libx.so"


# -- dynamic string tokens --------------------------------------------------------------------

def test_origin_in_rpath_is_the_program_directory(tmp_path: Path) -> None:
    x = lib(tmp_path / "bin" / "lib" / "libx.so")
    app = program(tmp_path / "bin" / "app", needs=[x], rpath="$ORIGIN/lib")
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/bin/lib/libx.so"


def test_braced_origin_in_runpath(tmp_path: Path) -> None:
    x = lib(tmp_path / "bin" / "lib" / "libx.so")
    app = program(tmp_path / "bin" / "app", needs=[x], runpath="${ORIGIN}/lib")
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/bin/lib/libx.so"


def test_origin_in_ld_library_path_is_the_program_directory(tmp_path: Path) -> None:
    x = lib(tmp_path / "bin" / "lib" / "libx.so")
    app = program(tmp_path / "bin" / "app", needs=[x])
    res, _ = both(app, library_path="/nonexistent:$ORIGIN/lib")
    assert found(res)["libx.so"] == f"{tmp_path}/bin/lib/libx.so"


def test_origin_of_a_library_is_its_own_directory(tmp_path: Path) -> None:
    deep = lib(tmp_path / "a" / "sub" / "libdeep.so")
    mid = lib(tmp_path / "a" / "libmid.so", needs=[deep], runpath="$ORIGIN/sub")
    app = program(tmp_path / "app", needs=[mid], runpath=str(tmp_path / "a"))
    res, _ = both(app)
    assert found(res)["libdeep.so"] == f"{tmp_path}/a/sub/libdeep.so"


def test_origin_in_dt_needed_is_expanded_before_the_search(tmp_path: Path) -> None:
    stub = lib(tmp_path / "stub" / "libx.so", soname="$ORIGIN/libx.so")
    lib(tmp_path / "bin" / "libx.so", soname="")
    app = program(tmp_path / "bin" / "app", needs=[stub])
    assert elf.read_elf(str(app)).needed[0] == "$ORIGIN/libx.so"
    res, real = both(app)
    assert found(res)[f"{tmp_path}/bin/libx.so"] == f"{tmp_path}/bin/libx.so"
    assert res.libraries[1].via is Via.PATH
    assert real.objects[1].name == f"{tmp_path}/bin/libx.so"


def test_lib_and_platform_tokens_take_the_loader_values(tmp_path: Path) -> None:
    h = _host()
    x = lib(tmp_path / "bin" / h.lib / "libx.so")
    y = lib(tmp_path / "bin" / h.platform / "liby.so")
    app = program(tmp_path / "bin" / "app", needs=[x, y], rpath="$ORIGIN/$LIB:$ORIGIN/${PLATFORM}")
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/bin/{h.lib}/libx.so"
    assert found(res)["liby.so"] == f"{tmp_path}/bin/{h.platform}/liby.so"


def test_origin_of_the_program_is_its_real_directory_through_a_symlink(tmp_path: Path) -> None:
    # A Bazel runfiles tree: the program is a symlink; the kernel starts the real file.
    x = lib(tmp_path / "real" / "lib" / "libx.so")
    lib(tmp_path / "tree" / "lib" / "libx.so")          # beside the link: must not be used
    app = program(tmp_path / "real" / "app", needs=[x], rpath="$ORIGIN/lib")
    (tmp_path / "tree" / "app").symlink_to(app)
    res, _ = both(tmp_path / "tree" / "app")
    assert found(res)["libx.so"] == f"{tmp_path}/real/lib/libx.so"


def test_origin_of_a_library_found_through_a_symlinked_directory_is_that_directory(
        tmp_path: Path) -> None:
    deep = lib(tmp_path / "real" / "dep" / "libdeep.so")
    mid = lib(tmp_path / "real" / "lib" / "libmid.so", needs=[deep], rpath="$ORIGIN/../dep")
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "lib").symlink_to(tmp_path / "real" / "lib")
    app = program(tmp_path / "app", needs=[mid], rpath=f"{tmp_path}/link/lib")
    res, _ = both(app)
    # $ORIGIN is the directory string the library was found under, not its real path.
    assert found(res)["libdeep.so"] == f"{tmp_path}/link/lib/../dep/libdeep.so"


def test_origin_of_a_library_opened_through_a_symlink_is_the_links_directory(
        tmp_path: Path) -> None:
    # A runfiles tree names a library through a symlink: opened by that name (dlopen, or
    # ld.so given the file), its $ORIGIN is the link's directory, never the target's.
    libf = lib(tmp_path / "a" / "libf.so")
    libg = lib(tmp_path / "a" / "libg.so", needs=[libf], runpath="$ORIGIN")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "libg.so").symlink_to("../a/libg.so")
    res, real = both(tmp_path / "b" / "libg.so")
    assert res.missing == ("libf.so",) and real.missing == ("libf.so",)
    res, _ = both(libg)            # through its own directory it finds its sibling
    assert found(res)["libf.so"] == f"{tmp_path}/a/libf.so"
    # What a process that dlopen()s the link gets, which ld.so --list stands for.
    opener = cc(tmp_path / "opener", "-ldl", src=DLOPEN_SRC)
    run = subprocess.run([str(opener), str(tmp_path / "b" / "libg.so")], capture_output=True,
                         text=True, env={"PATH": os.environ.get("PATH", "")})
    assert run.returncode == 1 and "libf.so: cannot open shared object file" in run.stdout


def test_check_disagrees_with_a_model_that_takes_a_librarys_origin_from_its_real_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # check asks the real loader about the name the library is opened by, so a model that
    # got $ORIGIN wrong is caught rather than agreed with.
    libf = lib(tmp_path / "a" / "libf.so")
    lib(tmp_path / "a" / "libg.so", needs=[libf], runpath="$ORIGIN")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "libg.so").symlink_to("../a/libg.so")
    link = str(tmp_path / "b" / "libg.so")
    assert realloader.check_file(link, closure.Options(inhibit_cache=True)).disagreements == ()
    monkeypatch.setattr(Loader, "_main_origin",
                        lambda self, path, info: os.path.dirname(os.path.realpath(path)))
    wrong = realloader.check_file(link, closure.Options(inhibit_cache=True))
    assert [(d.name, d.loader) for d in wrong.disagreements] == [("libf.so", None)]


DLOPEN_SRC = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  if (dlopen(argv[1], RTLD_NOW)) { puts("loaded"); return 0; }
  puts(dlerror()); return 1;
}
"""


# -- files that are not what they seem ------------------------------------------------------

def test_wrong_class_and_wrong_machine_decoys_are_skipped(tmp_path: Path) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    patch_class(lib(tmp_path / "c32" / "libx.so"), elf.ELFCLASS32)
    patch_machine(lib(tmp_path / "arm" / "libx.so"), 183)
    app = program(tmp_path / "app", needs=[x],
                  rpath=f"{tmp_path}/c32:{tmp_path}/arm:{tmp_path}/good")
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/good/libx.so"
    assert [r.reason for r in res.libraries[1].rejected] == [
        "wrong ELF class: ELFCLASS32", "wrong machine: aarch64"]


def test_big_endian_decoy_stops_the_load(tmp_path: Path) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    patch_data(lib(tmp_path / "be" / "libx.so"), elf.ELFDATA2MSB)
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/be:{tmp_path}/good")
    res, real = both(app)
    assert real.error == f"{tmp_path}/be/libx.so: ELF file data encoding not little-endian"
    assert res.error == real.error


@pytest.mark.parametrize(("make", "message"), [
    (lambda d, src: truncated(d / "libx.so", src, 20), "file too short"),
    (lambda d, src: empty(d / "libx.so"), "file too short"),
    (lambda d, src: lfs_pointer(d / "libx.so"), "invalid ELF header"),
    (lambda d, src: truncated(d / "libx.so", src, 64), "cannot read file data"),
    (lambda d, src: (d / "libx.so").mkdir(parents=True), "cannot read file data: Error 21"),
], ids=["truncated-header", "empty", "lfs-pointer", "header-only", "directory"])
def test_unreadable_candidate_stops_the_load_in_glibc_words(
        tmp_path: Path, make: Callable[[Path, Path], object], message: str) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    make(tmp_path / "bad", x)
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/bad:{tmp_path}/good")
    res, real = both(app)
    assert real.error == f"{tmp_path}/bad/libx.so: {message}"
    assert res.error == real.error


def test_library_truncated_inside_its_segments_crashes_the_loader(tmp_path: Path) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    truncated(tmp_path / "bad" / "libx.so", x, 4096)
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/bad")
    res, real = both(app)
    assert real.signal is not None
    assert res.error is not None and "truncated" in res.error


def test_position_independent_executable_as_dependency_stops_the_load(tmp_path: Path) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    program(tmp_path / "bad" / "libx.so")
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/bad")
    res, real = both(app)
    assert real.error == "libx.so: cannot dynamically load position-independent executable"
    assert res.libraries[-1].error == "cannot dynamically load position-independent executable"


def test_symlink_loop_abandons_the_rest_of_that_search_list(tmp_path: Path) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "libx.so").symlink_to("libx.so")
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/loop:{tmp_path}/good")
    res, _ = both(app)
    assert res.missing == ("libx.so",)
    res, _ = both(app, library_path=f"{tmp_path}/good")   # the next list is still searched
    assert found(res)["libx.so"] == f"{tmp_path}/good/libx.so"


# -- subdirectories and the default directories ---------------------------------------------

@pytest.mark.parametrize("sub", ["glibc-hwcaps/x86-64-v2", "tls", "x86_64"])
def test_glibc_hwcaps_and_legacy_subdirectories_are_preferred(tmp_path: Path, sub: str) -> None:
    # glibc 2.36 still searches the legacy hwcap subdirectories (2.37 dropped them); the
    # host probe says which exist, in which order.
    assert sub in _host().subdirs
    x = lib(tmp_path / "a" / "libx.so")
    lib(tmp_path / "a" / sub / "libx.so")
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/a")
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/a/{sub}/libx.so"


def test_nodefaultlib_skips_the_system_directories(tmp_path: Path) -> None:
    x = lib(tmp_path / "a" / "libx.so")
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/a", nodeflib=True)
    res, _ = both(app)
    assert found(res)["libx.so"] == f"{tmp_path}/a/libx.so"
    assert found(res)["libc.so.6"] is None                      # only in /lib/x86_64-linux-gnu
    plain, _ = both(program(tmp_path / "plain", needs=[x], rpath=f"{tmp_path}/a"))
    assert found(plain)["libc.so.6"] == "/lib/x86_64-linux-gnu/libc.so.6"


def test_nodefaultlib_drops_cache_hits_in_system_directories(tmp_path: Path) -> None:
    x = lib(tmp_path / "a" / "libx.so")
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/a", nodeflib=True)
    res, _ = both(app, cache=True)
    assert found(res)["libc.so.6"] is None
    libc = next(x for x in res.libraries if x.name == "libc.so.6")
    cache_step = next(s for s in libc.steps if s.via is Via.CACHE)
    assert cache_step.skipped is not None and "DF_1_NODEFLIB" in cache_step.skipped


def test_nodefaultlib_keeps_cache_hits_outside_system_directories(tmp_path: Path) -> None:
    cached = _cache()("libcupti.so.13")
    if cached is None or not cached.startswith("/usr/local/"):
        pytest.skip("no ld.so.cache entry outside the system directories")
    stub = lib(tmp_path / "stub" / "libcupti.so.13")
    # Without libc of its own: its "not found" entry would come first in the chain, and
    # glibc's version check would then stop the load (see the test below).
    app = cc(tmp_path / "app", "-nostdlib", "-Wl,-z,nodefaultlib", "-L", str(stub.parent),
             "-l:libcupti.so.13", src="void _start(void){}")
    res, _ = both(app, cache=True)
    assert found(res)["libcupti.so.13"] == cached
    assert found(res)["libc.so.6"] == "/lib/x86_64-linux-gnu/libc.so.6"   # for libcupti


def test_version_check_stops_a_load_whose_libc_entry_is_not_found(tmp_path: Path) -> None:
    # The program (NODEFLIB) cannot find libc.so.6; libcupti, found through the cache,
    # loads the real one. _dl_check_map_versions looks libc.so.6 up by name, meets the
    # "not found" entry first, and libpthread's DT_RELR then lacks its GLIBC_ABI_DT_RELR
    # version: glibc stops the load, the model does not.
    cached = _cache()("libcupti.so.13")
    if cached is None or not cached.startswith("/usr/local/"):
        pytest.skip("no ld.so.cache entry outside the system directories")
    stub = lib(tmp_path / "stub" / "libcupti.so.13")
    app = program(tmp_path / "app", needs=[stub], nodeflib=True)
    _, real = both(app, cache=True)
    assert real.error == ("/lib/x86_64-linux-gnu/libpthread.so.0: "
                          "DT_RELR without GLIBC_ABI_DT_RELR dependency")


def test_cache_finds_what_the_default_directories_do_not(tmp_path: Path) -> None:
    cached = _cache()("libcupti.so.13") or _cache()("libfakeroot-sysv.so")
    if cached is None or not os.path.exists(cached):
        pytest.skip("no ld.so.cache entry outside the default directories")
    soname = os.path.basename(cached)
    stub = lib(tmp_path / "stub" / soname)
    app = program(tmp_path / "app", needs=[stub])
    res, _ = both(app, cache=True)
    assert found(res)[soname] == cached
    res, _ = both(app)
    assert soname in res.missing


# -- the order and identity of objects ------------------------------------------------------

def test_load_order_is_breadth_first(tmp_path: Path) -> None:
    c = lib(tmp_path / "l" / "libc1.so")
    d = lib(tmp_path / "l" / "libd.so")
    a = lib(tmp_path / "l" / "liba.so", needs=[c])
    b = lib(tmp_path / "l" / "libb.so", needs=[d])
    app = program(tmp_path / "app", needs=[a, b], rpath=f"{tmp_path}/l")
    res, _ = both(app)
    assert names(res)[:5] == ["linux-vdso.so.1", "liba.so", "libb.so", "libc.so.6", "libc1.so"]
    assert names(res)[5:] == ["libd.so", INTERP]


def test_soname_needed_twice_is_loaded_once(tmp_path: Path) -> None:
    c = lib(tmp_path / "l" / "libshared.so")
    a = lib(tmp_path / "l" / "liba.so", needs=[c])
    b = lib(tmp_path / "l" / "libb.so", needs=[c])
    app = program(tmp_path / "app", needs=[a, b], rpath=f"{tmp_path}/l")
    res, _ = both(app)
    assert names(res).count("libshared.so") == 1
    entry = next(x for x in res.libraries if x.name == "libshared.so")
    assert entry.needed_by == (f"{tmp_path}/l/liba.so", f"{tmp_path}/l/libb.so")


def test_missing_library_is_listed_once_per_object_that_needs_it(tmp_path: Path) -> None:
    gone = lib(tmp_path / "gone" / "libgone.so")
    a = lib(tmp_path / "l" / "liba.so", needs=[gone])
    b = lib(tmp_path / "l" / "libb.so", needs=[gone])
    app = program(tmp_path / "app", needs=[a, b], rpath=f"{tmp_path}/l")
    gone.unlink()
    res, real = both(app)
    # glibc never reuses its "not found" placeholder: each requester searches again.
    assert [o.name for o in real.objects].count("libgone.so") == 2
    assert res.missing == ("libgone.so",)


def test_missing_for_one_requester_may_be_found_by_the_next(tmp_path: Path) -> None:
    x = lib(tmp_path / "only_b" / "libx.so")
    a = lib(tmp_path / "l" / "liba.so", needs=[x], runpath="/nonexistent")
    b = lib(tmp_path / "l" / "libb.so", needs=[x], runpath=f"{tmp_path}/only_b")
    app = program(tmp_path / "app", needs=[a, b], runpath=f"{tmp_path}/l")
    res, _ = both(app)
    paths = [x.path for x in res.libraries if x.name == "libx.so"]
    assert paths == [None, f"{tmp_path}/only_b/libx.so"]


def test_needed_name_equal_to_a_loaded_soname_reuses_that_object(tmp_path: Path) -> None:
    real = tmp_path / "d" / "libreal.so"
    lib(real, soname="")
    stub = lib(tmp_path / "stub" / "libfoo.so.1")
    b = lib(tmp_path / "l" / "libb.so", needs=[stub])
    # Linked against a SONAME-less file, the program records its path; then the file gets
    # the SONAME libb asks for, which no search directory has a file of.
    app = program(tmp_path / "app", needs=[b], extra=[str(real)], rpath=f"{tmp_path}/l")
    lib(real, soname="libfoo.so.1")
    assert elf.read_elf(str(app)).needed[:2] == ("libb.so", str(real))
    res, _ = both(app)
    assert "libfoo.so.1" not in names(res)
    assert found(res)[str(real)] == str(real)


def test_same_file_under_two_names_is_one_object(tmp_path: Path) -> None:
    x = lib(tmp_path / "a" / "libx.so.1", soname="")
    (tmp_path / "a" / "liby.so").symlink_to("libx.so.1")
    app = program(tmp_path / "app", needs=[x, tmp_path / "a" / "liby.so"], rpath=f"{tmp_path}/a")
    assert elf.read_elf(str(app)).needed[:2] == ("libx.so.1", "liby.so")
    res, _ = both(app)
    assert "liby.so" not in names(res)
    assert found(res)["libx.so.1"] == f"{tmp_path}/a/libx.so.1"


def test_needed_name_with_a_slash_is_opened_as_a_path(tmp_path: Path) -> None:
    x = lib(tmp_path / "sub" / "libx.so", soname="")
    lib(tmp_path / "sub" / "liby.so", soname="")
    # One absolute and one relative DT_NEEDED: the linker records the paths as given.
    app = cc(tmp_path / "app", str(x), "sub/liby.so", src="int main(void){return 0;}",
             cwd=tmp_path)
    assert elf.read_elf(str(app)).needed[:2] == (str(x), "sub/liby.so")
    res, _ = both(app, cwd=tmp_path)
    assert found(res)[str(x)] == str(x)
    assert found(res)["sub/liby.so"] == "sub/liby.so"
    assert res.libraries[2].via is Via.PATH


def test_vdso_and_interpreter_are_listed(tmp_path: Path) -> None:
    app = program(tmp_path / "app")
    res, real = both(app)
    assert names(res) == ["linux-vdso.so.1", "libc.so.6", INTERP]
    assert real.objects[-1].path == INTERP


def test_interpreter_needed_first_is_listed_before_the_vdso(tmp_path: Path) -> None:
    app = cc(tmp_path / "app", "-L/lib/x86_64-linux-gnu", "-l:ld-linux-x86-64.so.2",
             src="int main(void){return 0;}")
    res, _ = both(app)
    assert names(res) == [INTERP, "linux-vdso.so.1", "libc.so.6"]


def test_interpreter_needed_by_nobody_is_not_listed(tmp_path: Path) -> None:
    x = cc(tmp_path / "l" / "libx.so", "-shared", "-nostdlib", "-Wl,-soname,libx.so")
    app = cc(tmp_path / "app", "-nostdlib", "-L", str(tmp_path / "l"), "-l:libx.so",
             f"-Wl,-rpath,{tmp_path}/l", src="void _start(void){}")
    res, _ = both(app)
    assert names(res) == ["linux-vdso.so.1", "libx.so"]
    assert x.exists()


def test_program_without_needed_entries_lists_nothing(tmp_path: Path) -> None:
    app = cc(tmp_path / "app", "-nostdlib", src="void _start(void){}")
    res, real = both(app)
    assert real.static and res.libraries == ()


def test_shared_library_as_the_file(tmp_path: Path) -> None:
    x = lib(tmp_path / "l" / "libx.so")
    top = lib(tmp_path / "libtop.so", needs=[x], rpath=f"{tmp_path}/l")
    assert elf.read_elf(str(top)).interp is None
    res, _ = both(top)
    assert names(res) == ["linux-vdso.so.1", "libx.so", "libc.so.6", INTERP]


# -- the sweep, CI-sized --------------------------------------------------------------------

def test_sweep_of_system_files_agrees() -> None:
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import sweep

    files = sweep.sample(sweep.candidates(), 40)
    results = sweep.run(files, _host(), cache=True)
    compared = [r for r in results if r.skipped is None]
    assert len(compared) >= 30
    bad: list[Disagreement] = [d for r in compared for d in r.disagreements]
    assert bad == []


# -- symbol versions (dl-version.c) ------------------------------------------------------

def _versioned(path: Path, versions: list[str]) -> Path:
    """A library defining ``versions`` (one function each), by a linker version script."""
    script = path.parent / (path.name + ".map")
    path.parent.mkdir(parents=True, exist_ok=True)
    lines, previous = [], None
    for n, version in enumerate(versions):
        lines.append(f"{version} {{ global: f{n}; {'local: *; ' if n == 0 else ''}}}"
                     + (f" {previous};" if previous else ";"))
        previous = version
    script.write_text("\n".join(lines) + "\n")
    src = " ".join(f"int f{n}(void){{return {n};}}" for n in range(len(versions)))
    return cc(path, "-shared", f"-Wl,-soname,{path.name}", f"-Wl,--version-script={script}",
              src=src)


def _calling(out: Path, function: str, library: Path, *, rpath: str) -> Path:
    """A program that calls ``function`` of ``library`` (so it needs its version)."""
    main = out.parent / (out.name + ".c")
    main.write_text(f"int {function}(void); int main(void){{return {function}();}}\n")
    # The source goes before the library, so that the linker resolves the call from it.
    return cc(out, str(main), "-L", str(library.parent), f"-l:{library.name}",
              f"-Wl,-rpath,{rpath}", src="")


def test_a_version_the_library_found_does_not_define_is_reported(tmp_path: Path) -> None:
    new = _versioned(tmp_path / "new" / "libv.so.1", ["V1", "V2"])
    _versioned(tmp_path / "old" / "libv.so.1", ["V1"])
    app = _calling(tmp_path / "app", "f1", new, rpath=f"{tmp_path}/old")
    res, real = both(app)
    assert [v.message for v in res.versions] == [
        f"{tmp_path}/old/libv.so.1: version `V2' not found (required by {app})"]
    assert res.versions[0].fatal and real.versions


def test_a_library_without_version_information_is_only_a_warning(tmp_path: Path) -> None:
    new = _versioned(tmp_path / "new" / "libv.so.1", ["V1"])
    lib(tmp_path / "plain" / "libv.so.1", extra=["-Wl,--defsym=f0=0"])
    app = _calling(tmp_path / "app", "f0", new, rpath=f"{tmp_path}/plain")
    res, _ = both(app)
    (problem,) = res.versions
    assert problem.version is None and not problem.fatal
    assert problem.message.endswith("no version information available (required by "
                                    f"{app})")

"""The pure parts of the loader model, its probe and trace parsers, and the comparison."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import empty, lfs_pointer, lib, patch_class, patch_data, patch_machine, program

from bazel_ldfix import elf
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.conformance import compare
from bazel_ldfix.loader.host import parse_probe
from bazel_ldfix.loader.paths import decompose, substitute
from bazel_ldfix.loader.resolution import Library, Resolution, Via
from bazel_ldfix.loader.trace import Trace, TracedObject, parse_trace
from bazel_ldfix.loader.verify import verify

VALUES = {"ORIGIN": "/opt/app", "LIB": "lib/x86_64-linux-gnu", "PLATFORM": "x86_64"}


# -- dynamic string tokens (_dl_dst_substitute) -----------------------------------------------

@pytest.mark.parametrize(("text", "expanded"), [
    ("$ORIGIN/lib", "/opt/app/lib"),
    ("${ORIGIN}/lib", "/opt/app/lib"),
    ("$ORIGIN", "/opt/app"),
    ("$ORIGIN/../$LIB", "/opt/app/../lib/x86_64-linux-gnu"),
    ("/x/${PLATFORM}/y", "/x/x86_64/y"),
    ("$PLATFORMx", "$PLATFORMx"),          # an identifier character follows: not a token
    ("$ORIGIN_1/lib", "$ORIGIN_1/lib"),
    ("${ORIGIN/lib", "${ORIGIN/lib"),      # no closing brace
    ("$HOME/lib", "$HOME/lib"),            # not a token glibc knows: kept
    ("$$ORIGIN", "$/opt/app"),
    ("lib$", "lib$"),
    ("${LIB}${PLATFORM}", "lib/x86_64-linux-gnux86_64"),
])
def test_substitute_expands_only_whole_known_tokens(text: str, expanded: str) -> None:
    assert substitute(text, VALUES) == expanded


def test_substitute_gives_nothing_when_a_token_has_no_value() -> None:
    assert substitute("/a/$ORIGIN/b", {**VALUES, "ORIGIN": None}) == ""
    assert substitute("/a/b", {**VALUES, "ORIGIN": None}) == "/a/b"


# -- search lists (fillin_rpath) ----------------------------------------------------------------

def test_decompose_keeps_empty_elements_as_the_current_directory() -> None:
    assert decompose(["", "/a", ""], VALUES) == ("", "/a")


def test_decompose_strips_trailing_slashes_but_keeps_root() -> None:
    assert decompose(["/a//", "/", "//"], VALUES) == ("/a", "/")


def test_decompose_drops_duplicates_after_normalising() -> None:
    assert decompose(["/a", "/a/", "/b", "/a"], VALUES) == ("/a", "/b")


def test_decompose_drops_elements_whose_token_has_no_value() -> None:
    assert decompose(["$ORIGIN/lib", "/b"], {**VALUES, "ORIGIN": None}) == ("/b",)


def test_decompose_expands_each_element_on_its_own() -> None:
    # An $ORIGIN containing ':' stays one directory (LD_LIBRARY_PATH is split first).
    assert decompose(["$ORIGIN/lib", "x"], {**VALUES, "ORIGIN": "/a:b"}) == ("/a:b/lib", "x")


def test_decompose_roots_absolute_paths_but_not_origin() -> None:
    rooted = decompose(["/usr/lib", "$ORIGIN/lib", "rel"], VALUES, lambda p: "/sysroot" + p
                       if p.startswith("/") else p)
    assert rooted == ("/sysroot/usr/lib", "/opt/app/lib", "rel")


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


# -- the trace (LD_TRACE_LOADED_OBJECTS=1), as captured from glibc 2.36 --------------------

LISTING = """\
\tlinux-vdso.so.1 (0x00007ffd5a3e2000)
\tlibb.so => /tmp/exp/d/libb.so (0x00007f9326c9f000)
\tlibt.so (0x00007ff6b1e3d000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f9326ab8000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f9326cb3000)
\tlibmiss.so => not found
\tlibmiss.so => not found
"""


def test_parse_trace_reads_paths_names_and_repeated_misses() -> None:
    trace = parse_trace("/tmp/exp/p", LISTING, "", 0)
    assert trace.objects == (
        TracedObject("linux-vdso.so.1", "linux-vdso.so.1"),
        TracedObject("libb.so", "/tmp/exp/d/libb.so"),
        TracedObject("libt.so", "libt.so"),               # found in the cwd
        TracedObject("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
        TracedObject("/lib64/ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2"),
        TracedObject("libmiss.so", None),
        TracedObject("libmiss.so", None))
    assert trace.missing == ("libmiss.so",)
    assert trace.error is None and not trace.static and trace.signal is None


def test_parse_trace_reads_the_fatal_error_after_the_program_name() -> None:
    stderr = ("/tmp/exp/p_dir: error while loading shared libraries: "
              "/tmp/exp/dir/libt.so: cannot read file data: Error 21\n")
    trace = parse_trace("/tmp/exp/p_dir", "", stderr, 127)
    assert trace.error == "/tmp/exp/dir/libt.so: cannot read file data: Error 21"
    assert trace.objects == ()


def test_parse_trace_recognises_statically_linked_and_signals() -> None:
    assert parse_trace("/sbin/ldconfig", "\tstatically linked\n", "", 0).static
    assert parse_trace("/x", "", "", -7).signal == 7


# -- one candidate (open_verify) ----------------------------------------------------------------

@pytest.fixture(scope="module")
def expect() -> elf.ElfHeader:
    return elf.read_header("/bin/sh")


def test_verify_accepts_a_shared_library(tmp_path: Path, expect: elf.ElfHeader) -> None:
    verdict = verify(str(lib(tmp_path / "libx.so")), expect)
    assert verdict.accepted and verdict.info is not None and verdict.info.soname == "libx.so"
    assert verdict.file_id is not None


def test_verify_skips_other_class_and_machine(tmp_path: Path, expect: elf.ElfHeader) -> None:
    c32 = patch_class(lib(tmp_path / "a" / "libx.so"), elf.ELFCLASS32)
    arm = patch_machine(lib(tmp_path / "b" / "libx.so"), 183)
    for path, reason in ((c32, "wrong ELF class: ELFCLASS32"), (arm, "wrong machine: aarch64")):
        verdict = verify(str(path), expect)
        assert (verdict.accepted, verdict.fatal, verdict.reason) == (False, False, reason)
        assert verdict.open_errno == errno.ENOENT      # what glibc leaves in errno


@pytest.mark.parametrize(("make", "reason"), [  # each returns what it made
    (lambda p: empty(p), "file too short"),
    (lambda p: lfs_pointer(p), "invalid ELF header"),
    (lambda p: p.mkdir(), "cannot read file data: Error 21"),
    (lambda p: patch_data(lib(p), elf.ELFDATA2MSB), "ELF file data encoding not little-endian"),
])
def test_verify_stops_at_files_that_are_not_usable_elf(
        tmp_path: Path, expect: elf.ElfHeader, make: Callable[[Path], object],
        reason: str) -> None:
    path = tmp_path / "libx.so"
    make(path)
    verdict = verify(str(path), expect)
    assert (verdict.fatal, verdict.names_request, verdict.reason) == (True, False, reason)


def test_verify_names_the_request_for_mapping_errors(tmp_path: Path,
                                                     expect: elf.ElfHeader) -> None:
    verdict = verify(str(program(tmp_path / "libx.so")), expect)
    assert verdict.fatal and verdict.names_request
    assert verdict.reason == "cannot dynamically load position-independent executable"


def test_verify_reports_a_missing_file_as_absent(tmp_path: Path, expect: elf.ElfHeader) -> None:
    verdict = verify(str(tmp_path / "nothing.so"), expect)
    assert not verdict.exists and not verdict.fatal and verdict.open_errno == errno.ENOENT


# -- the comparison ---------------------------------------------------------------------------

def _resolution(*entries: tuple[str, str | None], error: str | None = None) -> Resolution:
    info = elf.read_elf("/bin/sh")
    return Resolution("/bin/sh", info, tuple(Library(n, p, Via.DEFAULT, ()) for n, p in entries),
                      error)


def _trace(*entries: tuple[str, str | None], error: str | None = None) -> Trace:
    return Trace("/bin/sh", tuple(TracedObject(n, p) for n, p in entries), error,
                 127 if error else 0)


def test_compare_agrees_on_equal_listings() -> None:
    pair = (("libc.so.6", "/lib/libc.so.6"), ("libx.so", None))
    assert compare(_resolution(*pair), _trace(*pair)) == ()


def test_compare_names_a_different_path() -> None:
    (d,) = compare(_resolution(("libx.so", "/a/libx.so")), _trace(("libx.so", "/b/libx.so")))
    assert (d.name, d.model, d.loader) == ("libx.so", "/a/libx.so", "/b/libx.so")


def test_compare_names_a_missing_entry_and_a_count() -> None:
    found = compare(_resolution(("libx.so", None)),
                    _trace(("libx.so", None), ("libx.so", None)))
    assert [d.what for d in found] == ["the loader lists it twice, the model once"]


def test_compare_names_the_order() -> None:
    a, b = ("liba.so", "/l/liba.so"), ("libb.so", "/l/libb.so")
    (d,) = compare(_resolution(a, b), _trace(b, a))
    assert "order" in d.what


def test_compare_only_compares_errors_when_the_loader_stopped() -> None:
    assert compare(_resolution(("libx.so", "/a"), error="/b/libx.so: file too short"),
                   _trace(error="/b/libx.so: file too short")) == ()
    (d,) = compare(_resolution(("libx.so", "/a")), _trace(error="/b/libx.so: file too short"))
    assert d.name == "/b/libx.so" and d.loader == "/b/libx.so: file too short"

"""The real loader is always given the file by a path: ld.so reads a name without a slash
as a soname to search for (elf/rtld.c hands it to _dl_map_object, which searches a name
without '/'), not as the file in the current directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from elfbuild import lib

from bazel_ldfix.loader import host, trace
from bazel_ldfix.loader.trace import TracedObject, parse_trace

HOST_LOADER = host.host_loader()[0]


def library_with_a_neighbour(tmp_path: Path) -> Path:
    """``liba.so``, which needs ``libb.so.1`` beside it (RUNPATH ``$ORIGIN``)."""
    libb = lib(tmp_path / "libb.so.1")
    return lib(tmp_path / "liba.so", needs=[libb], runpath="$ORIGIN")


def test_a_bare_file_name_is_traced_as_the_file_in_the_working_directory(
        tmp_path: Path) -> None:
    library_with_a_neighbour(tmp_path)
    # The real loader itself: given "liba.so", it searches for a library of that name.
    bare = subprocess.run([HOST_LOADER, "liba.so"], cwd=tmp_path, capture_output=True,
                          text=True, env={"LD_TRACE_LOADED_OBJECTS": "1"})
    assert "liba.so: cannot open shared object file" in bare.stderr
    got = trace.run_trace(HOST_LOADER, "liba.so", library_path=None, inhibit_cache=True,
                          cwd=str(tmp_path))
    assert got.error is None and got.missing == ()
    assert [os.path.realpath(o.path) for o in got.objects if o.name == "libb.so.1"] == \
        [str(tmp_path / "libb.so.1")]


def test_check_of_a_bare_file_name_agrees_with_check_of_its_path(tmp_path: Path) -> None:
    library_with_a_neighbour(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}

    def check(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bazel_ldfix", "check", "--json", name],
                              cwd=tmp_path, capture_output=True, text=True, env=env)

    bare, dotted = check("liba.so"), check("./liba.so")
    assert (bare.returncode, dotted.returncode) == (0, 0), bare.stdout + bare.stderr
    docs = [json.loads(result.stdout) for result in (bare, dotted)]
    assert [(d["disagreements"], d["loads"]) for d in docs] == [([], True), ([], True)]
    assert "bug" not in bare.stdout + bare.stderr


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


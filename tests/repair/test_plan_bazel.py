"""The proof of a run's values, on a real Bazel 4.2.3: where it splits and where it must not.

Every test prints the libbar and liba lines of its ``/proc/self/maps``; the assertions read
them from bazel-testlogs, so they say what the loader really mapped.

- A stray no value avoids (a library the repair gives looks ``libbar.so.3`` up through its
  own RPATH) is the test's own: it is said, and the run is not split test by test.
- A library a test's own files do not lead to is chosen as for the test alone, whatever
  the other tests of the run are called.
- A test is split off rather than left without a library it gets alone (a link would
  change what another test loads, so one value cannot give it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

SHOWS = ("#include <stdio.h>\n#include <string.h>\nint main(void) {\n"
         '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
         "  while (f && fgets(line, sizeof line, f))\n"
         '    if (strstr(line, "/libbar") || strstr(line, "/liba.")) printf("maps %s", line);\n'
         "  return 0;\n}\n")
CALLS = SHOWS.replace("int main(void) {", "int bar_version(void);\nint main(void) {").replace(
    "return 0;", "return bar_version() > 0 ? 0 : 1;")


def bar(path: Path, version: int) -> Path:
    return cc(path, "-shared", "-Wl,-soname,libbar.so.3",
              src=f"int bar_version(void){{return {version};}}")


def repository(name: str, path: Path, library: str, file: str) -> str:
    build = ('package(default_visibility = ["//visibility:public"])\n'
             f'cc_import(name = "{library}", shared_library = "{file}")\n')
    return (f'new_local_repository(name = "{name}", path = "{path}", '
            f"build_file_content = {json.dumps(build)})\n")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("proof")
    # liba.so.3 (given by the repair) finds rpdir's libbar through its own RPATH; libx
    # (staged as it is) finds xxdir's through its RUNPATH, first.
    rpdir, xxdir = top / "rpdir", top / "xxdir"
    bar(rpdir / "libbar.so.3", 9)
    bar(xxdir / "libbar.so.3", 2)
    cc(top / "rp" / "lib" / "liba.so.3", "-shared", "-Wl,-soname,liba.so.3", "-L", str(rpdir),
       "-l:libbar.so.3", "-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpdir}",
       src="int a_version(void){return 5;}")
    (top / "rp" / "lib" / "liba.so").symlink_to("liba.so.3")
    cc(top / "xx" / "lib" / "libx.so.3", "-shared", "-Wl,-soname,libx.so.3", "-L", str(xxdir),
       "-l:libbar.so.3", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{xxdir}",
       src="int x_version(void){return 1;}")
    # Two libbar SDKs imported by their unversioned file, one deep in its repository, and
    # liba from nq, which needs libbar.so.3 but leads to no copy of it.
    for name, rel, version in (("bar_v1", "lib", 1), ("zz", "a/b/lib", 7), ("bar_v2", "lib", 2)):
        real = bar(top / name / rel / f"libbar.so.3.{version}.0", version)
        (real.parent / "libbar.so.3").symlink_to(real.name)
        (real.parent / "libbar.so").symlink_to("libbar.so.3")
    q = bar(top / "q" / "libbar.so.3", 4)
    cc(top / "nq" / "lib" / "liba.so.3", "-shared", "-Wl,-soname,liba.so.3", "-L",
       str(q.parent), "-l:libbar.so.3", src="int a_version(void){return 6;}")
    files = {
        "WORKSPACE": (repository("rp", top / "rp", "a", "lib/liba.so")
                      + repository("xx", top / "xx", "x", "lib/libx.so.3")
                      + repository("bar_v1", top / "bar_v1", "bar", "lib/libbar.so")
                      + repository("zz", top / "zz", "bar", "a/b/lib/libbar.so")
                      + repository("barver_v2", top / "bar_v2", "bar", "lib/libbar.so.3")
                      + repository("nq", top / "nq", "a", "lib/liba.so.3")),
        "sh/BUILD": "".join(f'cc_test(name = "s{i}", srcs = ["m.c"], deps = ["@rp//:a", '
                            '"@xx//:x"])\n' for i in (1, 2, 3)),
        "sh/m.c": SHOWS,
        "g/BUILD": ('cc_test(name = "t1", srcs = ["b.c"], deps = ["@zz//:bar"])\n'
                    'cc_test(name = "t2", srcs = ["m.c"], deps = ["@nq//:a"])\n'
                    'cc_test(name = "z1", srcs = ["b.c"], deps = ["@zz//:bar"])\n'),
        "g/b.c": CALLS, "g/m.c": SHOWS,
        "wh/BUILD": ('cc_test(name = "w0", srcs = ["b.c"], deps = ["@barver_v2//:bar"])\n'
                     'cc_test(name = "w1", srcs = ["b.c"], deps = ["@bar_v1//:bar"])\n'),
        "wh/b.c": CALLS,
    }
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    workspace.top = top  # type: ignore[attr-defined]
    # Every repository fetched, so that a test alone has the same copies to choose from.
    workspace.bazel("build", "//...", check=True)
    try:
        yield workspace
    finally:
        workspace.shutdown()


def mapped(ws: Workspace, package: str, name: str) -> set[str]:
    """The libbar and liba files a test mapped, by real path relative to the fixture."""
    log = ws.root / "bazel-testlogs" / package / name / "test.log"
    top: Path = ws.top  # type: ignore[attr-defined]
    return {str(Path(line.split()[-1]).resolve().relative_to(top))
            for line in log.read_text().splitlines() if line.startswith("maps ")}


def groups(ws: Workspace, *patterns: str) -> list[list[str]]:
    result = ws.ldfix("env", "--format", "json", *patterns)
    assert result.returncode == 0, result.stderr[-3000:]
    return [g["labels"] for g in json.loads(result.stdout)["groups"]]


def test_a_stray_no_value_avoids_is_said_and_splits_nothing(ws: Workspace) -> None:
    result = ws.ldfix("test", "//sh:all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "split" not in result.stderr
    assert groups(ws, "//sh:all") == []
    # What the loader maps: rpdir's libbar, which liba's own RPATH gives, whatever value.
    assert mapped(ws, "sh", "s2") == {"rp/lib/liba.so.3", "rpdir/libbar.so.3"}
    notes = [line for line in result.stderr.splitlines() if "looks it up itself" in line]
    assert len(notes) == 3 and all("libbar.so.3" in line for line in notes)


def test_a_library_no_own_file_leads_to_is_chosen_as_for_the_test_alone(ws: Workspace) -> None:
    alone = ws.ldfix("env", "//g:t2")
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert alone.stdout.rstrip().endswith("/external/bar_v1/lib")
    # Beside a test whose own libbar sits elsewhere, under either name: t2 keeps its own.
    for other in ("t1", "z1"):
        shared = groups(ws, "//g:t2", f"//g:{other}")
        assert sorted(map(sorted, shared)) == sorted([[f"//g:{other}"], ["//g:t2"]])
    result = ws.ldfix("test", "//g:t1", "//g:t2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert mapped(ws, "g", "t2") == {"nq/lib/liba.so.3", "bar_v1/lib/libbar.so.3.1.0"}
    assert mapped(ws, "g", "t1") == {"zz/a/b/lib/libbar.so.3.7.0"}


def test_a_test_is_split_off_rather_than_left_without_its_library(ws: Workspace) -> None:
    plain = ws.bazel("test", "//wh:all")
    assert plain.returncode == 3        # w1 misses libbar.so.3; w0 has it, versioned
    result = ws.ldfix("test", "//wh:all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert mapped(ws, "wh", "w0") == {"bar_v2/lib/libbar.so.3.2.0"}
    assert mapped(ws, "wh", "w1") == {"bar_v1/lib/libbar.so.3.1.0"}
    assert "1 test repaired (libbar.so.3)" in result.stderr

"""`bazel-ldfix fix` on a transitive vendor SDK, against a real Bazel 4.2.3 and the loader.

The SDK ships ``libztop.so.1 -> libzmid.so.3 -> libzcore.so.2``, each a chain of symlinks
(``libX.so -> libX.so.N -> libX.so.N.M.P``), with no RUNPATH, and its BUILD file imports
each unversioned file. One test links only ``ztop``, another only ``zmid``. One
``fix --write`` must make a plain ``bazel test`` pass from a clean output tree, with no
LD_LIBRARY_PATH, and each test must load the SDK's own files: every test prints its
``/proc/self/maps``, and that is what is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TESTS = ["//t:t_top", "//t:t_mid"]
# The real files, by the version each chain ends in.
REAL = {"ztop": "libztop.so.1.4.2", "zmid": "libzmid.so.3.1.0", "zcore": "libzcore.so.2.0.1"}


def chain(lib: Path, name: str, major: str, full: str, needs: tuple[str, ...] = ()) -> None:
    real = lib / f"lib{name}.so.{full}"
    flags = ["-shared", f"-Wl,-soname,lib{name}.so.{major}"]
    for need in needs:
        flags += ["-L", str(lib), f"-l:{need}"]
    cc(real, *flags, src=f"int {name}_value(void){{return {major};}}")
    (lib / f"lib{name}.so.{major}").symlink_to(real.name)
    (lib / f"lib{name}.so").symlink_to(f"lib{name}.so.{major}")


def prints_maps(function: str, value: int) -> str:
    """A test that prints the SDK files it has mapped, then calls into the SDK."""
    return ("#include <stdio.h>\n#include <string.h>\n"
            f"int {function}(void);\n"
            "int main(void) {\n"
            '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
            '  while (f && fgets(line, sizeof line, f)) if (strstr(line, "/libz")) '
            "fputs(line, stdout);\n"
            f"  return {function}() == {value} ? 0 : 1;\n"
            "}\n")


def sdk_build(names: tuple[str, ...]) -> str:
    return 'package(default_visibility = ["//visibility:public"])\n\n' + "".join(
        f'cc_import(\n    name = "{n}",\n    shared_library = "lib/lib{n}.so",\n)\n\n'
        for n in names)


@dataclass
class Sdk:
    ws: Workspace
    lib: Path


@pytest.fixture(scope="module")
def transitive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sdk]:
    top = tmp_path_factory.mktemp("closure")
    lib = top / "vendor" / "lib"
    chain(lib, "zcore", "2", "2.0.1")
    chain(lib, "zmid", "3", "3.1.0", ("libzcore.so.2",))
    chain(lib, "ztop", "1", "1.4.2", ("libzmid.so.3",))
    # A library whose need no import declares: the file is there, no rule names it.
    chain(lib, "znone", "5", "5.0.0")
    chain(lib, "zlonely", "4", "4.0.0", ("libznone.so.5",))
    files = {
        "WORKSPACE": ('new_local_repository(\n    name = "zsdk",\n'
                      f'    path = "{lib.parent}",\n'
                      '    build_file = "//third_party:zsdk.BUILD",\n)\n'),
        "third_party/BUILD": "",
        "third_party/zsdk.BUILD": sdk_build(("ztop", "zmid", "zcore", "zlonely")),
        "t/BUILD": ('cc_test(name = "t_top", srcs = ["top.c"], deps = ["@zsdk//:ztop"])\n'
                    'cc_test(name = "t_mid", srcs = ["mid.c"], deps = ["@zsdk//:zmid"])\n'),
        "t/top.c": prints_maps("ztop_value", 1),
        "t/mid.c": prints_maps("zmid_value", 3),
        "u/BUILD": ('cc_test(name = "t_lonely", srcs = ["lonely.c"], '
                    'deps = ["@zsdk//:zlonely"])\n'),
        "u/lonely.c": prints_maps("zlonely_value", 4),
    }
    ws = make_workspace(top / "ws", files, env=clean_env())
    try:
        yield Sdk(ws, lib)
    finally:
        ws.shutdown()


def mapped(ws: Workspace, package: str, name: str) -> set[str]:
    """The SDK files the test had mapped, by real path, from what it printed."""
    return {line.split()[-1] for line in ws.test_log(package, name).splitlines()
            if "/libz" in line and len(line.split()) >= 6}


def test_both_tests_fail_to_load_before_the_fix(transitive: Sdk) -> None:
    result = transitive.ws.bazel("test", *TESTS)
    assert result.returncode == 3, result.stderr[-3000:]
    assert "libztop.so.1: cannot open shared object file" in \
        transitive.ws.test_log("t", "t_top")
    assert "libzmid.so.3: cannot open shared object file" in \
        transitive.ws.test_log("t", "t_mid")


def test_check_before_the_fix_says_a_change_is_needed(transitive: Sdk) -> None:
    result = transitive.ws.ldfix("fix", "--check", *TESTS)
    assert result.returncode == 1, result.stderr[-3000:]
    # The whole closure, in the SDK's own BUILD file: each library links what it needs.
    assert '+    name = "ztop_import",' in result.stdout
    assert '+        ":zcore",' in result.stdout
    assert "--- a/t/BUILD" not in result.stdout


def test_one_write_makes_plain_bazel_test_pass_from_a_clean_tree(transitive: Sdk) -> None:
    ws = transitive.ws
    written = ws.ldfix("fix", "--write", "--verify", *TESTS)
    assert written.returncode == 0, written.stderr[-3000:]
    assert "verified: plain `bazel test` passes" in written.stderr
    assert ws.bazel("clean").returncode == 0
    plain = ws.bazel("test", *TESTS)
    assert plain.returncode == 0, plain.stderr[-3000:]
    real = {n: str((transitive.lib / f).resolve()) for n, f in REAL.items()}
    assert mapped(ws, "t", "t_top") == set(real.values())
    assert mapped(ws, "t", "t_mid") == {real["zmid"], real["zcore"]}


def test_after_the_write_check_passes_and_a_second_write_changes_nothing(
        transitive: Sdk) -> None:
    ws = transitive.ws
    build = ws.root / "third_party" / "zsdk.BUILD"
    before = build.read_bytes()
    # Build once more first: the _solib_ directories of the old imports stay behind.
    assert ws.bazel("build", *TESTS).returncode == 0
    check = ws.ldfix("fix", "--check", *TESTS)
    assert check.returncode == 0, check.stdout + check.stderr[-3000:]
    assert "no BUILD change needed" in check.stderr
    again = ws.ldfix("fix", "--write", *TESTS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert build.read_bytes() == before


def test_a_name_no_import_declares_fails_the_check_with_the_reason(transitive: Sdk) -> None:
    result = transitive.ws.ldfix("fix", "--check", "//u:t_lonely")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "needs libznone.so.5" in result.stdout
    assert "no cc_import of the build or of a fetched repository provides it" in result.stdout
    assert "no BUILD change needed" not in result.stderr

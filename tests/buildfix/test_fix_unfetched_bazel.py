"""`bazel-ldfix fix` when the repository that provides a library is not fetched yet, on a
real Bazel 4.2.3.

``liba.so.1`` (``@asdk``) needs ``libcommon.so.2``, and ``libe.so.1`` (``@esdk``) needs
``libdeep.so.4``; neither has a RUNPATH. WORKSPACE declares ``@csdk``, a
``new_local_repository`` whose ``cc_import`` imports ``libcommon.so``, and ``@dsdk``, an
``http_archive`` (a ``file://`` URL: no network) whose ``cc_import`` imports
``libdeep.so``. No test depends on either, so Bazel never fetched them.

``fix`` must fetch the local one itself, in one bounded call, and name the archive with the
command that fetches it; never say "no BUILD change can give it". Each copy of the workspace
is fresh (its own output base), so each starts with nothing fetched. Each test prints the
SDK lines of its ``/proc/self/maps``, and that is what is read after ``bazel clean``.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


def prints_maps(function: str) -> str:
    return ("#include <stdio.h>\n#include <string.h>\n"
            f"int {function}(void);\n"
            "int main(void) {\n"
            '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
            "  while (f && fgets(line, sizeof line, f))\n"
            '    if (strstr(line, "/sdks/") || strstr(line, "/external/dsdk/")) '
            'printf("maps %s", line);\n'
            f"  return {function}() > 0 ? 0 : 1;\n"
            "}\n")


def library(lib: Path, name: str, major: str, needs: Path | None = None) -> Path:
    """``lib/lib<name>.so.<major>`` (needing ``needs``), and the unversioned dev link."""
    flags = ["-shared", f"-Wl,-soname,lib{name}.so.{major}"]
    if needs is not None:
        flags += ["-L", str(needs.parent), f"-l:{needs.name}"]
    real = cc(lib / f"lib{name}.so.{major}", *flags,
              src=f"int {name}_value(void){{return {major};}}")
    (lib / f"lib{name}.so").symlink_to(real.name)
    return real


def imports(name: str) -> str:
    return ('package(default_visibility = ["//visibility:public"])\n\n'
            f'cc_import(\n    name = "{name}",\n    shared_library = "lib/lib{name}.so",\n)\n')


@dataclass
class Sdks:
    top: Path
    real: dict[str, Path]


@pytest.fixture(scope="module")
def sdks(tmp_path_factory: pytest.TempPathFactory) -> Sdks:
    top = tmp_path_factory.mktemp("unfetched")
    sdk = top / "sdks"
    common = library(sdk / "csdk" / "lib", "common", "2")
    a = library(sdk / "asdk" / "lib", "a", "1", common)
    # The archive's library lives, once unpacked, under <output_base>/external/dsdk.
    deep = library(top / "archive" / "lib", "deep", "4")
    e = library(sdk / "esdk" / "lib", "e", "1", deep)
    with tarfile.open(top / "dsdk.tar.gz", "w:gz") as archive:
        archive.add(top / "archive" / "lib", arcname="lib")
    return Sdks(top, {"a": a.resolve(), "common": common.resolve(), "e": e.resolve()})


def fresh(sdks: Sdks, name: str) -> Workspace:
    top = sdks.top
    workspace = (
        'load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")\n'
        + "".join(f'new_local_repository(name = "{repo}", path = "{top / "sdks" / repo}", '
                  f'build_file = "//third_party:{repo}.BUILD")\n' for repo in ("asdk", "esdk"))
        + f'new_local_repository(name = "csdk", path = "{top / "sdks" / "csdk"}", '
        f'build_file_content = {imports("common")!r})\n'
        f'http_archive(name = "dsdk", urls = ["file://{top / "dsdk.tar.gz"}"], '
        'build_file = "//third_party:dsdk.BUILD")\n')
    files = {
        "WORKSPACE": workspace,
        "third_party/BUILD": "",
        "third_party/asdk.BUILD": imports("a"),
        "third_party/esdk.BUILD": imports("e"),
        "third_party/dsdk.BUILD": imports("deep"),
        "t/BUILD": ('cc_test(name = "a", srcs = ["a.c"], deps = ["@asdk//:a"])\n'
                    'cc_test(name = "e", srcs = ["e.c"], deps = ["@esdk//:e"])\n'),
        "t/a.c": prints_maps("a_value"),
        "t/e.c": prints_maps("e_value"),
    }
    return make_workspace(top / name / "ws", files, env=clean_env())


def mapped(ws: Workspace, name: str) -> set[Path]:
    return {Path(line.split()[-1]).resolve()
            for line in ws.test_log("t", name).splitlines()
            if line.startswith("maps ") and len(line.split()) >= 7}


def fetched(ws: Workspace, repository: str) -> bool:
    return (ws.output_base / "external" / repository).is_dir()


def test_a_local_repository_not_fetched_is_fetched_and_gives_the_change(sdks: Sdks) -> None:
    ws = fresh(sdks, "check")
    try:
        plain = ws.bazel("test", "//t:a")
        assert plain.returncode == 3, plain.stderr[-3000:]
        assert not fetched(ws, "csdk")
        check = ws.ldfix("fix", "--check", "//t:a")
        assert check.returncode == 1, check.stdout + check.stderr[-3000:]
        assert "fetching @csdk" in check.stderr
        assert fetched(ws, "csdk")
        assert "no BUILD change can give" not in check.stdout + check.stderr
        assert '+        "@csdk//:common",' in check.stdout
        assert 'lib/libcommon.so.2' in check.stdout      # in WORKSPACE's build_file_content
    finally:
        ws.shutdown()


def test_one_write_fetches_it_and_plain_bazel_test_passes_from_a_clean_tree(
        sdks: Sdks) -> None:
    ws = fresh(sdks, "write")
    try:
        written = ws.ldfix("fix", "--write", "--verify", "//t:a")
        assert written.returncode == 0, written.stdout + written.stderr[-3000:]
        assert ws.bazel("clean").returncode == 0
        plain = ws.bazel("test", "//t:a")
        assert plain.returncode == 0, plain.stderr[-3000:]
        assert mapped(ws, "a") == {sdks.real["a"], sdks.real["common"]}
    finally:
        ws.shutdown()


def test_an_archive_not_fetched_is_named_with_the_command_that_fetches_it(
        sdks: Sdks) -> None:
    ws = fresh(sdks, "archive")
    try:
        check = ws.ldfix("fix", "--check", "//t:e")
        assert check.returncode == 1, check.stdout + check.stderr[-3000:]
        assert "# not fetched yet: //t:e needs libdeep.so.4" in check.stdout
        assert "`bazel fetch @dsdk//...`" in check.stdout
        assert "no BUILD change can give" not in check.stdout + check.stderr
        assert not fetched(ws, "dsdk")      # a download is the user's to start
        # The command it names, then the change it can now plan.
        assert ws.bazel("fetch", "@dsdk//...").returncode == 0
        written = ws.ldfix("fix", "--write", "--verify", "//t:e")
        assert written.returncode == 0, written.stdout + written.stderr[-3000:]
        assert ws.bazel("clean").returncode == 0
        plain = ws.bazel("test", "//t:e")
        assert plain.returncode == 0, plain.stderr[-3000:]
        # The archive's file, where Bazel unpacked it.
        deep = ws.output_base / "external" / "dsdk" / "lib" / "libdeep.so.4"
        assert mapped(ws, "e") == {sdks.real["e"], deep.resolve()}
    finally:
        ws.shutdown()

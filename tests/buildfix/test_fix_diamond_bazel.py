"""`bazel-ldfix fix` on a diamond across three repositories, against a real Bazel 4.2.3.

``liba.so.1`` (``@asdk``) and ``libb.so.1`` (``@bsdk``) both need ``libcommon.so.2``
(``@csdk``), and have no RUNPATH. ``@bsdk`` also declares ``libb2.so.1``, which needs
``libcommon.so.2`` too and which no test links yet. Each BUILD file imports the
unversioned files. The tests selected link ``a`` and ``b`` together, and ``common``.

One ``fix --write //...`` must give the edge to every library that needs it, in its own
BUILD file, and write the same text every time: it runs in two fresh copies of the
workspace, and the files it writes are compared. Then new tests, each of one library
alone, are added, and plain ``bazel test`` must pass from a clean output tree. Each test
prints the SDK lines of its ``/proc/self/maps``, and that is what is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace
from elfbuild import cc

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

# repository -> (library, major version, what it needs)
LIBRARIES = {"csdk": [("common", "2", ())],
             "asdk": [("a", "1", ("libcommon.so.2",))],
             "bsdk": [("b", "1", ("libcommon.so.2",)), ("b2", "1", ("libcommon.so.2",))]}
SDK_FILES = [f"third_party/{repo}.BUILD" for repo in LIBRARIES]


def prints_maps(*functions: str) -> str:
    """A test that prints the SDK files it has mapped, then calls each function."""
    decls = "".join(f"int {f}(void);\n" for f in functions)
    calls = " + ".join(f"{f}()" for f in functions)
    return ("#include <stdio.h>\n#include <string.h>\n" + decls
            + "int main(void) {\n"
            '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
            '  while (f && fgets(line, sizeof line, f)) if (strstr(line, "/sdks/")) '
            'printf("maps %s", line);\n'
            f"  return {calls} > 0 ? 0 : 1;\n"
            "}\n")


def sdks(top: Path) -> dict[str, Path]:
    """The three repositories' directories, with ``lib/libX.so -> libX.so.N ->
    libX.so.N.0.0`` for each library: the real file, by library."""
    real = {}
    for repo, libraries in LIBRARIES.items():
        lib = top / "sdks" / repo / "lib"
        for name, major, needs in libraries:
            flags = ["-shared", f"-Wl,-soname,lib{name}.so.{major}"]
            for need in needs:
                flags += ["-L", str(top / "sdks" / "csdk" / "lib"), f"-l:{need}"]
            calls = "".join(f" + {n[3:].split('.')[0]}_value()" for n in needs)
            decls = "".join(f"int {n[3:].split('.')[0]}_value(void);\n" for n in needs)
            real[name] = cc(lib / f"lib{name}.so.{major}.0.0", *flags,
                            src=f"{decls}int {name}_value(void){{return {major}{calls};}}")
            (lib / f"lib{name}.so.{major}").symlink_to(real[name].name)
            (lib / f"lib{name}.so").symlink_to(f"lib{name}.so.{major}")
    return {name: path.resolve() for name, path in real.items()}


def files(top: Path) -> dict[str, str]:
    workspace = "".join(
        f'new_local_repository(\n    name = "{repo}",\n    path = "{top / "sdks" / repo}",\n'
        f'    build_file = "//third_party:{repo}.BUILD",\n)\n' for repo in LIBRARIES)
    out = {"WORKSPACE": workspace, "third_party/BUILD": ""}
    for repo, libraries in LIBRARIES.items():
        out[f"third_party/{repo}.BUILD"] = (
            'package(default_visibility = ["//visibility:public"])\n' + "".join(
                f'\ncc_import(\n    name = "{name}",\n    shared_library = "lib/lib{name}.so",\n)\n'
                for name, _, _ in libraries))
    out["t/BUILD"] = (
        'cc_test(name = "ab", srcs = ["ab.c"], deps = ["@asdk//:a", "@bsdk//:b"])\n'
        'cc_test(name = "common", srcs = ["common.c"], deps = ["@csdk//:common"])\n')
    out["t/ab.c"] = prints_maps("a_value", "b_value")
    out["t/common.c"] = prints_maps("common_value")
    return out


# Tests of one library alone, added after the write: what a team writes next.
NEW_TESTS = {
    "n/BUILD": "".join(f'cc_test(name = "only_{n}", srcs = ["only_{n}.c"], '
                       f'deps = ["@{repo}//:{n}"])\n'
                       for repo, n in (("asdk", "a"), ("bsdk", "b"), ("bsdk", "b2"))),
    **{f"n/only_{n}.c": prints_maps(f"{n}_value") for n in ("a", "b", "b2")},
}


@dataclass
class Diamond:
    top: Path
    real: dict[str, Path]


@pytest.fixture(scope="module")
def diamond(tmp_path_factory: pytest.TempPathFactory) -> Diamond:
    top = tmp_path_factory.mktemp("diamond")
    return Diamond(top, sdks(top))


def fresh(diamond: Diamond, name: str) -> Workspace:
    return make_workspace(diamond.top / name / "ws", files(diamond.top), env=clean_env())


def mapped(ws: Workspace, package: str, name: str) -> set[Path]:
    return {Path(line.split()[-1]).resolve()
            for line in ws.test_log(package, name).splitlines()
            if line.startswith("maps ") and len(line.split()) >= 7}


def test_plain_bazel_test_fails_in_the_loader(diamond: Diamond) -> None:
    ws = fresh(diamond, "plain")
    try:
        result = ws.bazel("test", "//...")
        assert result.returncode == 3, result.stderr[-3000:]
        assert "cannot open shared object file" in ws.test_log("t", "ab")
    finally:
        ws.shutdown()


def test_the_edge_goes_to_every_library_that_needs_it_the_same_every_time(
        diamond: Diamond) -> None:
    texts = []
    for name in ("first", "second"):
        ws = fresh(diamond, name)
        try:
            written = ws.ldfix("fix", "--write", "//...")
            assert written.returncode == 0, written.stdout + written.stderr[-3000:]
            texts.append({rel: (ws.root / rel).read_text() for rel in SDK_FILES})
        finally:
            ws.shutdown()
    assert texts[0] == texts[1]
    asdk, bsdk = texts[0]["third_party/asdk.BUILD"], texts[0]["third_party/bsdk.BUILD"]
    # Each library that needs libcommon.so.2 links it in its own BUILD file, b2 too,
    # though no test of this run links it.
    for text, name in ((asdk, "a"), (bsdk, "b"), (bsdk, "b2")):
        assert f'cc_library(\n    name = "{name}",\n    deps = [\n        ":{name}_import",\n' \
               '        "@csdk//:common",\n    ],\n)' in text, text
        assert f'shared_library = "lib/lib{name}.so.1",' in text, text
    assert 'shared_library = "lib/libcommon.so.2",' in texts[0]["third_party/csdk.BUILD"]


def test_after_one_write_a_new_test_of_each_library_alone_loads(diamond: Diamond) -> None:
    ws = fresh(diamond, "write")
    try:
        written = ws.ldfix("fix", "--write", "--verify", "//...")
        assert written.returncode == 0, written.stdout + written.stderr[-3000:]
        for rel, text in NEW_TESTS.items():
            (ws.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (ws.root / rel).write_text(text)
        assert ws.bazel("clean").returncode == 0
        plain = ws.bazel("test", "//...")
        assert plain.returncode == 0, plain.stderr[-3000:]
        real = diamond.real
        assert mapped(ws, "t", "ab") == {real["a"], real["b"], real["common"]}
        for name in ("a", "b", "b2"):
            assert mapped(ws, "n", f"only_{name}") == {real[name], real["common"]}, name
        check = ws.ldfix("fix", "--check", "//...")
        assert check.returncode == 0, check.stdout + check.stderr[-3000:]
    finally:
        ws.shutdown()


def test_a_library_added_later_gets_the_edge_and_the_wrapped_ones_stay(
        diamond: Diamond) -> None:
    """After one write, the SDK gains ``liba2.so.1``, which needs ``libcommon.so.2`` too,
    and a test of it. The next write wraps it; ``a``, wrapped already, keeps its one
    wrapper (its import is not wrapped again)."""
    ws = fresh(diamond, "later")
    try:
        written = ws.ldfix("fix", "--write", "//...")
        assert written.returncode == 0, written.stdout + written.stderr[-3000:]
        lib = diamond.top / "sdks" / "asdk" / "lib"
        a2 = cc(lib / "liba2.so.1.0.0", "-shared", "-Wl,-soname,liba2.so.1",
                "-L", str(diamond.top / "sdks" / "csdk" / "lib"), "-l:libcommon.so.2",
                src="int a2_value(void){return 2;}")
        (lib / "liba2.so.1").symlink_to(a2.name)
        (lib / "liba2.so").symlink_to("liba2.so.1")
        build = ws.root / "third_party" / "asdk.BUILD"
        before = build.read_text()
        build.write_text(before + '\ncc_import(\n    name = "a2",\n'
                                  '    shared_library = "lib/liba2.so",\n)\n')
        (ws.root / "n").mkdir()
        (ws.root / "n" / "BUILD").write_text(
            'cc_test(name = "only_a2", srcs = ["only_a2.c"], deps = ["@asdk//:a2"])\n')
        (ws.root / "n" / "only_a2.c").write_text(prints_maps("a2_value"))
        # From a clean tree: what the first build staged is not what Bazel declares now.
        assert ws.bazel("clean").returncode == 0
        again = ws.ldfix("fix", "--write", "//...")
        assert again.returncode == 0, again.stdout + again.stderr[-3000:]
        text = build.read_text()
        assert text.startswith(before), text
        assert text.count("_import_import") == 0 and text.count('name = "a_import"') == 1
        assert 'name = "a2",\n    deps = [\n        ":a2_import",\n' \
               '        "@csdk//:common",\n    ],\n)' in text, text
        assert ws.bazel("clean").returncode == 0
        plain = ws.bazel("test", "//...")
        assert plain.returncode == 0, plain.stderr[-3000:]
        assert mapped(ws, "n", "only_a2") == {a2.resolve(), diamond.real["common"]}
    finally:
        ws.shutdown()

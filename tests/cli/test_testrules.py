"""The test rules' launcher: finding the checked file through runfiles, and its verdicts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elfbuild import lib, program

from bazel_ldfix.cli.testrules import locate, main, rlocation_path


@pytest.mark.parametrize(("rootpath", "expected"), [
    ("app/app_test", "ws/app/app_test"),            # the main repository
    ("./app", "ws/app"),                             # its root package
    ("external/sdk/lib/libx.so", "sdk/lib/libx.so"),  # Bazel 4-6
    ("../sdk/lib/libx.so", "sdk/lib/libx.so"),        # Bazel 7+, --nolegacy_external_runfiles
])
def test_rlocation_path_from_rootpath(rootpath: str, expected: str) -> None:
    assert rlocation_path(rootpath, "ws") == expected


def test_locate_reads_the_manifest_alone(tmp_path: Path) -> None:
    """--nobuild_runfile_links: no tree, only the manifest maps runfiles paths to files."""
    real = program(tmp_path / "out" / "bin" / "app")
    manifest = tmp_path / "t.runfiles_manifest"
    manifest.write_text(f"ws/app/app {real}\nws/app/other /nonexistent\n")
    env = {"RUNFILES_MANIFEST_FILE": str(manifest), "RUNFILES_MANIFEST_ONLY": "1",
           "TEST_WORKSPACE": "ws"}
    assert locate("app/app", env) == str(real)
    assert locate("app/missing", env) is None
    assert locate("app/other", env) is None  # listed, but not there


def test_locate_reads_the_runfiles_directory(tmp_path: Path) -> None:
    real = program(tmp_path / "out" / "bin" / "app")
    tree = tmp_path / "t.runfiles"
    (tree / "ws" / "app").mkdir(parents=True)
    (tree / "ws" / "app" / "app").symlink_to(real)
    env = {"RUNFILES_DIR": str(tree), "TEST_WORKSPACE": "ws"}
    assert locate("app/app", env) == str(tree / "ws" / "app" / "app")
    assert locate("../ws/../../etc/passwd", env) is None  # not a runfiles path
    assert locate("external//etc/passwd", env) is None


def test_load_verdict_names_the_missing_library_and_the_search(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    x = lib(tmp_path / "x" / "libx.so.1")
    real = program(tmp_path / "out" / "bin" / "app", needs=[x])
    manifest = tmp_path / "t.runfiles_manifest"
    manifest.write_text(f"ws/bin/app {real}\n")
    env = {"RUNFILES_MANIFEST_FILE": str(manifest), "TEST_WORKSPACE": "ws",
           "PATH": os.environ.get("PATH", "")}
    assert main(["load", "//bin:app", "bin/app"], env) == 1
    out = capsys.readouterr().out
    assert out.startswith("//bin:app would not load: libx.so.1\n")
    assert "libx.so.1 not found" in out and "searched, in this order:" in out
    # In the test's environment: its LD_LIBRARY_PATH is the loader's.
    env["LD_LIBRARY_PATH"] = str(x.parent)
    assert main(["load", "//bin:app", "bin/app"], env) == 0
    assert "//bin:app loads in this test's environment" in capsys.readouterr().out


def test_a_file_outside_the_runfiles_is_a_usage_error(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    manifest = tmp_path / "t.runfiles_manifest"
    manifest.write_text("")
    env = {"RUNFILES_MANIFEST_FILE": str(manifest), "TEST_WORKSPACE": "ws"}
    assert main(["load", "//bin:app", "bin/app"], env) == 2
    assert "error: //bin:app (bin/app) is not in this test's runfiles" in capsys.readouterr().err
    assert main(["frobnicate", "//bin:app", "bin/app"], env) == 2


def test_locate_under_bzlmod_with_a_repository_mapping(tmp_path: Path) -> None:
    """Bazel 8 with bzlmod (recorded layout, not run here): the main repository is `_main`,
    another is `<name>+` (`<name>~` on Bazel 7), `$(rootpath)` of its files starts with
    `../`, and the runfiles carry `_repo_mapping` (source canonical, apparent, canonical)."""
    real = program(tmp_path / "out" / "bin" / "app")
    sdk_lib = lib(tmp_path / "out" / "sdk" / "libx.so.1")
    mapping = tmp_path / "_repo_mapping"
    mapping.write_text(",bazel_ldfix,bazel_ldfix+\n,demo_sdk,+demo+demo_sdk\n,ws,_main\n"
                       "bazel_ldfix+,bazel_ldfix,bazel_ldfix+\n")
    manifest = tmp_path / "t.runfiles_manifest"
    manifest.write_text(f"_repo_mapping {mapping}\n_main/app/app {real}\n"
                        f"+demo+demo_sdk/lib/libx.so.1 {sdk_lib}\n")
    env = {"RUNFILES_MANIFEST_FILE": str(manifest), "TEST_WORKSPACE": "_main"}
    assert locate("app/app", env) == str(real)
    assert locate("../+demo+demo_sdk/lib/libx.so.1", env) == str(sdk_lib)


def test_load_resolves_the_other_shared_objects_of_the_runfiles_as_dlopen_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x = lib(tmp_path / "x" / "libx.so.1")
    # The binary finds libx.so.1 through its own RUNPATH, which a plugin does not have.
    real = program(tmp_path / "out" / "bin" / "app", needs=[x], runpath=str(x.parent))
    reuses = lib(tmp_path / "out" / "bin" / "libreuses.so", needs=[x])
    missing = lib(tmp_path / "sdk" / "libmissing.so.3")
    lonely = lib(tmp_path / "out" / "bin" / "liblonely.so", needs=[missing])
    tool_own = lib(tmp_path / "pip" / "libtool_own.so", needs=[missing])
    manifest = tmp_path / "t.runfiles_manifest"
    entries = [f"ws/bin/app {real}", f"ws/bin/libreuses.so {reuses}",
               f"bazel_ldfix_pip/click/site/libtool_own.so {tool_own}",
               f"ws/bin/data.txt {tmp_path / 'nonexistent'}"]
    manifest.write_text("\n".join(entries) + "\n")
    env = {"RUNFILES_MANIFEST_FILE": str(manifest), "TEST_WORKSPACE": "ws"}
    # libreuses.so needs libx.so.1, which the binary has already loaded: dlopen reuses it.
    # The tool's own repositories are not the binary's.
    assert main(["load", "//bin:app", "bin/app"], env) == 0, capsys.readouterr().out
    capsys.readouterr()

    manifest.write_text("\n".join([*entries, f"ws/bin/liblonely.so {lonely}"]) + "\n")
    assert main(["load", "//bin:app", "bin/app"], env) == 1
    out = capsys.readouterr().out
    assert "ws/bin/liblonely.so (in the runfiles, loaded with dlopen) would not load: " \
           "libmissing.so.3" in out
    assert "libtool_own" not in out and "libreuses" not in out


def test_package_verdict_runs_assert_package_on_the_file_of_the_runfiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import tarfile

    x = lib(tmp_path / "build" / "libx.so.1")
    packed = tmp_path / "out" / "pkg.tar.gz"
    packed.parent.mkdir()
    with tarfile.open(packed, "w:gz") as t:
        t.add(x, arcname="pkg/lib/libx.so.1")
    manifest = tmp_path / "t.runfiles_manifest"
    manifest.write_text(f"ws/dist/pkg.tar.gz {packed}\n")
    env = {"RUNFILES_MANIFEST_FILE": str(manifest), "TEST_WORKSPACE": "ws"}
    argv = ["assert-package", "//dist:pkg", "dist/pkg.tar.gz", "--library"]
    assert main([*argv, "libx.so.1"], env) == 0
    assert "ok   libx.so.1: one shared object, pkg/lib/libx.so.1" in capsys.readouterr().out
    assert main([*argv, "liby.so.1"], env) == 1
    assert "FAIL liby.so.1: missing" in capsys.readouterr().out

"""A library a test loads from a ``_solib_`` file its runfiles manifest does not declare is
a leftover, and nothing else is.

The files are laid out as Bazel 4.2.3 lays out a cc_test's outputs (``bazel-out/<config>/
bin/<package>/<test>``, its RUNPATH into ``bin/_solib_k8/<dir>``, the manifest beside the
executable); the libraries and the program are gcc's, and the real loader (``ld.so
--list``) says which file the test loads. The real Bazel case is in
bazel/test_execution_remote.py.

An import staged for another target is judged by its package's BUILD file
(``build_declares``): one the file no longer declares is a leftover, and one it cannot tell
of is kept. The real Bazel case is in buildfix/test_fix_leftovers_bazel.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from elfbuild import lib, program
from elftools.elf.elffile import ELFFile

from bazel_ldfix.bazel import declaredinputs
from bazel_ldfix.bazel.solib import SolibImport
from bazel_ldfix.render.repair import leftover_lines

SOLIB = "_solib_k8/_U_t"


def _test(top: Path, declare: tuple[str, ...]) -> Path:
    """//t:needs, linked against libdecl.so and libleft.so from its _solib_ directory;
    the manifest lists the libraries named in ``declare``."""
    bin_dir = top / "bazel-out" / "k8-fastbuild" / "bin"
    solib = bin_dir / SOLIB
    libs = [lib(solib / name) for name in ("libdecl.so", "libleft.so")]
    exe = program(bin_dir / "t" / "needs", needs=libs, runpath=f"$ORIGIN/../{SOLIB}")
    lines = [f"ws/t/needs {exe}"]
    lines += [f"ws/{SOLIB}/{name} {solib / name}" for name in declare]
    (bin_dir / "t" / "needs.runfiles_manifest").write_text("\n".join(lines) + "\n")
    return exe


def _loaded(exe: Path) -> dict[str, str]:
    """The real loader's answer: each DT_NEEDED name and the file it opens."""
    with open(exe, "rb") as f:
        interp = next(seg.get_interp_name() for seg in ELFFile(f).iter_segments()
                      if seg["p_type"] == "PT_INTERP")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    out = subprocess.run([interp, "--list", str(exe)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: line.split()[2] for line in out.splitlines()
            if " => /" in line}


def test_a_library_loaded_from_an_undeclared_solib_file_is_a_leftover(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so",))
    real = _loaded(exe)
    found = declaredinputs.leftovers(str(exe))
    assert [f.soname for f in found] == ["libleft.so"]
    assert os.path.realpath(found[0].path) == os.path.realpath(real["libleft.so"])
    assert "libleft.so" in leftover_lines("//t:needs", found)[0]


def test_a_test_whose_solib_files_are_all_declared_has_none(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so", "libleft.so"))
    assert set(_loaded(exe)) >= {"libdecl.so", "libleft.so"}
    assert declaredinputs.undeclared(str(exe)) == frozenset()
    assert declaredinputs.leftovers(str(exe)) == ()


def test_without_a_manifest_nothing_is_called_a_leftover(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=())
    os.unlink(str(exe) + ".runfiles_manifest")
    assert declaredinputs.leftovers(str(exe)) == ()


def test_an_undeclared_file_the_loader_does_not_open_is_no_leftover(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so", "libleft.so"))
    extra = lib(exe.parent.parent / SOLIB / "libunused.so")
    assert declaredinputs.undeclared(str(exe)) == {os.path.realpath(extra)}
    assert "libunused.so" not in _loaded(exe)
    assert declaredinputs.leftovers(str(exe)) == ()


def test_one_listing_serves_every_test_of_the_directory(tmp_path: Path) -> None:
    exe = _test(tmp_path, declare=("libdecl.so",))
    listed: dict[str, tuple[str, list[str]]] = {}
    first = declaredinputs.undeclared(str(exe), listed)
    lib(exe.parent.parent / SOLIB / "libnew.so")    # after the listing was kept
    assert declaredinputs.undeclared(str(exe), listed) == first
    assert declaredinputs.undeclared(str(exe)) == first | {
        os.path.realpath(exe.parent.parent / SOLIB / "libnew.so")}


def _import(root: Path, label: str, staged: str, build: str | None,
            verified: bool = True) -> SolibImport:
    """The import ``label`` (of the repository at ``root``) staged as ``staged``, a
    repository-relative file, with ``build`` as the text of its package's BUILD.bazel."""
    package = label.split("//", 1)[1].split(":", 1)[0]
    if build is not None:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "BUILD.bazel").write_text(build)
    directory, _, file = staged.rpartition("/")
    return SolibImport(label, directory, file, f"/bin/_solib_k8/x/{file}",
                       str(root / staged), None, verified)


IMPORT_X = 'cc_import(name = "x", shared_library = "lib/libx.so")\n'


@pytest.mark.parametrize("value", ["lib/libx.so", ":lib/libx.so", "//:lib/libx.so"])
def test_an_import_its_build_file_still_names_is_declared(tmp_path: Path, value: str) -> None:
    build = f'cc_import(name = "x", shared_library = "{value}")\n'
    assert declaredinputs.build_declares(_import(tmp_path, "@sdk//:x", "lib/libx.so", build))


def test_a_rule_gone_from_the_build_file_is_a_leftover(tmp_path: Path) -> None:
    # A BUILD fix renamed the import x_import; the fix was reverted.
    imp = _import(tmp_path, "@sdk//:x_import", "lib/libx.so.1", IMPORT_X)
    assert declaredinputs.build_declares(imp) is False
    # The fix kept: the old name is a cc_library that stages no file of its own.
    wrapped = ('cc_import(name = "x_import", shared_library = "lib/libx.so.1")\n'
               'cc_library(name = "x", deps = [":x_import", ":y"])\n')
    imp = _import(tmp_path, "@sdk//:x", "lib/libx.so", wrapped)
    assert declaredinputs.build_declares(imp) is False


def test_a_file_the_import_no_longer_names_is_a_leftover(tmp_path: Path) -> None:
    assert declaredinputs.build_declares(
        _import(tmp_path, "@sdk//:x", "lib/libx.so.1", IMPORT_X)) is False


@pytest.mark.parametrize("build", [
    'load("//:defs.bzl", "sdk_import")\nsdk_import(name = "x")\n',
    '[cc_import(name = n, shared_library = "lib/lib%s.so.1" % n) for n in ["x"]]\n',
    'cc_library(name = "x", srcs = glob(["lib/*.so*"]))\n',
    'cc_import(name = "x", shared_library = ":libx_copy")\n',
], ids=["macro", "comprehension", "glob", "rule-label"])
def test_what_the_build_file_cannot_tell_keeps_the_import(tmp_path: Path, build: str) -> None:
    assert declaredinputs.build_declares(
        _import(tmp_path, "@sdk//:x", "lib/libx.so.1", build)) is None


def test_an_unverified_label_or_a_package_not_there_cannot_tell(tmp_path: Path) -> None:
    assert declaredinputs.build_declares(
        _import(tmp_path, "@sdk//:x", "lib/libx.so.1", IMPORT_X, verified=False)) is None
    # A package of the main repository that this build did not link into the execroot.
    assert declaredinputs.build_declares(
        _import(tmp_path, "//vendor:x", "vendor/lib/libx.so", None)) is None
    # A directory with no BUILD file is no package.
    (tmp_path / "gone").mkdir()
    assert declaredinputs.build_declares(
        _import(tmp_path, "//gone:x", "gone/lib/libx.so", None)) is False

"""`bazel-ldfix assert-package` on packages of real g++-built files: what passes, what fails,
each failure checked against what the real loader does with the files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from elfbuild import lib, program
from streamcase import Extensions, StreamCase, build, extensions

from bazel_ldfix.linkage.package import Problem, check_package, is_named

LIB = "libextension_cuda.so"


def gate(package: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "assert-package",
                           str(package), "--library", LIB, *args],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> StreamCase:
    return build(tmp_path_factory.mktemp("stream"))


@pytest.fixture(scope="module")
def ext(case: StreamCase) -> Extensions:
    return extensions(case)


def package(root: Path, files: dict[str, Path]) -> Path:
    """A package directory: each name inside it, a copy of its file."""
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / name)
    return root


def good_files(case: StreamCase, ext: Extensions) -> dict[str, Path]:
    return {"pkg/lib/libextension_cuda.so": case.lib, "pkg/lib/libdelegate.so": case.delegate,
            "pkg/_ext.so": ext.shared, "pkg/bin/runner": case.good}


def wheel(root: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(root).as_posix())
    return out


def tgz(root: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as t:
        t.add(root / "pkg", arcname="pkg")
    return out


def problems(path: Path, *libraries: str) -> list[tuple[Problem, tuple[str, ...]]]:
    report = check_package(str(path), libraries or (LIB,))
    return [(f.problem, f.files) for f in report.findings]


def test_library_names_are_the_name_or_it_versioned() -> None:
    assert is_named("libx.so", "libx.so") and is_named("libx.so.3.1.0", "libx.so")
    assert not is_named("libx.so.debug", "libx.so") and not is_named("libxy.so", "libx.so")
    assert not is_named("libx.so.", "libx.so")


def test_a_correct_package_passes_as_a_directory_a_wheel_and_a_tar_gz(
        tmp_path: Path, case: StreamCase, ext: Extensions) -> None:
    # The real loader: the extension and the library share one stream slot.
    shared = ext.slots(ext.shared, case.lib)
    assert shared.returncode == 0, shared.stdout + shared.stderr
    root = package(tmp_path / "dir", good_files(case, ext))
    for path in (root, wheel(root, tmp_path / "ext-1.0-cp311-linux_x86_64.whl"),
                 tgz(root, tmp_path / "runtime.tar.gz")):
        result = gate(path, "--json")
        assert result.returncode == 0, result.stdout + result.stderr
        doc = json.loads(result.stdout)
        assert doc["version"] == 1 and doc["ok"] and doc["findings"] == []
        assert doc["libraries"] == [{"name": LIB, "file": f"pkg/lib/{LIB}", "soname": LIB,
                                     "exports": 7, "ok": True}]
        assert doc["objects"] == 4
    text = gate(root).stdout
    assert f"ok   {LIB}: one shared object, pkg/lib/{LIB} (SONAME {LIB})" in text


def test_two_copies_fail_naming_both(tmp_path: Path, case: StreamCase,
                                     ext: Extensions) -> None:
    root = package(tmp_path / "dir", {**good_files(case, ext),
                                      "pkg/vendor/libextension_cuda.so": case.lib})
    assert problems(root) == [(Problem.COPIES, (f"pkg/lib/{LIB}", f"pkg/vendor/{LIB}"))]
    result = gate(root)
    assert result.returncode == 1
    assert (f"FAIL {LIB}: more than one copy: pkg/lib/{LIB}, pkg/vendor/{LIB}: 2 shared "
            f"objects are {LIB}") in result.stdout


def test_the_static_archive_renamed_so_is_no_shared_object(tmp_path: Path, case: StreamCase,
                                                           ext: Extensions) -> None:
    files = good_files(case, ext)
    files[f"pkg/lib/{LIB}"] = case.renamed
    root = package(tmp_path / "dir", files)
    assert problems(root) == [(Problem.NOT_SHARED, (f"pkg/lib/{LIB}",))]
    result = gate(root)
    assert result.returncode == 1
    assert (f"FAIL {LIB}: not a shared object: pkg/lib/{LIB}: a static archive (ar) named "
            f"{LIB}: the linker would copy its objects into the program") in result.stdout


def test_a_linker_script_or_a_program_named_as_the_library_is_no_shared_object(
        tmp_path: Path, case: StreamCase) -> None:
    script = tmp_path / "script"
    script.write_text("INPUT(libextension_cuda.a)\n")
    root = package(tmp_path / "dir", {f"pkg/a/{LIB}": script, f"pkg/b/{LIB}.1": case.good})
    report = check_package(str(root), [LIB])
    assert [(f.problem, f.files) for f in report.findings] == [
        (Problem.NOT_SHARED, (f"pkg/a/{LIB}",)), (Problem.NOT_SHARED, (f"pkg/b/{LIB}.1",))]
    assert "a GNU linker script" in report.findings[0].detail
    assert "a position-independent executable" in report.findings[1].detail


def test_two_files_with_one_soname_fail(tmp_path: Path, case: StreamCase,
                                        ext: Extensions) -> None:
    root = package(tmp_path / "dir", {**good_files(case, ext),
                                      "pkg/plugins/libdelegate_v2.so": case.delegate})
    assert problems(root) == [(Problem.ONE_SONAME, ("pkg/lib/libdelegate.so",
                                                    "pkg/plugins/libdelegate_v2.so"))]
    assert ("FAIL SONAME libdelegate.so: pkg/lib/libdelegate.so, pkg/plugins/libdelegate_v2.so"
            in gate(root).stdout)


def test_a_missing_library_fails(tmp_path: Path, case: StreamCase) -> None:
    root = package(tmp_path / "dir", {"pkg/lib/libdelegate.so": case.delegate})
    assert problems(root) == [(Problem.MISSING, ())]


def test_versioned_links_to_one_file_are_one_copy(tmp_path: Path, case: StreamCase) -> None:
    root = package(tmp_path / "dir", {f"pkg/lib/{LIB}.1.2": case.lib})
    (root / "pkg" / "lib" / f"{LIB}.1").symlink_to(f"{LIB}.1.2")
    (root / "pkg" / "lib" / LIB).symlink_to(f"{LIB}.1")
    report = check_package(str(tgz(root, tmp_path / "p.tgz")), [LIB])
    assert report.ok, report.findings
    # A link by the library's name that leaves the package ships no library.
    (root / "pkg" / "lib" / LIB).unlink()
    (root / "pkg" / "lib" / LIB).symlink_to(f"/usr/lib/{LIB}")
    os.unlink(root / "pkg" / "lib" / f"{LIB}.1.2")
    os.unlink(root / "pkg" / "lib" / f"{LIB}.1")
    report = check_package(str(tgz(root, tmp_path / "q.tgz")), [LIB])
    assert [(f.problem, f.files, f.detail) for f in report.findings] == [
        (Problem.NOT_SHARED, (f"pkg/lib/{LIB}",),
         f"a link to /usr/lib/{LIB}: leaves the package: not followed")]


@pytest.mark.parametrize("stripped", [False, True], ids=["unstripped", "stripped"])
def test_an_extension_linking_the_static_archive_is_a_private_copy(
        tmp_path: Path, case: StreamCase, ext: Extensions, stripped: bool) -> None:
    built = ext.static_stripped if stripped else ext.static
    # The real loader: the extension keeps its own stream slot.
    split = ext.slots(built, case.lib)
    assert split.returncode == 1, split.stdout + split.stderr
    files = {**good_files(case, ext), "pkg/_ext.so": built}
    root = package(tmp_path / "dir", files)
    report = check_package(str(wheel(root, tmp_path / "ext.whl")), [LIB])
    [finding] = report.findings
    assert (finding.problem, finding.files) == (Problem.PRIVATE_COPY, ("pkg/_ext.so",))
    assert "_ZN10executorch9extension4cuda14current_streamE" in finding.symbols
    assert len(finding.symbols) == 7
    assert "7 in .dynsym (exported, seen even when stripped)" in finding.detail
    result = gate(root)
    assert result.returncode == 1
    assert f"FAIL {LIB}: a private copy: pkg/_ext.so: defines 7 of the 7 names" in result.stdout


def test_a_hidden_static_copy_shows_in_symtab_and_not_once_stripped(
        tmp_path: Path, case: StreamCase, ext: Extensions) -> None:
    for built in (ext.hidden, ext.hidden_stripped):
        split = ext.slots(built, case.lib)
        assert split.returncode == 1, split.stdout + split.stderr
    root = package(tmp_path / "a", {**good_files(case, ext), "pkg/_ext.so": ext.hidden})
    [finding] = check_package(str(root), [LIB]).findings
    assert finding.problem is Problem.PRIVATE_COPY
    assert "7 in .symtab only (a stripped copy would hide them)" in finding.detail
    # What no gate reading the files can see (docs/linkage-gates.md says so): a copy whose
    # names are neither exported nor kept in a .symtab leaves no name behind.
    root = package(tmp_path / "b", {**good_files(case, ext),
                                    "pkg/_ext.so": ext.hidden_stripped})
    assert check_package(str(root), [LIB]).ok


def test_a_program_linking_the_static_archive_is_a_private_copy(
        tmp_path: Path, case: StreamCase, ext: Extensions) -> None:
    files = {**good_files(case, ext), "pkg/bin/runner": case.bad}
    assert problems(package(tmp_path / "dir", files)) == [
        (Problem.PRIVATE_COPY, ("pkg/bin/runner",))]


def test_every_check_is_reported_not_only_the_first(tmp_path: Path, case: StreamCase,
                                                    ext: Extensions) -> None:
    x = lib(tmp_path / "build" / "libx.so.1")
    root = package(tmp_path / "dir", {
        **good_files(case, ext), "pkg/vendor/libextension_cuda.so": case.lib,
        "pkg/_ext.so": ext.static, "pkg/lib/libx.so.1": x, "pkg/lib2/libx.so.1": x})
    found = problems(root, LIB, "libx.so.1")
    assert [p for p, _ in found] == [Problem.COPIES, Problem.PRIVATE_COPY, Problem.COPIES]
    doc = json.loads(subprocess.run(
        [sys.executable, "-m", "bazel_ldfix", "assert-package", str(root), "--library", LIB,
         "--library", "libx.so.1", "--json"], capture_output=True, text=True).stdout)
    assert [f["problem"] for f in doc["findings"]] == ["copies", "private-copy", "copies"]
    private = doc["findings"][1]
    if shutil.which("c++filt"):
        assert "executorch::extension::cuda::getCallerStream()" in private["demangled"]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: StreamCase) -> None:
    text = tmp_path / "notes.whl"
    text.write_text("hello\n")
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as t:
        t.add(case.lib, arcname="../../libextension_cuda.so")
    for path, words in ((text, "not a directory, a zip or wheel, or a tar archive"),
                        (evil, "leaves the package"),
                        (tmp_path / "gone", "No such file")):
        result = gate(path)
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith("error: ") and words in line
        assert "Traceback" not in result.stderr
    assert not (tmp_path.parent / LIB).exists()
    bare = subprocess.run([sys.executable, "-m", "bazel_ldfix", "assert-package",
                           str(tmp_path)], capture_output=True, text=True)
    assert bare.returncode == 2
    assert bare.stderr.strip() == "error: no library named: give --library NAME"


def test_a_corrupt_elf_member_is_reported_and_not_read(tmp_path: Path,
                                                       case: StreamCase) -> None:
    cut = tmp_path / "cut.so"
    cut.write_bytes(case.lib.read_bytes()[:100])
    root = package(tmp_path / "dir", {f"pkg/lib/{LIB}": case.lib, "pkg/lib/libcut.so": cut})
    report = check_package(str(root), [LIB])
    assert report.ok
    assert [u.file for u in report.unread] == ["pkg/lib/libcut.so"]
    assert "not read: pkg/lib/libcut.so" in gate(root).stdout


def test_nothing_of_the_package_is_run(tmp_path: Path) -> None:
    """A program of the package that would leave a mark if it ran leaves none."""
    mark = tmp_path / "ran"
    src = f'#include <stdio.h>\nint main(void){{fopen("{mark}", "w"); return 0;}}\n'
    prog = program(tmp_path / "build" / "prog")
    subprocess.run(["cc", "-x", "c", "-", "-o", str(prog)], input=src.encode(), check=True)
    root = package(tmp_path / "dir", {f"pkg/bin/{LIB}": prog})
    assert gate(root).returncode == 1
    assert not mark.exists()


def test_a_renamed_archive_in_a_wheel_is_named_by_its_member_name(
        tmp_path: Path, case: StreamCase) -> None:
    root = package(tmp_path / "dir", {f"pkg/lib/{LIB}": case.lib,
                                      f"pkg/vendor/{LIB}": case.renamed})
    [finding] = check_package(str(wheel(root, tmp_path / "w.whl")), [LIB]).findings
    assert finding.detail == (f"a static archive (ar) named {LIB}: the linker would copy its "
                              "objects into the program, making a private copy")


def test_links_that_lead_nowhere_are_listed_and_a_directory_link_is_not(
        tmp_path: Path, case: StreamCase) -> None:
    root = package(tmp_path / "dir", {f"pkg/lib/{LIB}": case.lib})
    (root / "pkg" / "lib64").symlink_to("lib")
    (root / "pkg" / "libz.so").symlink_to("/lib/x86_64-linux-gnu/libz.so.1")
    (root / "pkg" / "a").symlink_to("b")
    (root / "pkg" / "b").symlink_to("a")
    report = check_package(str(root), [LIB])
    assert report.ok
    assert [(link.name, link.problem.value if link.problem else None)
            for link in report.links] == [("pkg/a", "loop"), ("pkg/b", "loop"),
                                          ("pkg/libz.so", "outside")]
    assert ("  link pkg/libz.so -> /lib/x86_64-linux-gnu/libz.so.1: leaves the package: "
            "not followed") in gate(root).stdout.splitlines()

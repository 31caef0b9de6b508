"""Why a file was passed over is a kind to decide by, plus words to print, on one type.

The loader's rejections and the output_base choice share ``PassedOver``; what the diagnosis
and the repair report do with a candidate depends on its kind, never on its words.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from elfbuild import cc, lib, patch_machine, program

from bazel_ldfix import elf
from bazel_ldfix.diagnosis.explain import split_choice
from bazel_ldfix.loader.closure import host_of, interp_for
from bazel_ldfix.loader.resolution import Environment, PassedOver, PassReason
from bazel_ldfix.loader.search import Loader
from bazel_ldfix.outputbase import index

SO = "int f(void){return 1;}"


def shared(path: Path) -> Path:
    return cc(path, "-shared", f"-Wl,-soname,{path.name}", src=SO)


def test_each_candidate_the_choice_leaves_out_has_its_kind(tmp_path: Path) -> None:
    best = shared(tmp_path / "a" / "libx.so.1")
    other = shared(tmp_path / "deeper" / "lib" / "libx.so.1")
    arm = tmp_path / "arm" / "libx.so.1"
    arm.parent.mkdir()
    arm.write_bytes(best.read_bytes())
    patch_machine(arm, 183)
    obj = cc(tmp_path / "obj" / "libx.so.1", "-c", src=SO)          # ET_REL: loads nowhere
    # The loader itself refuses a program ("cannot dynamically load executable").
    exe = cc(tmp_path / "exe" / "libx.so.1", "-no-pie", src="int main(void){return 0;}")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    alias = tmp_path / "link" / "libx.so.1"
    choice = index.choose("libx.so.1", map(str, [best, other, arm, obj, exe, alias]),
                          elf.read_header("/bin/sh"))
    assert choice.path == str(best)
    kinds = {p.path: p.kind for p in choice.passed_over}
    assert kinds == {str(other): PassReason.NOT_PREFERRED, str(alias): PassReason.SAME_FILE,
                     str(arm): PassReason.NOT_LOADABLE, str(obj): PassReason.NOT_LOADABLE,
                     str(exe): PassReason.NOT_LOADABLE}
    assert all(p.reason for p in choice.passed_over)


def test_the_loaders_rejections_are_not_loadable(tmp_path: Path) -> None:
    x = lib(tmp_path / "good" / "libx.so")
    patch_machine(lib(tmp_path / "arm" / "libx.so"), 183)
    app = program(tmp_path / "app", needs=[x], rpath=f"{tmp_path}/arm:{tmp_path}/good")
    info = elf.read_elf(str(app))
    res = Loader(host_of(interp_for(info)), Environment(None, "/", None)).resolve(str(app))
    (libx,) = [lib for lib in res.libraries if lib.name == "libx.so"]
    assert libx.path == f"{tmp_path}/good/libx.so"
    assert [(r.path, r.kind) for r in libx.rejected] == [
        (f"{tmp_path}/arm/libx.so", PassReason.NOT_LOADABLE)]


def test_the_diagnosis_sorts_candidates_by_kind_whatever_their_words(tmp_path: Path) -> None:
    chosen = str(tmp_path / "a" / "libx.so.1")
    passed = [PassedOver("/o/libx.so.1", PassReason.NOT_PREFERRED, "anything at all"),
              PassedOver("/s/libx.so.1", PassReason.SAME_FILE, "another copy was preferred"),
              PassedOver("/n/libx.so.1", PassReason.NOT_LOADABLE, "the same file as it")]
    found, rest = split_choice(os.path.dirname(chosen), "libx.so.1", passed)
    assert found == (chosen, "/o/libx.so.1")
    assert rest == (passed[2],)
    # The words can change freely: the answer is the same.
    reworded = [dataclasses.replace(p, reason=f"reworded {i}") for i, p in enumerate(passed)]
    assert split_choice(os.path.dirname(chosen), "libx.so.1", reworded)[0] == found

"""The BUILD change that fixes a failure for good, on Bazel 4.2.3's layout, imitated: the
rule it names, and a cc_import text that parses and imports a real file with the SONAME."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
from pathlib import Path

from diagnose_fixtures import fake_bazel
from testcontext import context_of

from bazel_ldfix import elf
from bazel_ldfix.diagnosis.hermetic import build_fix

SONAME = "libxdemo.so.11"


def _calls(text: str) -> list[dict[str, str]]:
    """The keyword strings of each indented cc_import(...) block in ``text``."""
    blocks = [b for b in text.split("\n\n") if b.lstrip().startswith("cc_import(")]
    calls = []
    for block in blocks:
        code = "\n".join(line.split("  #", 1)[0].split("# ...", 1)[0]
                         for line in block.splitlines())
        call = ast.parse(code.strip()).body[0].value        # type: ignore[attr-defined]
        calls.append({k.arg: k.value.value for k in call.keywords})
    return calls


def test_the_import_gets_the_versioned_file_of_its_own_package(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    text = build_fix(context_of(fake), SONAME, [str(fake.sdk_lib / SONAME)])
    assert text is not None and text.startswith("@xsdk//:xdemo (a cc_import")
    versioned, interface = _calls(text)
    assert versioned == {"name": "xdemo", "shared_library": f"lib/{SONAME}"}
    assert interface == {"name": "xdemo", "interface_library": "lib/libxdemo.so",
                         "shared_library": f"lib/{SONAME}"}
    repo = fake.output_base / "external" / "xsdk"
    assert elf.read_elf(str(repo / versioned["shared_library"])).soname == SONAME


def test_a_version_the_package_has_no_file_for_asks_the_repository(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    text = build_fix(context_of(fake), SONAME, [str(fake.sdk_lib / SONAME)], version="V_9")
    assert text is not None and "no usable file named libxdemo.so.11" in text


def test_a_library_staged_under_its_soname_needs_no_change(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    solib = fake.bin / "_solib_k8" / "_U@xsdk_S_S_Cxdemo___Ulib"
    (solib / "libxdemo.so").unlink()
    (solib / SONAME).symlink_to(fake.sdk_lib / SONAME)
    assert subprocess.run([str(fake.executable)]).returncode == 0     # the real loader agrees
    assert build_fix(context_of(fake), SONAME, [str(fake.sdk_lib / SONAME)]) is None


def test_an_import_the_test_does_not_depend_on_is_added_to_its_deps(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    (fake.output_base / "external" / "xsdk" / "BUILD.bazel").write_text(
        f'cc_import(name = "xdemo11", shared_library = "lib/{SONAME}")\n')
    alone = dataclasses.replace(context_of(fake), imports=(), other_imports=())
    text = build_fix(alone, SONAME, [str(fake.sdk_lib / SONAME)])
    assert text == (f'Add "@xsdk//:xdemo11" (the cc_import of {SONAME}) to the deps of '
                    "//t:app_test.\n")

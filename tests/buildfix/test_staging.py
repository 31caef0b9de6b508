"""What a test would still miss once Bazel stages a change, modelled on a copy, and checked
by staging the change for real and running the test."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from diagnose_fixtures import fake_bazel
from elfbuild import program

from bazel_ldfix.buildfix.staging import missing_after

SOLIB_DIR = "_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib"


def _tree(root: Path) -> dict[str, str]:
    return {str(p): os.readlink(p) if p.is_symlink() else "" for p in sorted(root.rglob("*"))}


def test_the_versioned_name_staged_is_what_the_test_misses(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    before = _tree(fake.bin)
    versioned = fake.sdk_lib / "libxdemo.so.11"
    assert missing_after(str(fake.executable), [], None) == ("libxdemo.so.11",)
    assert missing_after(str(fake.executable), [(f"{SOLIB_DIR}/libxdemo.so.11",
                                                 str(versioned))], None) == ()
    assert _tree(fake.bin) == before                  # modelled on a copy, nothing staged
    # The real loader agrees once Bazel's staging is made for real.
    (fake.bin / SOLIB_DIR / "libxdemo.so.11").symlink_to(versioned)
    assert subprocess.run([str(fake.executable)]).returncode == 0
    assert missing_after(str(fake.executable), [], None) == ()


def test_a_name_staged_elsewhere_does_not_help(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    added = [("_solib_k8/_U@other_S_S_Cx___Ulib/libxdemo.so.11",
              str(fake.sdk_lib / "libxdemo.so.11"))]
    assert missing_after(str(fake.executable), added, None) == ("libxdemo.so.11",)


def test_the_library_path_is_searched_as_the_test_would(tmp_path: Path) -> None:
    fake = fake_bazel(tmp_path)
    assert missing_after(str(fake.executable), [], str(fake.sdk_lib)) == ()


def test_a_program_outside_a_bin_directory_is_not_modelled(tmp_path: Path) -> None:
    exe = program(tmp_path / "out" / "app")
    assert missing_after(str(exe), [], None) is None
    text = tmp_path / "bin" / "script"
    text.parent.mkdir()
    text.write_text("#!/bin/sh\n")
    assert missing_after(str(text), [], None) is None

"""Where the user's workspace is, and the output_base Bazel names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.workspace import WORKSPACE_FILES, output_base, workspace_of
from bazel_ldfix.errors import BazelError


@pytest.mark.parametrize("boundary", WORKSPACE_FILES)
def test_the_nearest_ancestor_with_a_boundary_file_is_the_workspace(
        tmp_path: Path, boundary: str) -> None:
    (tmp_path / "ws" / "a" / "b").mkdir(parents=True)
    (tmp_path / "ws" / boundary).write_text("")
    (tmp_path / "WORKSPACE").write_text("")          # an outer one is not the nearest
    assert workspace_of(str(tmp_path / "ws" / "a" / "b")) == str(tmp_path / "ws")
    assert workspace_of(str(tmp_path / "ws")) == str(tmp_path / "ws")


def test_a_directory_named_like_a_boundary_file_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "WORKSPACE").mkdir(parents=True)
    assert workspace_of(str(tmp_path / "pkg")) is None


def test_a_relative_directory_is_taken_from_the_current_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "MODULE.bazel").write_text("")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    assert workspace_of("sub") == str(tmp_path)


# A wrapper that prints a line of its own first is what a real Bazel cannot give: a script.
def _bazel(tmp_path: Path, body: str) -> Bazel:
    script = tmp_path / "bazel"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return Bazel(str(script), str(tmp_path), dict(os.environ))


def test_output_base_is_the_last_line_bazel_info_prints(tmp_path: Path) -> None:
    bazel = _bazel(tmp_path, 'echo "wrapper: using bazel 4.2.3"\necho "/ob/$1/$2"\necho')
    assert output_base(bazel) == "/ob/info/output_base"


def test_output_base_printed_as_nothing_is_a_bazel_error(tmp_path: Path) -> None:
    with pytest.raises(BazelError, match="printed nothing") as caught:
        output_base(_bazel(tmp_path, "exit 0"))
    assert caught.value.cmd[-2:] == ("info", "output_base")

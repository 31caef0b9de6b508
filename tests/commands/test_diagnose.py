"""``diagnose`` as a user runs it, on Bazel 4.2.3's layout without Bazel: exit codes,
output forms and bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from diagnose_fixtures import fake_bazel

from bazel_ldfix import cli


def cli_run(args: list[str], cwd: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str,
                                                                                       str]:
    here = os.getcwd()
    os.chdir(cwd)
    try:
        code = cli.main(["diagnose", *args])
    finally:
        os.chdir(here)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = fake_bazel(tmp_path)
    code, out, _ = cli_run([], fake.workspace, capsys)
    assert code == 1 and re.search(r"^    libxdemo\.so\.11  .* for //t:app_test$", out, re.M)
    code, out, _ = cli_run(["-v"], fake.workspace, capsys)
    assert code == 1 and "//t:app_test cannot load libxdemo.so.11" in out
    code, out, _ = cli_run(["--json", "//t:app_test"], fake.workspace, capsys)
    assert code == 1 and json.loads(out)["failures"][0]["soname"] == "libxdemo.so.11"
    # A pattern that matches no failed test is bad input, named (a typo is not "nothing").
    code, out, err = cli_run(["//nothing/..."], fake.workspace, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: no failed test matches //nothing/... in ")
    assert "the failed tests: //t:app_test" in err
    bad = tmp_path / "bad.json"
    bad.write_text("garbage\n")
    code, _, err = cli_run(["--bep", str(bad)], fake.workspace, capsys)
    assert code == 2 and err.startswith("error: ") and "not JSON" in err
    code, _, err = cli_run(["--log", str(fake.executable)], fake.workspace, capsys)
    assert code == 2 and "binary data" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "WORKSPACE").write_text("")
    code, _, err = cli_run([], empty, capsys)
    assert code == 2 and "no bazel-testlogs" in err


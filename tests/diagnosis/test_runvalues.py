"""A run's recorded environment applies to that run only: the command.log it left."""

from __future__ import annotations

import os
from pathlib import Path

from bazel_ldfix.diagnosis import runvalues


def test_a_record_applies_while_the_runs_command_log_is_unchanged(tmp_path: Path) -> None:
    root, output_base = tmp_path / "cache", tmp_path / "ob"
    root.mkdir(mode=0o700)
    output_base.mkdir()
    log = output_base / "command.log"
    log.write_text("FAIL: //t:x (see /ob/x/test.log)\n")
    runvalues.keep(str(root), str(output_base), {"//t:x": "/tc/lib", "//t:y": None})
    recalled = runvalues.recall(str(root), str(output_base))
    assert recalled is not None
    assert recalled.value("//t:x") == "/tc/lib" and recalled.value("//t:y") is None
    # Any later Bazel command rewrites command.log: the record is not that run's.
    log.write_text("Executed 1 out of 1 test: 1 test passes.\n")
    assert runvalues.recall(str(root), str(output_base)) is None


def test_a_record_another_user_could_write_is_not_read(tmp_path: Path) -> None:
    root, output_base = tmp_path / "cache", tmp_path / "ob"
    root.mkdir(mode=0o700)
    output_base.mkdir()
    (output_base / "command.log").write_text("x\n")
    runvalues.keep(str(root), str(output_base), {"//t:x": "/tc/lib"})
    [record] = (root / "ran-with").iterdir()
    os.chmod(record, 0o666)
    assert runvalues.recall(str(root), str(output_base)) is None
    os.chmod(record, 0o600)
    record.write_bytes(record.read_bytes()[:-3])      # cut short
    assert runvalues.recall(str(root), str(output_base)) is None

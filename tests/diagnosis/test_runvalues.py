"""A run's recorded environment applies to that run only: the command.log it left."""

from __future__ import annotations

import os
from pathlib import Path

from bazel_ldfix import store
from bazel_ldfix.diagnosis import runvalues
from bazel_ldfix.store import Store


def opened(root: Path) -> Store:
    kept = store.at(str(root))
    assert kept is not None
    return kept


def test_a_record_applies_while_the_runs_command_log_is_unchanged(tmp_path: Path) -> None:
    root, output_base = tmp_path / "cache", tmp_path / "ob"
    kept = opened(root)
    output_base.mkdir()
    log = output_base / "command.log"
    log.write_text("FAIL: //t:x (see /ob/x/test.log)\n")
    runvalues.keep(kept, str(output_base), {"//t:x": "/tc/lib", "//t:y": None})
    recalled = runvalues.recall(kept, str(output_base))
    assert recalled is not None
    assert recalled.value("//t:x") == "/tc/lib" and recalled.value("//t:y") is None
    # Any later Bazel command rewrites command.log: the record is not that run's.
    log.write_text("Executed 1 out of 1 test: 1 test passes.\n")
    assert runvalues.recall(kept, str(output_base)) is None


def test_a_record_another_user_could_write_is_not_read(tmp_path: Path) -> None:
    root, output_base = tmp_path / "cache", tmp_path / "ob"
    kept = opened(root)
    output_base.mkdir()
    (output_base / "command.log").write_text("x\n")
    runvalues.keep(kept, str(output_base), {"//t:x": "/tc/lib"})
    [record] = (root / "ran-with").iterdir()
    os.chmod(record, 0o666)
    assert runvalues.recall(kept, str(output_base)) is None
    os.chmod(record, 0o600)
    record.write_bytes(record.read_bytes()[:-3])      # cut short
    assert runvalues.recall(kept, str(output_base)) is None


def test_a_record_of_the_earlier_format_is_not_read(tmp_path: Path) -> None:
    """Version 1 held its version in its JSON and had no header line."""
    import json
    import zlib

    root, output_base = tmp_path / "cache", tmp_path / "ob"
    kept = opened(root)
    output_base.mkdir()
    log = output_base / "command.log"
    log.write_text("x\n")
    runvalues.keep(kept, str(output_base), {"//t:x": "/tc/lib"})
    [record] = (root / "ran-with").iterdir()
    st = os.stat(log)
    body = json.dumps({"version": 1, "values": {"//t:x": "/planted"}, "command_log": [
        st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]}).encode()
    record.write_bytes(body + b"\0\0\0end %d %08x\n" % (len(body), zlib.crc32(body)))
    assert runvalues.recall(kept, str(output_base)) is None

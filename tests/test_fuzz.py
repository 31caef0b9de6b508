"""Fixed-seed fuzzing campaigns (tools/fuzz.py): mutated real ELF files and the system's
ld.so.cache through the reader, the loader model, resolve and locate; Bazel 4.2.3's recorded
query XML and build events (nested deep, huge numbers, NUL bytes, random bytes) through
their readers. Every input ends in a result or the project's own error within the time
bound, in bounded memory."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.security

TOOL = Path(__file__).resolve().parent.parent / "tools" / "fuzz.py"
MEMORY = 2 << 30  # bytes of address space the campaign may use


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def test_a_fixed_seed_campaign_finds_nothing() -> None:
    result = subprocess.run([sys.executable, str(TOOL), "--seed", "20261130", "--inputs",
                             "1500", "--time-bound", "5"], capture_output=True, text=True,
                            preexec_fn=_limit_memory, timeout=900, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1500 inputs run, 0 failures" in result.stdout


def test_a_fixed_seed_campaign_on_the_query_xml_and_the_events_finds_nothing() -> None:
    result = subprocess.run([sys.executable, str(TOOL), "--seed", "20261202", "--inputs",
                             "3000", "--time-bound", "5", "--kinds", "xml,bep"],
                            capture_output=True, text=True, preexec_fn=_limit_memory,
                            timeout=900, check=False)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert "3000 inputs run, 0 failures" in result.stdout

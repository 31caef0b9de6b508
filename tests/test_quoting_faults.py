"""The smaller faults: a Bazel killed by a signal, control characters in names, and JSON of
names that are not UTF-8. (A write of the per-user store that fails: tests/test_store.py.)"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import lib, program
from elfcraft import craft

from bazel_ldfix import quoting
from tests.commands.test_env_failures import fake_bazel_with_a_test

pytestmark = pytest.mark.security


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NO_COLOR")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], capture_output=True,
                          env=env, cwd=cwd, timeout=120)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM])
def test_a_bazel_killed_by_a_signal_exits_128_plus_n_with_a_message(
        tmp_path: Path, sig: signal.Signals) -> None:
    bazel, _log = fake_bazel_with_a_test(tmp_path, f"kill -{int(sig)} $$\n")
    result = run("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    assert result.returncode == 128 + sig
    err = result.stderr.decode()
    assert f"was killed by {sig.name} (exit code {128 + sig})" in err
    assert "Traceback" not in err


# -- control characters in names ---------------------------------------------------------

FORGED = "libx.so.1\n  └── libc.so.6 [default] /evil\x1b]0;owned\x07\x1b[2J"


def test_a_needed_name_with_a_newline_or_escape_is_printed_escaped(tmp_path: Path) -> None:
    bad = craft(tmp_path / "libbad.so", needed=[FORGED])
    result = run("resolve", str(bad))
    out = result.stdout.decode()
    assert "\x1b" not in out and "\x07" not in out
    assert "libx.so.1\\n  └── libc.so.6 [default] /evil\\e]0;owned\\x07\\e[2J" in out
    assert not any(line.lstrip().startswith("└── libc.so.6 [default] /evil")
                   for line in out.splitlines())


def test_a_file_name_with_control_characters_in_an_error_is_escaped(tmp_path: Path) -> None:
    weird = tmp_path / "a\nerror: forged\x1b[31m"
    weird.write_text("not elf")
    result = run("resolve", str(weird))
    err = result.stderr.decode()
    assert result.returncode == 2
    assert err.count("\n") == 1 and "\x1b" not in err
    assert "a\\nerror: forged\\e[31m" in err


def test_printable_leaves_ordinary_names_alone() -> None:
    for name in ("libstdc++.so.6", "/opt/Ünïcode/lib", "a\tb"):
        assert quoting.printable(name) == name
    assert quoting.printable("x\u202ey") == "x\\u202ey"
    assert quoting.printable("lib\udcff.so") == "lib\\xff.so"


# -- JSON of names that are not UTF-8 --------------------------------------------------------

def test_json_gives_a_non_utf8_path_as_base64_of_its_bytes(tmp_path: Path) -> None:
    raw_dir = os.fsencode(tmp_path) + b"/d\xff\xfe"
    os.makedirs(raw_dir)
    libx = lib(Path(os.fsdecode(raw_dir)) / "libx.so.1")
    app = program(tmp_path / "app", needs=[libx], runpath=os.fsdecode(raw_dir))
    result = run("resolve", "--json", str(app))
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode("utf-8")  # valid UTF-8, no lone surrogate escapes
    assert "\\udc" not in text
    doc = json.loads(text)
    path = next(x["path"] for x in doc["libraries"] if x["soname"] == "libx.so.1")
    assert base64.b64decode(path["base64"]) == raw_dir + b"/libx.so.1"


def test_json_safe_keeps_utf8_strings_as_strings() -> None:
    assert quoting.json_safe({"a": ["/é/x", 1, None]}) == {"a": ["/é/x", 1, None]}
    assert quoting.json_safe({"k\udcff": "v\udcff"}) == {"k\\xff": {"base64": "dv8="}}


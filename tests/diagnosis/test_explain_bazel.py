"""The loader's other failures, explained with the change to make (a real Bazel 4.2.3).

Two tests link the newer copies of two SDK libraries; the rc file's
``--test_env=LD_LIBRARY_PATH=<top>/old`` puts older copies earlier in the search path.
``libver.so.2`` is built with a version script (the old one lacks VER_2), ``libsym.so.1``
without (the old one lacks ``sym_new``). The diagnosis names which object needs what,
which loaded copy lacks it, which copy has it, and the command it prints makes the tests
pass under Bazel.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
from bazelws import BAZEL, Workspace
from newcomer_ws import old_copies_workspace

pytestmark = [pytest.mark.newcomer, pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TESTS = ("//app:ver_test", "//app:sym_test")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = old_copies_workspace(tmp_path_factory.mktemp("oldcopies"))
    workspace.env["XDG_CACHE_HOME"] = str(workspace.root.parent / "cache")
    yield workspace
    workspace.shutdown()


@pytest.fixture(scope="module")
def run(ws: Workspace) -> list[str]:
    """The lines `bazel-ldfix test` prints of its own, after a run the loader stopped."""
    result = ws.ldfix("test", *TESTS)
    assert result.returncode == 3, result.stderr[-3000:]
    return [line.removeprefix("bazel-ldfix: ") for line in result.stderr.splitlines()
            if line.startswith("bazel-ldfix: ")]


def old(ws: Workspace, name: str) -> str:
    return str(ws.root.parent / "old" / name)


def test_the_real_loader_stops_at_the_version_and_at_the_symbol(ws: Workspace) -> None:
    assert ws.bazel("test", *TESTS).returncode == 3
    assert (f"{old(ws, 'libver.so.2')}: version `VER_2' not found (required by"
            in ws.test_log("app", "ver_test"))
    assert "undefined symbol: sym_new" in ws.test_log("app", "sym_test")


def test_each_failure_says_who_needs_what_which_copy_lacks_it_and_which_has_it(
        ws: Workspace, run: list[str]) -> None:
    ver = run.index(f"  the loader took {old(ws, 'libver.so.2')}, which defines only "
                    "VER_1:")
    assert re.fullmatch(r"    libver\.so\.2 VER_2 +needed by ver_test; defined by "
                        r"\$OUTPUT_BASE/external/ver/lib/libver\.so\.2  for //app:ver_test",
                        run[ver + 1]), run[ver + 1]
    sym = run.index(f"  the loader took {old(ws, 'libsym.so.1')}, which lacks a symbol "
                    "sym_test uses:")
    assert re.fullmatch(r"    sym_new +needed by sym_test; defined by "
                        r"\$OUTPUT_BASE/external/sym/lib/libsym\.so\.1  for //app:sym_test",
                        run[sym + 1]), run[sym + 1]


def test_the_commands_printed_first_make_the_tests_pass(
        ws: Workspace, run: list[str]) -> None:
    start = run.index("run first (each for its tests):")
    commands = [line.strip() for line in run[start + 1:start + 3]]
    assert sorted(shlex.split(c)[2] for c in commands) == sorted(TESTS)
    for command in commands:
        argv = shlex.split(command)
        assert argv[:2] == ["bazel", "test"]
        # The good copy first, the rc file's value kept after it.
        assert argv[3].endswith(f":{ws.root.parent / 'old'}")
        result = ws.bazel(*argv[1:])
        assert result.returncode == 0, result.stderr[-3000:]


def test_the_details_say_where_the_old_copy_comes_from(ws: Workspace, run: list[str]) -> None:
    assert ws.bazel("test", *TESTS).returncode == 3
    assert ws.ldfix("test", *TESTS).returncode == 3   # the run `diagnose` then reads
    doc: dict[str, Any] = json.loads(ws.ldfix("diagnose", "--json").stdout)
    by_test = {f["test"]: f for f in doc["failures"]}
    ver, sym = by_test["//app:ver_test"], by_test["//app:sym_test"]
    assert ver["cause"] == {"kind": "lacks_version", "subject": old(ws, "libver.so.2")}
    assert (ver["error_kind"], ver["version"]) == ("version_not_found", "VER_2")
    assert sym["cause"] == {"kind": "lacks_symbol", "subject": old(ws, "libsym.so.1")}
    assert (sym["error_kind"], sym["symbol"], sym["soname"]) == (
        "undefined_symbol", "sym_new", "libsym.so.1")
    for f in (ver, sym):
        assert any(n.startswith(f"{ws.root.parent / 'old'} is on the test's LD_LIBRARY_PATH")
                   for n in f["notes"]), f["notes"]
        assert "Take it out of the test's environment first" in f["fix"]["build"]

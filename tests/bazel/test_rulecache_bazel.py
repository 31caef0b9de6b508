"""The rules' answer remembered between runs, with a real Bazel: every command is logged.

An unchanged workspace is not queried again; an edited BUILD file or a loaded macro is
(and the rule's new value is the one kept); `--no-cache` always queries.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import (
    BAZEL,
    LOADS_X,
    Workspace,
    clean_env,
    import_repository,
    logged_commands,
    logging_bazel,
    make_workspace,
    sdk,
)

from bazel_ldfix.bazel import rulecache

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

BUILD = """load(":macro.bzl", "with_env_test")
cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])
with_env_test(name = "macro_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])
"""
MACRO = """def with_env_test(**kwargs):
    native.cc_test(env = {{"LD_LIBRARY_PATH": "{}"}}, **kwargs)
"""


class Logged:
    """The workspace, run through a `bazel` that logs each command."""

    def __init__(self, ws: Workspace, top: Path) -> None:
        self.ws = ws
        self.wrapper, self.log = logging_bazel(top)
        self.edited = time.time()

    def env(self, *options: str) -> tuple[str, list[str]]:
        """`bazel-ldfix env OPTIONS //t:all`: its flag line, and the Bazel commands run."""
        self.log.unlink(missing_ok=True)
        result = self.ws.ldfix("env", "--bazel", str(self.wrapper), *options, "//t:all")
        assert result.returncode == 0, result.stderr
        return result.stdout, logged_commands(self.log)

    def edit(self, rel: str, text: str) -> None:
        (self.ws.root / rel).write_text(text)
        self.edited = time.time()

    def remembered(self) -> str:
        """The output of a run that asked no query (the answer was remembered)."""
        # A record is written only from files older than SETTLE_NS when the query starts.
        time.sleep(max(0.0, self.edited + rulecache.SETTLE_NS / 1e9 + 0.2 - time.time()))
        first, _ = self.env()
        out, commands = self.env()
        assert commands == ["test"] and out == first
        return out


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logged]:
    top = tmp_path_factory.mktemp("rulecache")
    sdk(top / "sdks" / "xsdk", "xdemo", "11")
    files = {"WORKSPACE": import_repository("xsdk", top / "sdks" / "xsdk", "xdemo"),
             "t/BUILD": BUILD, "t/macro.bzl": MACRO.format("/macro/one"), "t/x.c": LOADS_X}
    ws = make_workspace(top / "ws", files,
                        env={**clean_env(), "XDG_CACHE_HOME": str(top / "cache")})
    ws.bazel("build", "//t:all", check=True)
    yield Logged(ws, top)
    ws.shutdown()


def test_an_unchanged_workspace_is_not_queried_again(logged: Logged) -> None:
    first, commands = logged.env()
    assert commands == ["test", "query"]
    assert "/macro/one" in first and "external/xsdk/lib" in first
    again, commands = logged.env()
    assert commands == ["test"]
    assert again == first


def test_an_edited_macro_is_queried_again(logged: Logged) -> None:
    before = logged.remembered()
    assert "/macro/one" in before
    logged.edit("t/macro.bzl", MACRO.format("/macro/two"))
    out, commands = logged.env()
    assert commands == ["test", "query"]
    assert "/macro/two" in out and "/macro/one" not in out


def test_a_build_file_given_an_env_is_queried_again_and_its_value_kept(logged: Logged) -> None:
    before = logged.remembered()
    assert "/some/dir" not in before
    logged.edit("t/BUILD", BUILD.replace(
        'deps = ["@xsdk//:xdemo"])',
        'deps = ["@xsdk//:xdemo"], env = {"LD_LIBRARY_PATH": "/some/dir"})', 1))
    out, commands = logged.env()
    assert commands == ["test", "query"]
    # Bazel 4.2.3: the flag replaces the rule's value, which the base therefore keeps,
    # with the macro's value and the directory found.
    assert "/some/dir" in out and "/macro/" in out and "external/xsdk/lib" in out


def test_no_cache_always_queries(logged: Logged) -> None:
    remembered = logged.remembered()
    for _ in range(2):
        out, commands = logged.env("--no-cache")
        assert commands == ["test", "query"]
        assert out == remembered

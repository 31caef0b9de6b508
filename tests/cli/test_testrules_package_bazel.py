"""`ldfix_package_test` in a real Bazel 4.2.3 workspace (offline): the package gate over a
tar.gz a genrule packs, from libraries Bazel builds."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, REPO, Workspace, make_workspace, runtime_env

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

# The library keeps the caller's stream in a thread-local; the extension reads it.
STREAM = """
_Thread_local void *current_stream;
void *get_caller_stream(void) { return current_stream; }
void set_caller_stream(void *s) { current_stream = s; }
"""
EXTENSION = """
void *get_caller_stream(void);
void *ext_stream(void) { return get_caller_stream(); }
"""
PLAIN = "int plain_value(void) { return 1; }\n"

BUILD = r'''
load("@bazel_ldfix//:defs.bzl", "ldfix_package_test")

cc_binary(
    name = "libextension_cuda.so",
    srcs = ["stream.c"],
    linkopts = ["-Wl,-soname,libextension_cuda.so"],
    linkshared = True,
)

cc_library(name = "stream_static", srcs = ["stream.c"])

# The library's code linked in: a private copy of its thread-local.
cc_binary(name = "_ext.so", srcs = ["ext.c"], deps = [":stream_static"], linkshared = True)

cc_binary(name = "_plain.so", srcs = ["plain.c"], linkshared = True)

PACK = "d=$(@D)/$$(basename $@).d; rm -rf $$d; mkdir -p $$d/pkg/lib; " + \
       "cp $(SRCS) $$d/pkg/lib/; tar czf $@ -C $$d pkg"

genrule(name = "good", srcs = [":libextension_cuda.so", ":_plain.so"], outs = ["good.tar.gz"],
        cmd = PACK)

genrule(name = "bad", srcs = [":libextension_cuda.so", ":_ext.so"], outs = ["bad.tar.gz"],
        cmd = PACK)

ldfix_package_test(name = "good_package_test", package = ":good",
                   libraries = ["libextension_cuda.so"])

ldfix_package_test(name = "bad_package_test", package = ":bad",
                   libraries = ["libextension_cuda.so"], tags = ["manual"])
'''


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("package_rule")
    files = {
        "WORKSPACE": (f'local_repository(name = "bazel_ldfix", path = "{REPO}")\n'
                      'load("@bazel_ldfix//:repositories.bzl", "bazel_ldfix_dependencies")\n'
                      "bazel_ldfix_dependencies()\n"),
        "pkg/BUILD": BUILD,
        "pkg/stream.c": STREAM,
        "pkg/ext.c": EXTENSION,
        "pkg/plain.c": PLAIN,
    }
    workspace = make_workspace(top / "ws", files, env=runtime_env(top))
    try:
        yield workspace
    finally:
        workspace.shutdown()


def test_package_test_passes_one_shared_copy_and_fails_a_private_one(ws: Workspace) -> None:
    good = ws.bazel("test", "//pkg:good_package_test")
    assert good.returncode == 0, good.stderr[-3000:]
    log = ws.test_log("pkg", "good_package_test")
    assert ("ok   libextension_cuda.so: one shared object, pkg/lib/libextension_cuda.so "
            "(SONAME libextension_cuda.so)") in log

    bad = ws.bazel("test", "//pkg:bad_package_test")
    assert bad.returncode == 3, bad.stderr[-3000:]
    log = ws.test_log("pkg", "bad_package_test")
    assert "FAIL libextension_cuda.so: a private copy: pkg/lib/_ext.so: defines 3 of the 3 " \
           "names libextension_cuda.so exports" in log
    # What the rule checked is what Bazel built: the package holds the extension.
    with tarfile.open(Path(ws.root / "bazel-bin" / "pkg" / "bad.tar.gz")) as t:
        assert "pkg/lib/_ext.so" in t.getnames()

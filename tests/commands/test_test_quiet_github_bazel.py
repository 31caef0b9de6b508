"""What `test --quiet --github` says of a test, on a real Bazel 4.2.3.

``//t:fails_otherwise`` links ``libxdemo.so.11``, which Bazel stages under another name, so
only the repair lets it load; then its ``main`` returns 1. It is not called repaired: its
notice says it loads and failed for another reason. ``//t:left`` loads ``libydemo.so.5``
from a file an earlier build left in ``bazel-out`` (the ``cc_import`` named that file, then
the unversioned one); under ``--quiet`` its warning is still said, and annotated.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bazelws import BAZEL, Workspace, clean_env, import_repository, make_workspace, sdk

from tests.render.test_github import runner_parse

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    top = tmp_path_factory.mktemp("quietgithub")
    sdk(top / "xsdk", "xdemo", "11")
    sdk(top / "ysdk", "ydemo", "5")
    ysdk = import_repository("ysdk", top / "ysdk", "ydemo")
    files = {
        # The earlier build: the versioned file, staged under its own name.
        "WORKSPACE": (import_repository("xsdk", top / "xsdk", "xdemo")
                      + ysdk.replace("lib/libydemo.so", "lib/libydemo.so.5")),
        "t/BUILD": ('cc_test(name = "fails_otherwise", srcs = ["x.c"], '
                    'deps = ["@xsdk//:xdemo"])\n'
                    'cc_test(name = "left", srcs = ["y.c"], deps = ["@ysdk//:ydemo"])\n'),
        "t/x.c": "int xdemo_value(void);\n"
                 "int main(void) { return xdemo_value() == 11 ? 1 : 0; }\n",
        "t/y.c": "int ydemo_value(void);\n"
                 "int main(void) { return ydemo_value() == 5 ? 0 : 1; }\n",
    }
    env = {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}
    workspace = make_workspace(top / "ws", files, env=env)
    try:
        built = workspace.bazel("build", "//t:left")
        assert built.returncode == 0, built.stderr[-3000:]
        # Now the unversioned file: libydemo.so.5 stays in bazel-out, declared by none.
        path = workspace.root / "WORKSPACE"
        path.write_text(path.read_text().replace("lib/libydemo.so.5", "lib/libydemo.so"))
        yield workspace
    finally:
        workspace.shutdown()


def annotations(stdout: str) -> list[tuple[str, dict[str, str], str]]:
    return [parsed for line in stdout.splitlines() if (parsed := runner_parse(line))]


def test_a_test_that_loads_and_fails_otherwise_is_not_called_repaired(ws: Workspace) -> None:
    result = ws.ldfix("test", "--quiet", "--github", "//t:fails_otherwise")
    assert result.returncode == 3, result.stderr[-3000:]
    found = annotations(result.stdout)
    assert [(kind, props["title"]) for kind, props, _ in found] == [
        ("notice", "//t:fails_otherwise: loads, failed otherwise")]
    message = found[0][2]
    assert "/xsdk/lib to its LD_LIBRARY_PATH, and it loads now" in message
    assert "It failed for another reason" in message
    assert "repaired" not in result.stdout


def test_a_test_that_loads_a_leftover_is_named_under_quiet(ws: Workspace) -> None:
    result = ws.ldfix("test", "--quiet", "--github", "//t:left")
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if line.startswith("bazel-ldfix:")]
    assert said[0] == ("bazel-ldfix: warning: //t:left loads libydemo.so.5 from a file no "
                       "rule declares for it now:")
    assert said[1].endswith("/_solib_k8/_U@ysdk_S_S_Cydemo___Ulib/libydemo.so.5")
    [(kind, props, message)] = annotations(result.stdout)
    assert kind == "warning" and props["title"] == "//t:left: loads a leftover"
    assert message.startswith("//t:left loads libydemo.so.5 from ")
    # `env --quiet` says it too: `test --quiet` says no more than it.
    env = ws.ldfix("env", "--quiet", "//t:left")
    assert env.returncode == 0, env.stderr[-3000:]
    assert [line for line in env.stderr.splitlines() if line.startswith("bazel-ldfix:")] == said

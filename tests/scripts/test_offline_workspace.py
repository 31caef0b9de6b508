"""scripts/offline-workspace.sh: a workspace of the user's own, not written for the tests,
works offline on Debian's Bazel 4.2.3 once the script has run, and the user's files keep
every byte they had."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, DEBIAN_RULES, Workspace, clean_env, sdk

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "offline-workspace.sh"
BEGIN = "# >>> bazel-ldfix offline-workspace: Bazel 4 offline, see .bazel-offline/README >>>"
END = "# <<< bazel-ldfix offline-workspace <<<"

pytestmark = [pytest.mark.newcomer,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH"),
              pytest.mark.skipif(not all((p / "WORKSPACE").is_file()
                                         for p in DEBIAN_RULES.values()),
                                 reason="Debian's bazel rules packages are not installed")]

APP_TEST = "int vend_value(void);\nint main(void) { return vend_value() == 3 ? 0 : 1; }\n"


def users_workspace(root: Path) -> dict[str, bytes]:
    """A workspace as a user writes it: a cc_test, loaded from @rules_cc, that links a
    cc_import of the unversioned file of a vendored libvend.so.3; rc and ignore files of
    their own (the last line of each with no newline). Its files' bytes, by name."""
    sdk(root / "third_party" / "vend", "vend", "3")
    output_base = root.parent / (root.name + "-output-base")
    files = {
        "WORKSPACE": 'workspace(name = "mine")\n',
        ".bazelrc": f"startup --output_base={output_base}\nstartup --max_idle_secs=300\n"
                    "test --test_output=errors",
        ".bazelignore": "node_modules",
        "third_party/vend/BUILD": 'package(default_visibility = ["//visibility:public"])\n'
                                  'cc_import(name = "vend", shared_library = "lib/libvend.so")\n',
        "app/BUILD": 'load("@rules_cc//cc:defs.bzl", "cc_test")\n'
                     'cc_test(name = "app_test", srcs = ["app_test.c"], '
                     'deps = ["//third_party/vend"])\n',
        "app/app_test.c": APP_TEST,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {name: text.encode() for name, text in files.items()}


def offline(directory: Path, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(directory)], capture_output=True,
                          text=True, env=env or clean_env(), cwd=directory.parent)


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under ``root``: its bytes, or where a symbolic link points."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(root))] = os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workspace, dict[str, bytes]]]:
    root = tmp_path_factory.mktemp("own") / "ws"
    root.mkdir()
    given = users_workspace(root)
    workspace = Workspace(root, root.parent / "ws-output-base", clean_env())
    yield workspace, given
    workspace.shutdown()


@pytest.mark.bazel
def test_after_the_script_bazel_4_builds_the_users_workspace_offline_and_ldfix_repairs_it(
        ws: tuple[Workspace, dict[str, bytes]]) -> None:
    workspace, given = ws
    before = workspace.bazel("test", "//...")
    assert before.returncode != 0
    assert "no such package '@rules_cc//cc'" in before.stderr     # it cannot download it
    result = offline(workspace.root)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    root = workspace.root
    assert result.stdout.splitlines() == [
        f"offline-workspace: wrote {root}/.bazel-offline/",
        f"offline-workspace: added a block to {root}/.bazelrc",
        f"offline-workspace: added a block to {root}/.bazelignore"]
    # The user's lines, every byte, then the block on lines of its own.
    rc = (root / ".bazelrc").read_text()
    assert rc == (given[".bazelrc"].decode() + "\n" + BEGIN + "\n"
                  "try-import %workspace%/.bazel-offline/offline.bazelrc\n" + END + "\n")
    assert (root / ".bazelignore").read_text() == (
        "node_modules\n" + BEGIN + "\n.bazel-offline\n" + END + "\n")
    assert (root / "WORKSPACE").read_bytes() == given["WORKSPACE"]
    # Nothing points into this checkout: the stand-ins are the workspace's own copies.
    overrides = (root / ".bazel-offline" / "offline.bazelrc").read_text()
    assert str(REPO) not in overrides
    assert f"rules_cc={root}/.bazel-offline/rules_cc" in overrides
    # Bazel builds the test offline; it then fails in the loader, as the SDK's import
    # makes it, and bazel-ldfix lets it load.
    plain = workspace.bazel("test", "//...")
    assert plain.returncode == 3, plain.stderr[-3000:]
    assert "libvend.so.3: cannot open shared object file" in plain.stdout + plain.stderr
    repaired = workspace.ldfix("test", "//...")
    assert repaired.returncode == 0, repaired.stderr[-3000:]
    assert "//app:app_test" in repaired.stdout + repaired.stderr
    # `//...` is the user's packages alone: the stand-ins are ignored.
    query = workspace.bazel("query", "//...")
    assert query.stdout.split() == ["//app:app_test", "//third_party/vend:vend"]


@pytest.mark.bazel
def test_run_again_it_changes_nothing_and_brings_its_own_directory_up_to_date(
        ws: tuple[Workspace, dict[str, bytes]]) -> None:
    workspace, _ = ws
    root = workspace.root
    first = offline(root)
    assert first.returncode == 0, first.stderr
    done = snapshot(root)
    again = offline(root)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"offline-workspace: {root} is set up already; nothing changed\n"
    assert snapshot(root) == done
    # A file of its own directory changed (the workspace moved, an older script wrote
    # it): written anew; the blocks are not added twice.
    (root / ".bazel-offline" / "offline.bazelrc").write_text("build --stale\n")
    fresh = offline(root)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout == f"offline-workspace: wrote {root}/.bazel-offline/\n"
    assert snapshot(root) == done


def refusal_cases(top: Path) -> dict[str, tuple[Path, str, dict[str, str]]]:
    """Workspaces the script must not touch: each one's directory, the words of its line,
    and the environment (BAZEL) it is run with."""
    env = clean_env()
    cases: dict[str, tuple[Path, str, dict[str, str]]] = {}

    def workspace(name: str) -> Path:
        root = top / name
        root.mkdir()
        (root / "WORKSPACE").write_text("")
        return root

    shared = top / "shared.bazelrc"
    shared.write_text("build --jobs=2\n")
    linked = workspace("linked")
    (linked / ".bazelrc").symlink_to(shared)
    cases["linked"] = (linked, f"{linked}/.bazelrc is a symbolic link", env)
    damaged = workspace("damaged")
    (damaged / ".bazelignore").write_text(f"{BEGIN}\n.bazel-offline\n")
    cases["damaged"] = (damaged, f"{damaged}/.bazelignore has a damaged", env)
    foreign = workspace("foreign")
    (foreign / ".bazel-offline").mkdir()
    (foreign / ".bazel-offline" / "notes.txt").write_text("mine\n")
    cases["foreign"] = (foreign, f"{foreign}/.bazel-offline exists and was not written", env)
    blank = workspace("my ws")
    cases["blank"] = (blank, f"{blank} holds a blank, a quote or a backslash", env)
    bare = top / "bare"
    bare.mkdir()
    cases["bare"] = (bare, f"{bare} is not a Bazel workspace", env)
    newer = workspace("newer")
    bazel7 = top / "bazel7"
    bazel7.write_text("#!/bin/sh\necho 'bazel 7.1.0'\n")
    bazel7.chmod(0o755)
    cases["newer"] = (newer, "'bazel 7.1.0' is not Bazel 4", {**env, "BAZEL": str(bazel7)})
    return cases


@pytest.mark.parametrize("case", ["linked", "damaged", "foreign", "blank", "bare",
                                  "newer"])
def test_what_it_cannot_do_safely_is_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path, case: str) -> None:
    directory, words, env = refusal_cases(tmp_path)[case]
    before = snapshot(tmp_path)
    result = offline(directory, env)
    assert result.returncode == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"offline-workspace: {words}"), line
    assert line.endswith("; nothing written")
    assert snapshot(tmp_path) == before

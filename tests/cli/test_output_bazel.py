"""Output a person reads quickly, from the real commands on a real workspace (Bazel 4.2.3)."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import terminal
from bazelws import BAZEL, LDFIX, Workspace
from newcomer_ws import newcomer_workspace

pytestmark = [pytest.mark.newcomer, pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]

TESTS = ("//app:vendor_test", "//app:ext_test")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    workspace = newcomer_workspace(tmp_path_factory.mktemp("output"))
    yield workspace
    workspace.shutdown()


@pytest.fixture(scope="module")
def failed(ws: Workspace) -> str:
    """The output_base, after a plain `bazel test` that fails in the loader."""
    run = ws.bazel("test", *TESTS)
    assert run.returncode == 3, run.stderr
    return ws.bazel("info", "output_base").stdout.strip()


def on_terminal(ws: Workspace, *args: str, env: dict[str, str] | None = None) -> str:
    """What a command prints on a terminal (stdout and stderr both on a pty)."""
    return terminal.on_terminal(list(args), cwd=ws.root, env={**ws.env, **(env or {})})[1]


def test_diagnose_fits_a_screen_with_the_command_to_run_first(
        ws: Workspace, failed: str) -> None:
    result = ws.ldfix("diagnose")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 12, result.stdout
    # What to run comes first; then the output_base, once; nothing else spells it out.
    assert lines[0] == f"run first: {LDFIX} test //app:ext_test //app:vendor_test"
    assert lines[1] == f"$OUTPUT_BASE is {failed}"
    assert result.stdout.count(failed) == 1
    # One line per missing library, under the cc_import that causes it.
    rows = [line.split() for line in lines if line.startswith("    ")]
    assert [row[0] for row in rows] == ["libvendor.so.3", "libvendor_core.so.3"]
    first = lines.index("  @vendor//:vendor imports lib/libvendor.so, not the file named "
                        "like its SONAME:")
    assert lines[first + 1].split()[0] == "libvendor.so.3"
    assert lines[first + 1].endswith("  for //app:ext_test, //app:vendor_test")
    second = lines.index("  @vendor//:vendor_core is not a dependency of the tests that "
                         "need it:")
    assert lines[second + 1].split()[0] == "libvendor_core.so.3"
    assert lines[second + 1].endswith("  next for //app:ext_test, //app:vendor_test")
    assert "$OUTPUT_BASE/external/vendor/lib" in lines[first + 1]
    # The rest is one option away.
    # `fix` edits the cc_import of the unversioned file; the dependency to add is -v's.
    assert lines[-2] == (f"for good: `{LDFIX} fix //app:ext_test //app:vendor_test` shows "
                         "the BUILD change, --write makes it")
    assert lines[-1] == (f"details: `{LDFIX} diagnose -v` (with the changes to make by "
                         "hand); for scripts: --json")
    verbose = ws.ldfix("diagnose", "-v").stdout
    assert "BUILD fix" in verbose and "BUILD fix" not in result.stdout
    assert len(verbose.splitlines()) > 3 * len(lines)


def test_the_command_diagnose_says_to_run_first_makes_the_tests_pass(
        ws: Workspace, failed: str) -> None:
    command = ws.ldfix("diagnose").stdout.splitlines()[0].removeprefix("run first: ")
    assert shlex.split(command)[:4] == [*shlex.split(LDFIX), "test"]   # as it was run
    # Pasted into a shell where the user is.
    result = subprocess.run(["bash", "-c", command], cwd=ws.root, env=ws.env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    for label in TESTS:
        assert re.search(rf"^{re.escape(label)}\s+PASSED", result.stdout, re.M), result.stdout
    assert ws.bazel("test", *TESTS).returncode == 3      # the plain run fails again


def test_diagnose_v_writes_the_output_base_once_and_one_fix_for_one_directory(
        ws: Workspace, failed: str) -> None:
    result = ws.ldfix("diagnose", "-v")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"$OUTPUT_BASE is {failed}"
    pasted = [line for line in lines if line.lstrip().startswith(
        ("now:", "or add", "test --test_env", ".bazelrc:"))]
    # Only the lines meant to be pasted repeat the real path.
    assert [line for line in lines[1:] if failed in line and line not in pasted] == []
    assert "$OUTPUT_BASE/external/vendor/lib/libvendor.so.3" in result.stdout
    # Both tests miss libraries of one directory: one fix names both.
    now = [line for line in lines if line.startswith("fix ")]
    assert now == ["fix A, for //app:ext_test, //app:vendor_test: now, or on this machine"]
    assert f"  now:        {LDFIX} test //app:ext_test //app:vendor_test" in lines
    assert result.stdout.count("test --test_env=LD_LIBRARY_PATH=") == 1
    # The cc_import change both tests need is printed once, for both.
    assert result.stdout.count('shared_library = "lib/libvendor.so.3",  # was') == 1
    # No LD_LIBRARY_PATH in the shell: no note about replacing it.
    assert not [line for line in lines if line.startswith("note:")]


def test_the_shells_ld_library_path_brings_the_note_that_applies(
        ws: Workspace, failed: str, tmp_path: Path) -> None:
    result = ws.ldfix("diagnose", "-v", env={"LD_LIBRARY_PATH": str(tmp_path)})
    assert result.returncode == 1
    notes = [line for line in result.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"LD_LIBRARY_PATH={tmp_path}" in notes[0]


def test_colour_follows_one_rule_in_every_command(ws: Workspace, failed: str) -> None:
    exe = str(ws.root / "bazel-bin" / "app" / "vendor_test")
    for args in (["diagnose"], ["resolve", exe]):
        assert "\x1b[" in on_terminal(ws, *args), args
        assert "\x1b[" not in on_terminal(ws, *args, env={"NO_COLOR": "1"}), args
        piped = ws.ldfix(*args)
        assert "\x1b[" not in piped.stdout + piped.stderr, args


def test_test_prints_each_thing_once_and_one_summary_after_bazels(
        ws: Workspace, failed: str) -> None:
    plain = ws.bazel("test", "//app:broken_test")
    result = ws.ldfix("test", *TESTS)
    assert result.returncode == 0, result.stderr
    both = result.stdout + result.stderr
    # Bazel's own "Build completed" lines, as many as one plain `bazel test` prints: the
    # build step's are not shown.
    completed = len(re.findall(r"INFO: Build completed", both))
    assert completed == len(re.findall(r"INFO: Build (completed|did NOT)",
                                       plain.stdout + plain.stderr))
    # A local repository is a symlink to the SDK: that "copy" is not news.
    assert "the same file as" not in both
    ours = [line for line in result.stderr.splitlines() if line.startswith("bazel-ldfix:")]
    assert ours[0] == f"bazel-ldfix: $OUTPUT_BASE is {failed}"
    assert sum(failed in line for line in ours) == 1
    # The direct dependency is named before the one it needs.
    assert "bazel-ldfix: //app:ext_test cannot load libvendor.so.3, libvendor_core.so.3" in ours
    lines = result.stderr.rstrip().splitlines()
    at = max(i for i, line in enumerate(lines) if line.startswith("bazel-ldfix: 2 tests "))
    assert re.match(r"bazel-ldfix: 2 tests repaired \(libvendor\S*(, libvendor\S*)*\); to "
                    r"make it permanent:$", lines[at]), lines[at]
    said = " ".join(line.removeprefix("bazel-ldfix:").strip() for line in lines[at + 1:])
    env = f"`{LDFIX} env --format bazelrc //app:vendor_test //app:ext_test >> user.bazelrc`"
    fix = f"`{LDFIX} fix //app:vendor_test //app:ext_test`"
    assert said == (f"on this machine only: {env} (a file not committed; .bazelrc reads it "
                    "with the line `try-import %workspace%/user.bazelrc`) on every "
                    f"machine: the BUILD change {fix} shows (--write makes it)")
    # Each command whole on a line, after Bazel's summary: the last lines of all.
    assert all(line.startswith("bazel-ldfix:   ") for line in lines[at + 1:])
    assert any(env in line for line in lines) and any(fix in line for line in lines)
    # Every line of its own fits, but for one word kept whole (a path, a flag, a command).
    word = re.compile(r"(?:[^\s`]|`[^`]*`)+")
    assert [line for line in ours if len(line) > 100
            and len(word.findall(line.removeprefix("bazel-ldfix:"))) > 1] == []


def test_the_advice_for_this_machine_alone_works_as_printed(ws: Workspace, failed: str) -> None:
    # `diagnose -v` of a plain run says the lines; `test` what to run and which line
    # .bazelrc needs.
    assert ws.bazel("test", *TESTS).returncode == 3
    verbose = ws.ldfix("diagnose", "-v").stdout.splitlines()
    said = " ".join(line.removeprefix("bazel-ldfix:").strip()
                    for line in ws.ldfix("test", *TESTS).stderr.splitlines()
                    if line.startswith("bazel-ldfix:   "))
    command, try_import = re.findall(r"`([^`]*)`", said)[:2]
    assert command.endswith(" >> user.bazelrc") and try_import.startswith("try-import ")
    at = verbose.index("  user.bazelrc, this machine only (do not commit it):")
    assert verbose[at - 1] == f"  .bazelrc:   {try_import}"
    rc_lines = [line.strip() for line in verbose[at + 1:at + 3]]
    assert rc_lines[0].startswith("# ") and rc_lines[1].startswith("test --test_env=")
    committed = (ws.root / ".bazelrc").read_text()
    user = ws.root / "user.bazelrc"
    try:
        # Applied as printed: the command in a shell where the user is, the line appended.
        (ws.root / ".bazelrc").write_text(committed + try_import + "\n")
        subprocess.run(["bash", "-c", command], cwd=ws.root, env=ws.env, check=True,
                       capture_output=True)
        assert user.read_text().startswith("test --test_env=LD_LIBRARY_PATH=")
        # Plain `bazel test` reads it: the tests load.
        run = ws.bazel("test", *TESTS)
        assert run.returncode == 0, run.stderr[-3000:]
        # diagnose -v's lines in the file instead: the same.
        user.write_text("\n".join(rc_lines) + "\n")
        run = ws.bazel("test", *TESTS)
        assert run.returncode == 0, run.stderr[-3000:]
        # A checkout without the file: no error of Bazel's, the tests fail in the loader.
        user.unlink()
        assert ws.bazel("test", *TESTS).returncode == 3
    finally:
        (ws.root / ".bazelrc").write_text(committed)
        user.unlink(missing_ok=True)


def test_diagnose_after_fix_check_says_which_run_it_explains(ws: Workspace, failed: str) -> None:
    assert ws.bazel("test", *TESTS).returncode == 3
    assert ws.ldfix("fix", "--check", *TESTS).returncode == 1    # a change is needed
    # fix's own Bazel commands ran no test: the tests' latest runs are explained, and why.
    result = ws.ldfix("diagnose")
    assert result.returncode == 1, result.stderr
    said = result.stdout.splitlines()[2]
    assert said.startswith("2 failed tests were stopped by the dynamic loader, from the "
                           "latest run of each test in $OUTPUT_BASE/"), said
    # (Another test of the module may have failed otherwise: said after the parenthesis.)
    assert ("/testlogs (the last Bazel command was run by `bazel-ldfix fix` and ran no "
            "test)") in said, said
    # Another command of the user's: no longer the tool's.
    assert ws.bazel("info", "release").returncode == 0
    said = ws.ldfix("diagnose").stdout.splitlines()[2]
    assert "/testlogs (the last Bazel command ran no test)" in said, said
    # The repaired run of `test` is a `bazel test`: diagnose explains it, and it passed.
    assert ws.ldfix("test", *TESTS).returncode == 0
    after = ws.ldfix("diagnose")
    assert after.returncode == 0
    assert after.stdout == ("nothing to diagnose: no failed test in the last `bazel test` "
                            f"({failed}/command.log)\n")


def test_on_github_one_notice_per_repaired_test_and_none_for_another_failure(
        ws: Workspace, failed: str) -> None:
    result = ws.ldfix("test", *TESTS, "//app:broken_test", env={"GITHUB_ACTIONS": "true"})
    assert result.returncode == 3, result.stderr[-3000:]   # broken_test fails, not loading
    commands = [line for line in result.stdout.splitlines() if line.startswith("::")]
    notices = sorted(line for line in commands if line.startswith("::notice "))
    assert len(notices) == len(commands) == 2, commands
    for notice, label, line in zip(notices, sorted(TESTS), ("4", "2"), strict=True):
        title = label.replace(":", "%3A")
        assert notice.startswith(f"::notice title={title}%3A repaired,file=app/BUILD,"
                                 f"line={line}::{label} could not load "), notice
        assert f"added {failed}/external/vendor/lib to its LD_LIBRARY_PATH" in notice
    quiet = ws.ldfix("test", "--no-github", *TESTS, env={"GITHUB_ACTIONS": "true"})
    assert not [line for line in quiet.stdout.splitlines() if line.startswith("::")]


def test_resolve_says_the_unversioned_file_has_the_versioned_soname_and_folds_the_system(
        ws: Workspace, failed: str) -> None:
    exe = str(ws.root / "bazel-bin" / "app" / "vendor_test")
    result = ws.ldfix("resolve", exe)
    assert result.returncode == 1
    solib = re.search(r"┊ (\S+) holds libvendor\.so, whose SONAME is libvendor\.so\.3; "
                      r"no file there is named libvendor\.so\.3$", result.stdout, re.M)
    assert solib is not None, result.stdout
    assert "/_solib_" in solib.group(1)
    assert (Path(solib.group(1)) / "libvendor.so").is_file()
    assert (f"┊ the versioned file is at {failed}/external/vendor/lib/libvendor.so.3"
            in result.stdout)
    # System libraries are folded into one line; -v shows them, each where it is found.
    assert "libc.so.6 [" not in result.stdout
    folded = [line for line in result.stdout.splitlines() if "system librar" in line]
    assert len(folded) == 1 and "libc.so.6" in folded[0] and "-v shows them" in folded[0]
    verbose = ws.ldfix("resolve", "-v", exe)
    assert re.search(r"libc\.so\.6 \[(ld\.so\.cache|default)\] /", verbose.stdout)
    assert "system librar" not in verbose.stdout

"""The repair's summary on stderr: tests that miss the same names share a line once there
are many of them, and nothing else of the summary moves."""

from __future__ import annotations

import re
import shlex

from bazel_ldfix.bazel.declaredinputs import Leftover
from bazel_ldfix.given import Given
from bazel_ldfix.render.common import LINE_WIDTH
from bazel_ldfix.render.repair import (
    NAMED,
    SHELL_CAVEAT,
    caveat_lines,
    leftover_warnings,
    repair_summary,
    repaired_line,
)
from bazel_ldfix.repair.results import Missing, Repair, TestResult

BASE = "/ob"


def _repair(tests: list[TestResult], *, added: bool = True) -> Repair:
    names = dict.fromkeys(n for t in tests for n in (*t.missing_before, *t.missing_after))
    missing = tuple(Missing(n, ("/x/test",), f"{BASE}/external/r/lib" if added else None, ())
                    for n in names)
    return Repair(BASE, "", tuple(tests), missing,
                  Given((), (f"{BASE}/external/r/lib",) if added else ()))


def _test(label: str, before: tuple[str, ...], after: tuple[str, ...] = (),
          error: str | None = None) -> TestResult:
    return TestResult(label, f"/x/{label}", before, after, error)


def _lines(repair: Repair) -> list[str]:
    return [line.removeprefix("bazel-ldfix: ") for line in repair_summary(repair).splitlines()]


def test_a_few_tests_that_miss_the_same_names_each_get_their_line() -> None:
    tests = [_test(f"//t:x{i}", ("liba.so.1",)) for i in range(NAMED)]
    lines = _lines(_repair(tests))
    assert [line for line in lines if "cannot load" in line] == [
        f"//t:x{i} cannot load liba.so.1" for i in range(NAMED)]


def test_many_tests_that_miss_the_same_names_share_one_line_where_the_first_was() -> None:
    tests = [_test("//a:first", ("libb.so.2",))]
    tests += [_test(f"//t:x{i}", ("liba.so.1", "libc.so.3")) for i in range(1000)]
    tests.append(_test("//z:last", ("libb.so.2",), error="the loader stops here"))
    lines = _lines(_repair(tests))
    said = [line for line in lines if "cannot load" in line or "loader stops" in line]
    assert said == [
        "//a:first cannot load libb.so.2",
        "1000 tests cannot load liba.so.1, libc.so.3: //t:x0, //t:x1, //t:x2 and 997 more",
        "//z:last cannot load libb.so.2",
        "//z:last: the loader stops: the loader stops here",
    ]


def test_what_many_tests_will_still_miss_is_one_line_too() -> None:
    tests = [_test(f"//t:x{i}", ("liba.so.1", "libgone.so.9"), ("libgone.so.9",))
             for i in range(NAMED + 1)]
    lines = _lines(_repair(tests))
    assert f"{NAMED + 1} tests will still miss libgone.so.9: //t:x0, //t:x1, //t:x2 and 1 more" \
        in lines
    assert not any(line.startswith("//t:x") for line in lines)


def test_nothing_will_still_miss_when_nothing_is_added() -> None:
    tests = [_test(f"//t:x{i}", ("libgone.so.9",), ("libgone.so.9",)) for i in range(5)]
    lines = _lines(_repair(tests, added=False))
    assert not any("will still miss" in line for line in lines)
    assert "5 tests cannot load libgone.so.9: //t:x0, //t:x1, //t:x2 and 2 more" in lines


def test_tests_that_miss_the_same_names_in_another_order_are_one_group() -> None:
    tests = [_test(f"//t:a{i}", ("liba.so.1", "libb.so.2")) for i in range(3)]
    tests += [_test(f"//t:b{i}", ("libb.so.2", "liba.so.1")) for i in range(3)]
    lines = [line for line in _lines(_repair(tests)) if "cannot load" in line]
    assert lines == ["6 tests cannot load liba.so.1, libb.so.2: //t:a0, //t:a1, //t:a2 and 3 more"]


LONG_BASE = "/root/.cache/bazel/_bazel_root/4ca518f6a8930332e076c58b6d48ed43"
PROG = "/home/user/src/bazel-ldfix/.venv/bin/bazel-ldfix"


def too_long(text: str) -> list[str]:
    """The lines longer than LINE_WIDTH that are more than one word: a path, a flag or a
    command in backticks stays whole."""
    word = re.compile(r"(?:[^\s`]|`[^`]*`)+")
    return [line for line in text.splitlines() if len(line) > LINE_WIDTH
            and len(word.findall(line.removeprefix("bazel-ldfix:"))) > 1]


def test_a_leftover_warning_is_wrapped_and_says_its_path_under_the_output_base_once() -> None:
    left = Leftover("libldemo.so.4", f"{LONG_BASE}/execroot/ws/bazel-out/k8-fastbuild/bin/"
                                     "_solib_k8/_U@lsdk_S_S_Cldemo___Ulib/libldemo.so.4")
    # Alone, the path is the one that names the output_base: written as it is.
    alone = Repair(LONG_BASE, "", (_test("//l:needs_l", ()),), (), Given())
    assert f"bazel-ldfix:   {left.path}" in repair_summary(alone, PROG, [("//l:needs_l", (left,))])
    # Beside a repair whose lines name it too, written once, then $OUTPUT_BASE.
    found = f"{LONG_BASE}/external/demo_tensorrt/lib"
    repair = Repair(LONG_BASE, "", (_test("//t:infer_test", ("libdemoinfer.so.11",)),
                                    _test("//l:needs_l", ())),
                    (Missing("libdemoinfer.so.11", ("/x/test",), found, ()),),
                    Given((), (found,)))
    text = repair_summary(repair, PROG, [("//l:needs_l", (left,))])
    lines = text.splitlines()
    assert lines[0] == f"bazel-ldfix: $OUTPUT_BASE is {LONG_BASE}"
    assert text.count(LONG_BASE) == 1
    start = lines.index("bazel-ldfix: warning: //l:needs_l loads libldemo.so.4 from a file no "
                        "rule declares for it now:")
    assert lines[start + 1] == ("bazel-ldfix:   $OUTPUT_BASE/execroot/ws/bazel-out/k8-fastbuild/"
                                "bin/_solib_k8/_U@lsdk_S_S_Cldemo___Ulib/libldemo.so.4")
    said = " ".join(line.removeprefix("bazel-ldfix:").strip() for line in lines[start + 2:])
    assert said == ("an earlier build left it in bazel-out: the test passes here by accident, "
                    "and fails under remote execution and after `bazel clean`; "
                    f"`{PROG} fix` makes the BUILD change")
    assert too_long(text) == []
    # Alone, under --quiet: the same warning, every line the tool's.
    quiet = leftover_warnings([("//l:needs_l", (left,))], PROG).splitlines()
    assert quiet[0] == lines[start]
    assert quiet[1] == f"bazel-ldfix:   {left.path}"
    assert quiet[2:] == lines[start + 2:start + len(quiet)]


def test_the_lines_after_a_repaired_run_fit_and_give_each_command_whole() -> None:
    tests = [_test(f"//app/very/deep/package:test_{i}", ("libdemoinfer.so.11",))
             for i in range(12)]
    args = [t.label for t in tests]
    text = repaired_line(_repair(tests), args, 0, prog=PROG)
    assert text is not None
    assert too_long(text) == []
    commands = re.findall(r"`([^`]*)`", text)
    assert commands == [f"{PROG} env --format bazelrc {' '.join(args)} >> user.bazelrc",
                        "try-import %workspace%/user.bazelrc",
                        f"{PROG} fix {' '.join(args)}"]
    # Each command whole on one line, as a shell reads it back.
    for command in commands[::2]:
        assert any(command in line for line in text.splitlines())
        assert shlex.split(command)[0] == PROG


def test_a_caveat_is_wrapped_to_lines_that_fit() -> None:
    text = caveat_lines(SHELL_CAVEAT)
    assert len(text.splitlines()) > 1 and too_long(text) == []
    assert " ".join(line.removeprefix("bazel-ldfix:").strip()
                    for line in text.splitlines()) == SHELL_CAVEAT

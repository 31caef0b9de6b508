"""The repair's summary on stderr: tests that miss the same names share a line once there
are many of them, and nothing else of the summary moves."""

from __future__ import annotations

from bazel_ldfix.bazel.given import Given
from bazel_ldfix.render.repair import NAMED, repair_summary
from bazel_ldfix.repair.results import Missing, Repair, TestResult

BASE = "/ob"


def _repair(tests: list[TestResult], *, added: bool = True) -> Repair:
    names = dict.fromkeys(n for t in tests for n in (*t.missing_before, *t.missing_after))
    missing = tuple(Missing(n, ("/x/test",), f"{BASE}/external/r/lib" if added else None, ())
                    for n in names)
    return Repair(BASE, (), "", tuple(tests), missing, (),
                  Given(f"{BASE}/external/r/lib") if added else None)


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

"""The exit code of one command whose tests ran as several ``bazel test`` runs."""

from __future__ import annotations

import pytest

from bazel_ldfix.bazel.exitcodes import (
    BUILD_FAILURE,
    INTERRUPTED,
    NO_TESTS_FOUND,
    SUCCESS,
    TESTS_FAILED,
    worst,
)


@pytest.mark.parametrize(("codes", "merged"), [
    ([SUCCESS, SUCCESS], SUCCESS),
    ([SUCCESS, TESTS_FAILED], TESTS_FAILED),
    ([TESTS_FAILED, BUILD_FAILURE], BUILD_FAILURE),
    ([BUILD_FAILURE, INTERRUPTED], INTERRUPTED),      # an interruption is worse than a failure
    ([INTERRUPTED, 37], 37),                          # among the unknown, the larger code
    ([SUCCESS], SUCCESS),
])
def test_the_most_severe_run_decides(codes: list[int], merged: int) -> None:
    assert worst(codes) == merged
    assert worst(list(reversed(codes))) == merged


def test_a_run_that_found_no_test_says_nothing_of_the_others() -> None:
    assert worst([NO_TESTS_FOUND, SUCCESS]) == SUCCESS
    assert worst([TESTS_FAILED, NO_TESTS_FOUND]) == TESTS_FAILED


def test_no_test_found_only_when_no_run_found_one() -> None:
    assert worst([NO_TESTS_FOUND, NO_TESTS_FOUND]) == NO_TESTS_FOUND

"""Which LD_LIBRARY_PATH a test gets from Bazel, as measured on Bazel 4.2.3."""

from __future__ import annotations

from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.options import without
from bazel_ldfix.bazel.testenv import environment_of
from bazel_ldfix.bazel.version import BazelVersion

LABELS = ["//p:plain", "//p:attr"]
RULES = {"//p:attr": {"LD_LIBRARY_PATH": "/from/attr"}}


def env(options: list[Option], client: dict[str, str]):  # type: ignore[no-untyped-def]
    return environment_of(options, client, RULES, LABELS, BazelVersion("4.2.3"))


def test_without_anything_only_the_rule_attribute_applies() -> None:
    result = env([], {})
    assert dict(result.current) == {"//p:plain": None, "//p:attr": "/from/attr"}
    # A flag would replace the attribute: the test's own base keeps it, no other test's.
    assert result.base == () and result.base_of("//p:plain") == ()
    assert result.base_of("//p:attr") == ("/from/attr",)


def test_the_last_test_env_value_replaces_the_rule_attribute() -> None:
    opts = [Option("test_env", "LD_LIBRARY_PATH=/old"), Option("test_env", "LD_LIBRARY_PATH=/f")]
    result = env(opts, {"LD_LIBRARY_PATH": "/client"})
    assert dict(result.current) == {"//p:plain": "/f", "//p:attr": "/f"}
    # The last flag replaced the attribute already: every test keeps that value.
    assert result.base == ("/f",) and result.base_of("//p:attr") == ("/f",)


def test_the_clients_value_reaches_tests_when_strict_action_env_is_off() -> None:
    result = env([], {"LD_LIBRARY_PATH": "/client"})
    assert dict(result.current) == {"//p:plain": "/client", "//p:attr": "/client"}
    strict = env([Option("incompatible_strict_action_env", "1")], {"LD_LIBRARY_PATH": "/c"})
    assert dict(strict.current) == {"//p:plain": None, "//p:attr": "/from/attr"}


def test_a_bare_test_env_passes_the_clients_value_even_when_strict() -> None:
    opts = [Option("incompatible_strict_action_env", "1"), Option("test_env", "LD_LIBRARY_PATH")]
    assert dict(env(opts, {"LD_LIBRARY_PATH": "/c"}).current)["//p:plain"] == "/c"
    assert dict(env(opts, {}).current) == {"//p:plain": None, "//p:attr": "/from/attr"}


def test_strict_action_env_is_the_default_from_bazel_9() -> None:
    result = environment_of([], {"LD_LIBRARY_PATH": "/c"}, {}, ["//p:t"], BazelVersion("9.0.0"))
    assert dict(result.current) == {"//p:t": None}


def test_the_users_test_filters_decide_which_tests_are_examined() -> None:
    from bazel_ldfix.bazel.options import NO_TEST_TAG
    from bazel_ldfix.bazel.options import selected as selected_tests
    from bazel_ldfix.bazel.queryxml import RuleInfo
    from bazel_ldfix.bazel.targets import TestTarget

    tests = [TestTarget("//p:gpu", "/x/gpu", "small"),
             TestTarget("//p:cpu", "/x/cpu", "large"),
             TestTarget("//p:plain", "/x/plain", "small")]
    rules = {"//p:gpu": RuleInfo({}, ("gpu", "cuda")),
             "//p:cpu": RuleInfo({}, ("cpu",)),
             "//p:plain": RuleInfo({}, ())}

    def labels(*words: str) -> list[str]:
        ours = f"--test_tag_filters={NO_TEST_TAG}"  # the build step's, always last
        return [t.label for t in selected_tests(tests, rules, [*words, ours])]

    assert labels() == ["//p:gpu", "//p:cpu", "//p:plain"]
    assert labels("--test_tag_filters=-gpu") == ["//p:cpu", "//p:plain"]
    assert labels("--test_tag_filters", "cpu,cuda") == ["//p:gpu", "//p:cpu"]
    assert labels("--test_tag_filters=gpu", "--test_tag_filters=") == [
        "//p:gpu", "//p:cpu", "//p:plain"]
    assert labels("--test_size_filters=-LARGE") == ["//p:gpu", "//p:plain"]


def test_the_build_steps_own_options_are_left_out_of_the_users() -> None:
    ours = "--test_env=LD_LIBRARY_PATH=/remembered"
    given = [Option("test_env", "LD_LIBRARY_PATH=/user"), Option("test_output", "errors"),
             Option("test_env", "LD_LIBRARY_PATH=/remembered")]
    kept = without(given, [ours])
    assert kept == tuple(given[:2])
    # The user may give the very same value: only the last (ours) goes.
    same = [Option("test_env", "LD_LIBRARY_PATH=/remembered")] * 2
    assert without(same, [ours]) == (same[0],)

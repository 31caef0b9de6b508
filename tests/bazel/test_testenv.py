"""The test environment by Bazel version, on recorded input.

The options are what the canonical command line of a Bazel 7/8/9 build event stream
carries (``structuredCommandLine``, ``optionName``/``optionValue``); the order they are
applied in is read from bazelbuild/bazel
``src/main/java/com/google/devtools/build/lib/exec/TestPolicy.java``,
``computeTestEnvironment``: "Overwrite with the environment common to all actions, see
--action_env", then "... common to all tests, see --test_env", then "Rule-specified test env"
(``getExtraTestEnv``) since 7.2.0 (PR #22473, the cherry-pick of #22420, "Make env on test
rules override --test_env"). Before 7.2 the rule's env came first; that order, and
``--action_env`` reaching tests, are measured on a real Bazel 4.2.3 in
test_bazel_testenv.py. The programs are real ELF files and the loader model decides what
they miss.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from elfbuild import cc

from bazel_ldfix.bazel import buildtext, testenv
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.queryxml import aligned, parse_rules
from bazel_ldfix.bazel.testenv import Order, Reach, TestEnvironment, environment_of
from bazel_ldfix.bazel.version import BazelVersion
from bazel_ldfix.loader.closure import host_of, interp_for
from bazel_ldfix.loader.search import Loader, Loaders
from bazel_ldfix.render.repair import repair_summary
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import Repair, TestInput
from bazel_ldfix.repair.setting import PlanContext

V = "LD_LIBRARY_PATH"
LABELS = ["//p:plain", "//p:attr"]
RULES = {"//p:attr": {V: "/from/attr"}}


@pytest.mark.parametrize(("version", "order"), [
    ("4.2.3", Order.FLAGS_WIN),
    ("7.1.2", Order.FLAGS_WIN),
    ("7.2.0", Order.RULE_WINS),
    ("7.2.0rc1", Order.RULE_WINS),      # the release candidates carry the change
    ("8.0.0", Order.RULE_WINS),
    ("9.0.0-pre.20250101.1", Order.RULE_WINS),
    ("no_version", Order.UNKNOWN),       # Debian's bazel-bootstrap
    ("development version", Order.UNKNOWN),
    ("", Order.UNKNOWN),
    (None, Order.UNKNOWN),
])
def test_the_order_follows_started_build_tool_version(version: str | None,
                                                      order: Order) -> None:
    assert testenv.order_of(BazelVersion(version)) is order


def env(options: list[Option], client: dict[str, str], version: str | None,
        inherit: dict[str, list[str]] | None = None) -> TestEnvironment:
    return environment_of(options, client, RULES, LABELS, BazelVersion(version),
                                   {k: tuple(v) for k, v in (inherit or {}).items()})


def test_since_7_2_the_rules_env_wins_over_test_env() -> None:
    opts = [Option("test_env", f"{V}=/flag")]
    new = env(opts, {}, "7.2.0")
    assert dict(new.current) == {"//p:plain": "/flag", "//p:attr": "/from/attr"}
    assert dict(new.reach) == {"//p:plain": Reach.YES, "//p:attr": Reach.NO}
    # The repair's flag replaces only the flag's value there: the rule's is not in the base.
    assert new.base == ("/flag",) and new.base_of("//p:plain") == ("/flag",)
    old = env(opts, {}, "7.1.2")
    assert dict(old.current) == {"//p:plain": "/flag", "//p:attr": "/flag"}
    assert set(old.reach.values()) == {Reach.YES}
    # Each test keeps the value it has: the flag's, which replaced the rule's already. No
    # test's base holds another test's rule value.
    assert old.base_of("//p:plain") == old.base_of("//p:attr") == ("/flag",)


def test_an_unknown_version_computes_the_older_order_and_marks_rule_tests_uncertain() -> None:
    result = env([Option("test_env", f"{V}=/flag")], {}, "no_version")
    assert dict(result.current) == {"//p:plain": "/flag", "//p:attr": "/flag"}
    assert dict(result.reach) == {"//p:plain": Reach.YES, "//p:attr": Reach.UNKNOWN}
    assert result.base_of("//p:attr") == ("/flag",)


# TestPolicy.java: --action_env is laid over the policy's variables for every test, in every
# version; --test_env over it.
@pytest.mark.parametrize("version", ["7.2.0", "8.1.0", "9.0.0"])
def test_action_env_reaches_tests(version: str) -> None:
    result = environment_of([Option("action_env", f"{V}=/from/action")], {},
                                     {}, ["//p:t"], BazelVersion(version))
    assert dict(result.current) == {"//p:t": "/from/action"}
    assert result.base == ("/from/action",)
    over = environment_of([Option("action_env", f"{V}=/a"),
                                    Option("test_env", f"{V}=/t")], {}, {}, ["//p:t"],
                          BazelVersion(version))
    assert dict(over.current) == {"//p:t": "/t"}


def test_action_env_keeps_the_shells_value_under_strict_action_env() -> None:
    # Bazel 9 turns --incompatible_strict_action_env on (PR #27670): the shell's value
    # reaches tests only through a bare --action_env (or --test_env) naming it.
    client = {V: "/shell"}
    strict = environment_of([], client, {}, ["//p:t"], BazelVersion("9.0.0"))
    assert dict(strict.current) == {"//p:t": None}
    kept = environment_of([Option("action_env", V)], client, {}, ["//p:t"], BazelVersion("9.0.0"))
    assert dict(kept.current) == {"//p:t": "/shell"}
    assert kept.base == ("/shell",)
    assert "bare --action_env" in kept.source


def test_a_bare_test_env_the_client_lacks_leaves_the_action_env_value() -> None:
    result = environment_of([Option("action_env", f"{V}=/a"), Option("test_env", V)],
                                     {}, {}, ["//p:t"], BazelVersion("7.4.1"))
    assert dict(result.current) == {"//p:t": "/a"}


# TestConfiguration.java, the test_env option (EnvVar.Converter): "Previously set variables
# can be unset via `=name`."
def test_test_env_equals_name_unsets_an_earlier_test_env() -> None:
    opts = [Option("action_env", f"{V}=/a"), Option("test_env", f"{V}=/t"),
            Option("test_env", f"={V}")]
    result = environment_of(opts, {}, {}, ["//p:t"], BazelVersion("8.3.0"))
    assert dict(result.current) == {"//p:t": "/a"}
    gone = environment_of([Option("action_env", f"{V}=/a"),
                                    Option("action_env", f"={V}")],
                                   {}, {}, ["//p:t"], BazelVersion("8.3.0"))
    assert dict(gone.current) == {"//p:t": None}


def test_env_inherit_takes_the_clients_value_and_wins_like_env() -> None:
    # RunEnvironmentInfo: an inherited variable the client has wins over the same name in
    # env; on 7.2+ it wins over --test_env like env does.
    client = {V: "/shell"}
    result = environment_of(
        [Option("incompatible_strict_action_env", "true"), Option("test_env", f"{V}=/flag")],
        client, {}, ["//p:inherits"], BazelVersion("8.0.0"), {"//p:inherits": (V,)})
    assert dict(result.current) == {"//p:inherits": "/shell"}
    assert dict(result.reach) == {"//p:inherits": Reach.NO}


def test_env_inherit_is_read_from_query_xml() -> None:
    # `bazel query --output=xml` writes list attributes as <list name=...><string value=.../>
    # (same form as tags), dicts as <dict><pair><string/><string/></pair></dict>.
    xml = """<?xml version="1.1" encoding="UTF-8" standalone="no"?>
<query version="2">
  <rule class="cc_test" location="/ws/p/BUILD:1:8" name="//p:t">
    <dict name="env"><pair><string value="A"/><string value="1"/></pair></dict>
    <list name="env_inherit"><string value="LD_LIBRARY_PATH"/></list>
    <list name="tags"><string value="gpu"/></list>
  </rule>
</query>"""
    info = parse_rules(xml)["//p:t"]
    assert (dict(info.env), info.tags, info.env_inherit) == ({"A": "1"}, ("gpu",),
                                                            ("LD_LIBRARY_PATH",))


# -- what the repair says, with real programs ---------------------------------------------------

def _layout(tmp: Path) -> tuple[Path, Path, Path]:
    """An output_base whose external repository has libxdemo.so.11, and a test program that
    needs it and finds it nowhere."""
    ob = tmp / "ob"
    lib = cc(ob / "external" / "xsdk" / "lib" / "libxdemo.so.11", "-shared",
             "-Wl,-soname,libxdemo.so.11", src="int xdemo_value(void){return 11;}")
    prog = cc(tmp / "bin" / "p" / "attr", "-L", str(lib.parent), "-l:libxdemo.so.11",
              src="int xdemo_value(void); int main(void){return xdemo_value() != 11;}")
    return ob, lib, prog


def _plan(tmp: Path, version: str | None) -> Repair:
    ob, _, prog = _layout(tmp)
    env = environment_of([], {}, {"//p:attr": {V: "/rule/dir"}}, ["//p:attr"],
                                  BazelVersion(version))
    loaders = Loaders(lambda info, e: Loader(host_of(interp_for(info)), e), lambda info: None)
    return plan_repair([TestInput("//p:attr", str(prog))], env, PlanContext(str(ob), loaders))


def test_a_test_the_flag_cannot_reach_is_not_called_fixed(tmp_path: Path) -> None:
    result = _plan(tmp_path, "7.2.0")
    (test,) = result.tests
    lib_dir = str(tmp_path / "ob" / "external" / "xsdk" / "lib")
    assert test.missing_before == ("libxdemo.so.11",)
    assert test.missing_after == ("libxdemo.so.11",)     # its rule's value still wins
    assert test.reach is Reach.NO
    assert test.rule_fix == f'env = {{"{V}": "/rule/dir:{lib_dir}"}}'
    text = repair_summary(result)
    assert "cannot reach //p:attr" in text and "since Bazel 7.2" in text
    assert test.rule_fix in text


def test_before_7_2_the_same_test_is_fixed_by_the_flag(tmp_path: Path) -> None:
    (test,) = _plan(tmp_path, "7.1.0").tests
    assert (test.missing_after, test.reach, test.rule_fix) == ((), Reach.YES, None)


def test_an_unknown_version_counts_fixed_only_if_fixed_in_both_orders(tmp_path: Path) -> None:
    result = _plan(tmp_path, "no_version")
    (test,) = result.tests
    assert test.missing_after == ("libxdemo.so.11",)
    assert test.reach is Reach.UNKNOWN and test.rule_fix is not None
    assert "may not reach //p:attr" in repair_summary(result)
    # The flag is still added, and is right for Bazel before 7.2 (4.2.3 here).
    assert result.ld_library_path is not None
    assert result.ld_library_path.split(":")[0] == "/rule/dir"


@pytest.mark.parametrize("text", ['a"b', "back\\slash", "tab\there", "nl\nx", "\x01"])
def test_the_rule_fix_is_a_starlark_string(text: str) -> None:
    # Starlark reads these escapes as Python does (the Starlark spec's string literals):
    # parse the printed literal back and get the text.
    import ast

    assert ast.literal_eval(buildtext.string(text)) == text


def test_rules_are_found_whatever_form_the_repository_name_takes() -> None:
    # Not read from Bazel's sources: the build events may name a test of another repository
    # canonically (@@nvsdk+//t:x) where query writes its apparent name (@nvsdk//t:x), or the
    # reverse; the rule is matched by package and name when only one rule has them.
    from bazel_ldfix.bazel.queryxml import RuleInfo

    rules = {"@nvsdk//t:x": RuleInfo({V: "/r"}, ()), "//t:y": RuleInfo({}, ("gpu",)),
             "@a//p:z": RuleInfo({}, ()), "@b//p:z": RuleInfo({}, ())}
    got = aligned(rules, ["@@nvsdk+//t:x", "//t:y", "@@c+//p:z"])
    assert dict(got["@@nvsdk+//t:x"].env) == {V: "/r"}
    assert got["//t:y"].tags == ("gpu",)
    assert "@@c+//p:z" not in got       # two candidates: no guess

"""What one run of `bazel-ldfix test` owes each of its tests, on a real Bazel 4.2.3.

A verdict covers the whole run. Tests share one --test_env only when, given each of them
the exact value of its group, each loads exactly the files chosen for it alone. A test's
rule env never reaches another test.

Each test prints the lines of its ``/proc/self/maps`` that name libfoo or libbar, then
checks the versions it was built against. The assertions read those lines from
bazel-testlogs, so they say what the loader really mapped. Each workspace first runs plain
``bazel test``, and hand-written values, to show what loads without the tool and that a
right repair exists.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bazelws import BAZEL, Workspace, clean_env, import_repository, make_workspace
from elfbuild import cc
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.bazel,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


def program(**versions: int) -> str:
    """A test's main: print the maps lines of libfoo and libbar, then pass when each
    ``<name>_version()`` returns its given version (0: any version)."""
    decls = "".join(f"int {name}_version(void);\n" for name in versions)
    checks = " && ".join(f"{name}_version() == {v}" if v else f"{name}_version() > 0"
                         for name, v in versions.items()) or "1"
    return ("#include <stdio.h>\n#include <string.h>\n" + decls
            + "int main(void) {\n"
            '  FILE *f = fopen("/proc/self/maps", "r"); char line[4096];\n'
            "  while (f && fgets(line, sizeof line, f))\n"
            '    if (strstr(line, "/libfoo") || strstr(line, "/libbar"))\n'
            '      printf("maps %s", line);\n'
            f"  return {checks} ? 0 : 1;\n}}\n")


def mapped(ws: Workspace, package: str, name: str) -> set[Path]:
    """The libfoo and libbar files a test mapped, by real path; empty when it never ran
    its main (the loader stopped it) or left no log."""
    log = ws.root / "bazel-testlogs" / package / name / "test.log"
    if not log.exists():
        return set()
    return {Path(line.split(maxsplit=6)[6]).resolve()
            for line in log.read_text(errors="replace").splitlines()
            if line.startswith("maps ") and len(line.split(maxsplit=6)) == 7}


def forget_logs(ws: Workspace, package: str) -> None:
    """Remove a package's test logs, so that what is read next was written by the next run
    (Bazel runs a test again when its outputs are gone)."""
    shutil.rmtree(ws.root / "bazel-testlogs" / package, ignore_errors=True)


def versioned(top: Path, family: str, version: int) -> Path:
    """``top/<family>_v<version>/lib/lib<family>.so.3.<version>.0``, SONAME
    ``lib<family>.so.3``, with the SONAME link and the unversioned dev link."""
    lib = top / f"{family}_v{version}" / "lib"
    real = cc(lib / f"lib{family}.so.3.{version}.0", "-shared",
              f"-Wl,-soname,lib{family}.so.3",
              src=f"int {family}_version(void){{return {version};}}")
    (lib / f"lib{family}.so.3").symlink_to(real.name)
    (lib / f"lib{family}.so").symlink_to(f"lib{family}.so.3")
    return real.resolve()


def in_env(top: Path) -> dict[str, str]:
    """A CI job's environment with a per-user directory of the workspace's own."""
    return {**clean_env(), "XDG_CACHE_HOME": str(top / "cache")}


def group_labels(doc: Mapping[str, object], run: Collection[str]) -> list[set[str]]:
    """The groups `env --format json` gives ``run``'s tests: one group of them all when
    it lists none (one run serves all)."""
    groups = doc.get("groups") or []
    assert isinstance(groups, list)
    return [set(g["labels"]) for g in groups] or [set(run)]


def env_json(ws: Workspace, *args: str) -> dict[str, object]:
    result = ws.ldfix("env", "--format", "json", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)
    return doc


def value(*dirs: Path) -> str:
    return "--test_env=LD_LIBRARY_PATH=" + ":".join(str(d) for d in dirs)


# 1. A rule's env, and the same directory given by the user's .bazelrc.

@dataclass(frozen=True)
class RuleEnv:
    ws: Workspace
    env_dir: Path        # the rule env's directory: libfoo.so.4, version 1
    foo: Path            # @foo's lib/libfoo.so, SONAME libfoo.so.4, version 2
    hand: Path           # a directory with libfoo.so.4 -> @foo's file, made by hand
    plain: subprocess.CompletedProcess[str]
    plain_maps: dict[str, set[Path]]


@pytest.fixture(scope="module")
def rule_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RuleEnv]:
    top = tmp_path_factory.mktemp("ruleenv")
    env_dir = top / "envdir"
    cc(env_dir / "libfoo.so.4", "-shared", "-Wl,-soname,libfoo.so.4",
       src="int foo_version(void){return 1;}")
    foo = cc(top / "foo" / "lib" / "libfoo.so", "-shared", "-Wl,-soname,libfoo.so.4",
             src="int foo_version(void){return 2;}")
    hand = top / "hand"
    hand.mkdir()
    (hand / "libfoo.so.4").symlink_to(foo)
    files = {
        "WORKSPACE": import_repository("foo", top / "foo", "foo"),
        "t/BUILD": ('cc_test(name = "t", srcs = ["t.c"], deps = ["@foo//:foo"])\n'
                    'cc_test(name = "t_env", srcs = ["t_env.c"], deps = ["@foo//:foo"],\n'
                    f'        env = {{"LD_LIBRARY_PATH": {json.dumps(str(env_dir))}}})\n'),
        "t/t.c": program(foo=2), "t/t_env.c": program(foo=1),
    }
    ws = make_workspace(top / "ws", files, env=in_env(top))
    try:
        plain = ws.bazel("test", "//t:all")
        maps = {name: mapped(ws, "t", name) for name in ("t", "t_env")}
        yield RuleEnv(ws, env_dir, foo.resolve(), hand, plain, maps)
    finally:
        ws.shutdown()


def test_a_rule_env_gives_its_directory_and_a_test_env_flag_replaces_it(
        rule_env: RuleEnv) -> None:
    ws = rule_env.ws
    # Plain bazel: //t:t misses libfoo.so.4 (its _solib link is named libfoo.so), and
    # //t:t_env maps the file of its rule env.
    assert rule_env.plain.returncode == 3, rule_env.plain.stderr[-3000:]
    assert rule_env.plain_maps == {"t": set(), "t_env": {rule_env.env_dir / "libfoo.so.4"}}
    # A hand-made value gives //t:t its @foo file; given to //t:t_env, the flag replaces
    # the rule's env (Bazel 4.2.3), so no single value serves both tests.
    forget_logs(ws, "t")
    by_hand = ws.bazel("test", value(rule_env.hand), "//t:all")
    assert by_hand.returncode == 3, by_hand.stderr[-3000:]
    assert mapped(ws, "t", "t") == {rule_env.foo}
    assert mapped(ws, "t", "t_env") == {rule_env.foo}


def test_a_rule_env_reaches_only_its_own_test(rule_env: RuleEnv) -> None:
    ws = rule_env.ws
    forget_logs(ws, "t")
    result = ws.ldfix("test", "//t:all")
    assert mapped(ws, "t", "t") == {rule_env.foo}
    assert mapped(ws, "t", "t_env") == rule_env.plain_maps["t_env"]
    assert result.returncode == 0, result.stderr[-3000:]


def test_env_puts_a_test_with_a_rule_env_in_a_group_of_its_own(rule_env: RuleEnv) -> None:
    groups = group_labels(env_json(rule_env.ws, "//t:all"), ["//t:t", "//t:t_env"])
    assert not any({"//t:t", "//t:t_env"} <= g for g in groups), groups


@dataclass(frozen=True)
class RcEnv:
    ws: Workspace
    env_dir: Path        # given by the .bazelrc: libfoo.so.4, version 1
    bar: Path            # @bar's lib/libbar.so, SONAME libbar.so.1
    hand: Path           # a directory with libbar.so.1 -> @bar's file, made by hand
    plain: subprocess.CompletedProcess[str]
    plain_maps: dict[str, set[Path]]


@pytest.fixture(scope="module")
def rc_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RcEnv]:
    top = tmp_path_factory.mktemp("rcenv")
    env_dir = top / "envdir"
    cc(env_dir / "libfoo.so.4", "-shared", "-Wl,-soname,libfoo.so.4",
       src="int foo_version(void){return 1;}")
    cc(top / "foo" / "lib" / "libfoo.so", "-shared", "-Wl,-soname,libfoo.so.4",
       src="int foo_version(void){return 2;}")
    bar = cc(top / "bar" / "lib" / "libbar.so", "-shared", "-Wl,-soname,libbar.so.1",
             src="int bar_version(void){return 1;}")
    hand = top / "hand"
    hand.mkdir()
    (hand / "libbar.so.1").symlink_to(bar)
    files = {
        "WORKSPACE": (import_repository("foo", top / "foo", "foo")
                      + import_repository("bar", top / "bar", "bar")),
        ".bazelrc": f"test {value(env_dir)}\n",
        "t/BUILD": ('cc_test(name = "t", srcs = ["t.c"], deps = ["@foo//:foo"])\n'
                    'cc_test(name = "t_bar", srcs = ["t_bar.c"],\n'
                    '        deps = ["@foo//:foo", "@bar//:bar"])\n'),
        "t/t.c": program(foo=0), "t/t_bar.c": program(foo=0, bar=1),
    }
    ws = make_workspace(top / "ws", files, env=in_env(top))
    try:
        plain = ws.bazel("test", "//t:all")
        maps = {name: mapped(ws, "t", name) for name in ("t", "t_bar")}
        yield RcEnv(ws, env_dir, bar.resolve(), hand, plain, maps)
    finally:
        ws.shutdown()


def test_a_bazelrc_value_gives_its_directory_to_every_test(rc_env: RcEnv) -> None:
    ws = rc_env.ws
    # Plain bazel: //t:t loads the .bazelrc directory's libfoo.so.4 (it does not fail);
    # //t:t_bar finds libfoo.so.4 there too but misses libbar.so.1.
    assert rc_env.plain.returncode == 3, rc_env.plain.stderr[-3000:]
    assert rc_env.plain_maps == {"t": {rc_env.env_dir / "libfoo.so.4"}, "t_bar": set()}
    # The user's directory, then one for libbar.so.1: both tests pass and keep it.
    forget_logs(ws, "t")
    by_hand = ws.bazel("test", value(rc_env.env_dir, rc_env.hand), "//t:all")
    assert by_hand.returncode == 0, by_hand.stderr[-3000:]
    assert mapped(ws, "t", "t") == {rc_env.env_dir / "libfoo.so.4"}
    assert mapped(ws, "t", "t_bar") == {rc_env.env_dir / "libfoo.so.4", rc_env.bar}


def test_a_bazelrc_value_is_kept_for_every_test(rc_env: RcEnv) -> None:
    """The user's .bazelrc gives the directory to every test, so what each test loads
    from it under plain `bazel test` is what was chosen for it: //t:t keeps that
    directory's libfoo.so.4, not @foo's file of the same SONAME, which its deps name.
    //t:t_bar, which the loader stopped at libbar.so.1, keeps it too (its group's value is
    the user's directory plus one for libbar.so.1), and now loads."""
    ws = rc_env.ws
    forget_logs(ws, "t")
    result = ws.ldfix("test", "//t:all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert mapped(ws, "t", "t") == rc_env.plain_maps["t"]
    assert mapped(ws, "t", "t_bar") == {rc_env.env_dir / "libfoo.so.4", rc_env.bar}


# 2. and 4. Two families of libraries, foo and bar, each in two versions.

# A test's libraries: the version of foo, and of bar (None: it links no bar).
Needs = tuple[int, int | None]


def can_share(a: Needs, b: Needs) -> bool:
    """Whether one value can give two tests each its own files: the same foo, and the
    same bar unless one of them links none."""
    return a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


def test_no_two_of_three_crossed_combinations_can_share_a_run() -> None:
    for a, b in itertools.combinations([(1, 2), (2, 1), (1, 1)], 2):
        assert not can_share(a, b)
    assert can_share((1, None), (1, 2)) and can_share((1, None), (1, 1))


@dataclass(frozen=True)
class Families:
    ws: Workspace
    files: dict[tuple[str, int], Path]      # (family, version) -> real file

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        # How Hypothesis prints a falsifying example's arguments: not the whole environment.
        p.text(f"Families({self.ws.root})")

    def lib(self, family: str, version: int) -> Path:
        return self.ws.output_base / "external" / f"{family}_v{version}" / "lib"

    def own(self, needs: Needs) -> set[Path]:
        foo, bar = needs
        return {self.files["foo", foo]} | ({self.files["bar", bar]} if bar else set())


def build_file(tests: Mapping[str, Needs]) -> str:
    lines = []
    for name, (foo, bar) in tests.items():
        deps = [f"@foo_v{foo}//:foo"] + ([f"@bar_v{bar}//:bar"] if bar else [])
        srcs = [source((foo, bar))]
        lines.append(f"cc_test(name = {json.dumps(name)}, srcs = {json.dumps(srcs)}, "
                     f"deps = {json.dumps(deps)})\n")
    return "".join(lines)


def source(needs: Needs) -> str:
    return f"f{needs[0]}b{needs[1] or 0}.c"


CROSSED = {"t12": (1, 2), "t21": (2, 1), "t11": (1, 1)}


@pytest.fixture(scope="module")
def families(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Families]:
    top = tmp_path_factory.mktemp("families")
    files = {(family, v): versioned(top, family, v) for family in ("foo", "bar") for v in (1, 2)}
    every: list[Needs] = [(foo, bar) for foo in (1, 2) for bar in (1, 2, None)]
    sources = {}
    for package in ("t", "p"):
        for needs in every:
            foo, bar = needs
            sources[f"{package}/{source(needs)}"] = \
                program(foo=foo, bar=bar) if bar else program(foo=foo)
    layout = {
        "WORKSPACE": "".join(import_repository(f"{family}_v{v}", top / f"{family}_v{v}", family)
                             for family, v in files),
        "t/BUILD": build_file(CROSSED),
        "p/BUILD": "",
        **sources,
    }
    ws = make_workspace(top / "ws", layout, env=in_env(top))
    try:
        yield Families(ws, files)
    finally:
        ws.shutdown()


def test_each_crossed_combination_needs_a_value_of_its_own(families: Families) -> None:
    ws = families.ws
    plain = ws.bazel("test", "//t:all")
    assert plain.returncode == 3, plain.stderr[-3000:]
    for name in CROSSED:
        assert mapped(ws, "t", name) == set()       # no libfoo.so.3 among their _solib links
    # Given one test's own directories, every test maps those files: only that test passes.
    for owner, (foo, bar) in CROSSED.items():
        forget_logs(ws, "t")
        by_hand = ws.bazel("test", value(families.lib("foo", foo), families.lib("bar", bar)),
                           "//t:all")
        assert by_hand.returncode == 3, by_hand.stderr[-3000:]
        for name in CROSSED:
            assert mapped(ws, "t", name) == families.own((foo, bar)), (owner, name)
        single = ws.bazel("test", value(families.lib("foo", foo), families.lib("bar", bar)),
                          f"//t:{owner}")
        assert single.returncode == 0, single.stderr[-3000:]


def test_three_crossed_combinations_each_map_their_own_files(families: Families) -> None:
    ws = families.ws
    forget_logs(ws, "t")
    result = ws.ldfix("test", "//t:all")
    for name, needs in CROSSED.items():
        assert mapped(ws, "t", name) == families.own(needs), name
    assert result.returncode == 0, result.stderr[-3000:]


def test_env_gives_three_crossed_combinations_three_groups(families: Families) -> None:
    groups = group_labels(env_json(families.ws, "//t:all"), [f"//t:{n}" for n in CROSSED])
    assert sorted(map(sorted, groups)) == [["//t:t11"], ["//t:t12"], ["//t:t21"]]


def check_partition(groups: Sequence[set[str]], tests: Mapping[str, Needs]) -> None:
    """Each test in exactly one group, and no two tests of a group that cannot share."""
    assert sorted(label for g in groups for label in g) == sorted(tests)
    for group in groups:
        for a, b in itertools.combinations(sorted(group), 2):
            assert can_share(tests[a], tests[b]), (a, b, groups)


NEEDS = st.tuples(st.sampled_from((1, 2)), st.sampled_from((1, 2, None)))


@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          # A shrink would run Bazel for every step of it.
          phases=(Phase.explicit, Phase.generate))
@example(needs=[(1, None), (1, 2), (2, 1), (1, 1)])
@given(needs=st.lists(NEEDS, min_size=3, max_size=4))
def test_any_combination_maps_each_test_its_own_files(families: Families,
                                                      needs: list[Needs]) -> None:
    ws = families.ws
    tests = {f"//p:t{i}": n for i, n in enumerate(needs)}
    (ws.root / "p" / "BUILD").write_text(
        build_file({label.removeprefix("//p:"): n for label, n in tests.items()}))
    forget_logs(ws, "p")
    result = ws.ldfix("test", "//p:all")
    for label, n in tests.items():
        assert mapped(ws, "p", label.removeprefix("//p:")) == families.own(n), (label, needs)
    assert result.returncode == 0, result.stderr[-3000:]
    check_partition(group_labels(env_json(ws, "//p:all"), tests), tests)


# 3. A test excluded by a negative pattern, and named by a test_suite.

# //t:t3 excluded; //t:suite, which names it, selected.
EXCLUDING_T3 = ("--", "//t:all", "-//t:t3")


@dataclass(frozen=True)
class Suite:
    ws: Workspace
    v1: Path            # sdk_v1's libfoo.so.3.1.0


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    top = tmp_path_factory.mktemp("suite")
    v1 = versioned(top, "foo", 1)
    versioned(top, "foo", 2)
    files = {
        "WORKSPACE": (import_repository("sdk_v1", top / "foo_v1", "foo")
                      + import_repository("sdk_v2", top / "foo_v2", "foo")),
        "t/BUILD": ('cc_test(name = "t1", srcs = ["t1.c"], deps = ["@sdk_v1//:foo"])\n'
                    'cc_test(name = "t2", srcs = ["t2.c"])\n'
                    'cc_test(name = "t3", srcs = ["t3.c"], deps = ["@sdk_v2//:foo"])\n'
                    'test_suite(name = "suite", tests = [":t3"])\n'),
        "t/t1.c": program(foo=1), "t/t2.c": program(), "t/t3.c": program(foo=2),
    }
    ws = make_workspace(top / "ws", files, env=in_env(top))
    try:
        yield Suite(ws, v1)
    finally:
        ws.shutdown()


def test_a_negative_pattern_keeps_a_test_of_a_suite_out_of_plain_bazel(suite: Suite) -> None:
    ws = suite.ws
    forget_logs(ws, "t")
    plain = ws.bazel("test", *EXCLUDING_T3)
    assert plain.returncode == 3, plain.stderr[-3000:]       # //t:t1 misses libfoo.so.3
    assert sorted(p.name for p in (ws.root / "bazel-testlogs" / "t").iterdir()) == ["t1", "t2"]
    forget_logs(ws, "t")
    by_hand = ws.bazel("test", value(ws.output_base / "external" / "sdk_v1" / "lib"),
                       *EXCLUDING_T3)
    assert by_hand.returncode == 0, by_hand.stderr[-3000:]
    assert mapped(ws, "t", "t1") == {suite.v1}
    assert not (ws.root / "bazel-testlogs" / "t" / "t3").exists()


def test_a_split_runs_no_test_the_patterns_exclude(suite: Suite) -> None:
    ws = suite.ws
    forget_logs(ws, "t")
    result = ws.ldfix("test", *EXCLUDING_T3)
    assert not (ws.root / "bazel-testlogs" / "t" / "t3").exists()
    assert mapped(ws, "t", "t1") == {suite.v1}
    assert (ws.root / "bazel-testlogs" / "t" / "t2" / "test.log").exists()
    assert result.returncode == 0, result.stderr[-3000:]


def test_env_groups_only_the_tests_the_patterns_select(suite: Suite) -> None:
    groups = group_labels(env_json(suite.ws, *EXCLUDING_T3), ["//t:t1", "//t:t2"])
    check_partition(groups, {"//t:t1": (1, None), "//t:t2": (1, None)})

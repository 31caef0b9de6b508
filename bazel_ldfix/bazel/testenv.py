"""The value of one environment variable a test gets from Bazel, by Bazel's version.

Bazel builds a test's environment in ``TestPolicy.computeTestEnvironment``
(bazelbuild/bazel ``src/main/java/com/google/devtools/build/lib/exec/TestPolicy.java``) from
three sources, each laid over the ones before it:

- ``--action_env`` (the environment common to all actions; with
  ``--incompatible_strict_action_env`` off, the default before Bazel 9, it passes the
  client's ``PATH`` and ``LD_LIBRARY_PATH`` on);
- ``--test_env``;
- the rule's ``env`` attribute and ``env_inherit`` (``getExtraTestEnv``), where an inherited
  variable the client has wins over the same name in ``env`` (``RunEnvironmentInfo``).

Before Bazel 7.2 the rule's variables came first, so any flag replaced them; since 7.2
(PR #22473, "Make env on test rules override --test_env", cherry-picked from #22420) they
come last and win. Both orders were measured on Bazel 4.2.3 (the older one) and read from
the source for the newer one.

Bazel's version comes from its build events (:mod:`bazel_ldfix.bazel.version`): its label,
else what its started event's fields bound it to (Debian's 4.2.3, whose build says
``no_version``, is older than 7.2 by them). A version nothing tells is
:attr:`Order.UNKNOWN`: the repair is computed as for the older order, and a test whose rule
sets the variable counts as fixed only if it is fixed in both orders.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bazel_ldfix import pathlist
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.options import flag_value as bool_option
from bazel_ldfix.pathlist import VARIABLE

if TYPE_CHECKING:
    from bazel_ldfix.bazel.version import BazelVersion

RULE_ENV_WINS_SINCE = (7, 2)


class Order(enum.Enum):
    """Which of a rule's env and ``--test_env`` wins."""

    FLAGS_WIN = "flags_win"     # before Bazel 7.2: rule env, then --action_env, --test_env
    RULE_WINS = "rule_wins"     # Bazel 7.2 and later: --action_env, --test_env, rule env
    UNKNOWN = "unknown"         # nothing tells whether Bazel is 7.2 or later


class Reach(enum.Enum):
    """Whether a ``--test_env`` added last reaches a test."""

    YES = "yes"
    NO = "no"           # the rule's env wins (Bazel 7.2+)
    UNKNOWN = "unknown"  # the rule's env wins if the unknown Bazel is 7.2 or later


def order_of(version: BazelVersion) -> Order:
    before = version.before(RULE_ENV_WINS_SINCE)
    if before is None:
        return Order.UNKNOWN
    return Order.FLAGS_WIN if before else Order.RULE_WINS


@dataclass(frozen=True)
class FlagValue:
    """What ``--action_env`` and ``--test_env`` give a variable, before the rule's env."""

    value: str | None       # None: the flags leave it unset
    source: str             # where it comes from, in words


def _parse(word: str, variable: str) -> tuple[str, str | None] | None:
    """One ``--test_env``/``--action_env`` value for ``variable``: ("set", V), ("inherit",
    None) or ("unset", None); None when it is about another variable.

    ``=NAME`` unsets an earlier value (``EnvVar.Converter``; TestConfiguration.java's
    ``test_env`` help: "Previously set variables can be unset via `=name`").
    """
    if word == f"={variable}":
        return ("unset", None)
    name, eq, value = word.partition("=")
    if name != variable:
        return None
    return ("set", value) if eq else ("inherit", None)


def flag_value(options: Sequence[Option], client: Mapping[str, str], variable: str, *,
               strict: bool) -> FlagValue:
    """The value ``--action_env`` then ``--test_env`` give ``variable`` (measured on 4.2.3:
    ``--action_env`` reaches tests and a rule's env; ``--test_env`` wins over it; a bare
    ``--test_env=NAME`` the client lacks leaves the ``--action_env`` value in place)."""
    client_value = client.get(variable)
    action: str | None = None
    action_source = "nothing"
    if not strict and client_value is not None:
        action = client_value
        action_source = f"the client's {variable} (--incompatible_strict_action_env is off)"
    test: tuple[str, str | None] | None = None
    for opt in options:
        if opt.name not in ("action_env", "test_env"):
            continue
        parsed = _parse(opt.value, variable)
        if parsed is None:
            continue
        kind, value = parsed
        if opt.name == "test_env":
            test = None if kind == "unset" else parsed
            continue
        if kind == "set":
            action, action_source = value, f"--action_env={variable}={value}"
        elif kind == "inherit":
            action = client_value
            action_source = (f"the client's {variable} (bare --action_env={variable})"
                             if client_value is not None else "nothing")
        else:
            action, action_source = None, "nothing"
    if test is not None and test[0] == "set":
        return FlagValue(test[1], f"--test_env={variable}={test[1]}")
    if test is not None and client_value is not None:
        return FlagValue(client_value, f"the client's {variable} (bare --test_env={variable})")
    return FlagValue(action, action_source)


def rule_value(env: Mapping[str, str], env_inherit: Sequence[str],
               client: Mapping[str, str], variable: str) -> str | None:
    """What a rule's ``env`` and ``env_inherit`` give ``variable`` (None: nothing)."""
    if variable in env_inherit and variable in client:
        return client[variable]
    return env.get(variable)


def test_value(flags: FlagValue, rule: str | None, order: Order) -> str | None:
    """The value the test gets. For an unknown order, the older one (see the module)."""
    if order is Order.RULE_WINS:
        return rule if rule is not None else flags.value
    return flags.value if flags.value is not None else rule


def reach(rule: str | None, order: Order) -> Reach:
    """Whether a ``--test_env`` added after every other option reaches the test."""
    if rule is None or order is Order.FLAGS_WIN:
        return Reach.YES
    return Reach.NO if order is Order.RULE_WINS else Reach.UNKNOWN


@dataclass(frozen=True)
class TestEnvironment:
    """LD_LIBRARY_PATH as Bazel would hand it to the tests, before any repair."""

    base: tuple[str, ...]               # what the flags give every test, in order
    source: str                         # where the base comes from, in words
    current: Mapping[str, str | None]   # label -> the value that test gets today
    # label -> whether a --test_env added last reaches it (missing: it does)
    reach: Mapping[str, Reach] = field(default_factory=dict)
    order: Order = Order.FLAGS_WIN
    version: str | None = None          # Bazel's own word for its version (its label)
    rule: Mapping[str, str | None] = field(default_factory=dict)  # the rules' own values

    def base_of(self, label: str) -> tuple[str, ...]:
        """What a ``--test_env`` added last must keep for this test: the whole value it
        gets today, its own rule's ``env`` included where the flag replaces it. Another
        test's rule ``env`` is never part of it."""
        return pathlist.split(self.current.get(label))

    def reaches(self, label: str) -> Reach:
        return self.reach.get(label, Reach.YES)


def environment_of(options: Sequence[Option], client_env: Mapping[str, str],
                     rule_envs: Mapping[str, Mapping[str, str]], labels: Sequence[str],
                     version: BazelVersion,
                     rule_inherits: Mapping[str, Sequence[str]] | None = None
                     ) -> TestEnvironment:
    """Apply Bazel's rules for a test's LD_LIBRARY_PATH (:mod:`bazel_ldfix.bazel.testenv`).

    ``--action_env`` (the client's value with ``--incompatible_strict_action_env`` off, the
    default before Bazel 9), then ``--test_env``, then, by version, the rule's ``env`` and
    ``env_inherit`` below them (before 7.2) or over them (7.2 and later). The repair is a
    ``--test_env`` added last: it replaces the flags' value, and the rule's where the flags
    win, so each test's own value is what it must keep (:meth:`TestEnvironment.base_of`);
    a test whose rule's value wins keeps it.
    """
    major = version.major
    strict = bool_option(options, "incompatible_strict_action_env",
                         default=major is not None and major >= 9)
    order = order_of(version)
    flags = flag_value(options, client_env, VARIABLE, strict=strict)
    inherits = rule_inherits or {}
    rule_values = {label: rule_value(rule_envs.get(label, {}), inherits.get(label, ()),
                                     client_env, VARIABLE)
                   for label in labels}
    current = {label: test_value(flags, rule_values[label], order)
               for label in labels}
    reaches = {label: reach(rule_values[label], order) for label in labels}
    return TestEnvironment(pathlist.split(flags.value), flags.source, current, reaches, order,
                           version.label, rule_values)

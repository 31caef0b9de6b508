"""Every command: its name, the module that defines it, and its line in ``--help``.

The group reads this table, as pip reads its ``commands_dict``. ``--help`` lists the
commands from it without importing any of them. A command's module is imported only when
that command runs, so ``resolve`` never pays for Bazel, the diagnosis or the BUILD fix.
This module imports nothing of the package: it is read before anything else is.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click


@dataclass(frozen=True)
class Entry:
    """Where a command is defined, and what ``--help`` says of it: the module
    ``bazel_ldfix.commands.<name>`` defines the click command ``<name>``."""

    name: str
    summary: str

    @property
    def module(self) -> str:
        return f"bazel_ldfix.commands.{self.name}"


# In the order a user meets them: the one to run instead of `bazel test`, what to run after
# a failed one, the permanent fix, then the tools for one file.
COMMANDS: dict[str, Entry] = {
    "test": Entry("test", "Run `bazel test` with the libraries its tests need."),
    "diagnose": Entry("diagnose", "Why failed tests could not load a library; the fix."),
    "fix": Entry("fix", "Make the BUILD change that lets the tests load."),
    "env": Entry("env", "Print what `bazel test` needs to load its tests."),
    "locate": Entry("locate", "Where under output_base/external each SONAME is."),
    "resolve": Entry("resolve", "How the loader would find what FILES need."),
    "check": Entry("check", "Ask the real loader about FILES; compare."),
    "inspect": Entry("inspect", "What each FILE really is, read from its bytes."),
    "assert-linkage": Entry("assert_linkage", "Fail unless FILE links as asserted."),
    "dupes": Entry("dupes", "Symbols several loaded objects define, and split state."),
    "assert-package": Entry("assert_package", "Fail unless a package ships each library once."),
}


def load(name: str) -> click.Command:
    """The command called ``name``, its module imported now."""
    entry = COMMANDS[name]
    command: click.Command = getattr(importlib.import_module(entry.module), entry.name)
    assert command.name == name, (command.name, name)
    return command

"""Command-line interface: parse, call one library function, render.

``process`` is the composition root (the session of this process: where the user is, the
environment, the outputs, colour); ``root`` holds the group and ``main``, which maps what
a command returns or raises to the exit code; ``registry`` the table of commands the group
reads, each imported only when it runs (the commands are in :mod:`bazel_ldfix.commands`);
``arguments`` the argument handling the commands share; ``testrules`` the launcher of the
Bazel test rules.
"""

from bazel_ldfix.cli.root import cli, main

__all__ = ["cli", "main"]

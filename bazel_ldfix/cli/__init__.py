"""Command-line interface: parse, call one library function, render.

``session`` is the composition root (where the user is, the environment, the Bazel runner,
the loader's options, colour); ``root`` holds the group and ``main``, which maps what a
command returns or raises to the exit code; ``registry`` the table of commands the group
reads, each imported only when it runs; ``options`` the argument handling the commands
share; ``bazelcmds`` and ``filecmds`` the commands, by what they read.
"""

from bazel_ldfix.cli.root import cli, main

__all__ = ["cli", "main"]

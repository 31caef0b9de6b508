"""Repair and explain Bazel test environments that fail at load time."""

__version__ = "0.1.0"

PROG = "bazel-ldfix"
"""The command, as the commands the tool suggests name it when nothing says how the user
ran it (as a library); ``cli`` passes down how the user ran it."""

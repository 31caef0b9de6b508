"""One module per command: its click function and its flow.

``bazel_ldfix.cli.registry`` names them for ``--help``; a command's module is imported only
when that command runs.
"""

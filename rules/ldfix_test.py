"""What the ldfix_*_test rules of //:defs.bzl run (see bazel_ldfix/cli/testrules.py)."""

import sys

from bazel_ldfix.cli.testrules import main

sys.exit(main(sys.argv[1:]))

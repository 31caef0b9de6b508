"""What the ldfix_*_test rules of //:defs.bzl run (see bazel_ldfix/bazeltest.py)."""

import sys

from bazel_ldfix.bazeltest import main

sys.exit(main(sys.argv[1:]))

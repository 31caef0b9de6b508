"""`bazel run @bazel_ldfix//:bazel-ldfix -- ARGS`: the installed command, run by Bazel."""

import sys

from bazel_ldfix.cli import main

sys.exit(main())

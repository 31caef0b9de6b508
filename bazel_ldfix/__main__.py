import sys

from bazel_ldfix.cli import main

sys.exit(main())

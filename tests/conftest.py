"""What every test shares: the source tree under test is the one this file sits in.

Subprocesses (``python -m bazel_ldfix``, Bazel running the tool) inherit ``PYTHONPATH``, so
setting it once here makes every one of them import this tree, installed or not.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

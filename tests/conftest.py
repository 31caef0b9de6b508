"""What every test shares: the source tree under test is the one this file sits in.

Subprocesses (``python -m bazel_ldfix``, Bazel running the tool) inherit ``PYTHONPATH``, so
setting it once here makes every one of them import this tree, installed or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from rexserver import Executor

REPO = Path(__file__).resolve().parent.parent

os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="session")
def remote_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Executor]:
    """One BuildGrid server with its workers for every remote test of the session, started
    on first use and stopped by PID at the end (tests/support/rexserver.py). Under
    pytest-xdist each worker is a session of its own: a worker that runs a remote test
    starts its own server, on a free port, in its own temporary directory."""
    import rexserver

    why = rexserver.available()
    if why is not None:
        pytest.skip(why)
    with rexserver.running(tmp_path_factory.mktemp("buildgrid")) as executor:
        yield executor

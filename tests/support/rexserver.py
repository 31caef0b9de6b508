"""A real Remote Execution API server for the remote tests: BuildGrid, with our worker.

BuildGrid 0.2.53 (from PyPI) runs from its own venv, ``.venv-buildgrid`` (scripts/test.sh
makes it: its dependencies are heavy and pin versions of their own). What was found to work
with Bazel 4.2.3: SQLite for the scheduler (the tables made from
``buildgrid.server.sql.models.Base``, as that version has no migrate command), a disk CAS,
an insecure channel on the loopback, and a thread pool of 64 (the default 10 stalls Bazel's
parallel requests). BuildGrid ships no worker; ``rexworker.py`` is ours (Remote Workers API).

Both run in a process group of their own and are stopped by PID when the session ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("BUILDGRID_VENV", REPO / ".venv-buildgrid"))
PYTHON = VENV / "bin" / "python"
BGD = VENV / "bin" / "bgd"
WORKER = Path(__file__).resolve().parent / "rexworker.py"
START_TIMEOUT = 120.0   # seconds for the server to listen (about 10 here)

CONFIG = """\
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
authorization:
  method: none
connections:
  - !sql-connection &sql
    connection-string: sqlite:///{db}
storages:
  - !disk-storage &cas
    path: {cas}
caches:
  - !lru-action-cache &cache
    storage: *cas
    max-cached-refs: 4096
    allow-updates: true
    cache-failed-actions: true
schedulers:
  - !sql-scheduler &scheduler
    sql: *sql
    action-cache: *cache
    storage: *cas
    property-set: !dynamic-property-set
      match-property-keys: []
      wildcard-property-keys: []
instances:
  - name: ""
    services:
      - !action-cache
        cache: *cache
      - !execution
        scheduler: *scheduler
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
thread-pool-size: 64
"""

MAKE_TABLES = ("import sys\n"
               "from sqlalchemy import create_engine\n"
               "from buildgrid.server.sql.models import Base\n"
               "Base.metadata.create_all(create_engine('sqlite:///' + sys.argv[1]))\n")


def available() -> str | None:
    """Why BuildGrid cannot run here (None: it can)."""
    if not BGD.is_file() or not PYTHON.is_file():
        return f"BuildGrid is not installed in {VENV} (scripts/test.sh installs it)"
    return None


@dataclass(frozen=True)
class Executor:
    address: str            # grpc://127.0.0.1:PORT, for --remote_executor
    root: Path              # its database, CAS and logs

    def log(self) -> str:
        return "".join((self.root / name).read_text(errors="replace")[-4000:]
                       for name in ("server.log", "worker.log"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start(cmd: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group of ``proc`` (its PID), then SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def running(root: Path, bots: int = 2) -> Iterator[Executor]:
    """A BuildGrid server and ``bots`` workers, for as long as the context is open."""
    root.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    db, cas = root / "bgd.db", root / "cas"
    cas.mkdir(exist_ok=True)
    (root / "config.yml").write_text(CONFIG.format(port=port, db=db, cas=cas))
    # Not in the repository's directory: BuildGrid's bundled `google` package would hide
    # protobuf's when started from inside its own site-packages; any other cwd is fine.
    subprocess.run([str(PYTHON), "-c", MAKE_TABLES, str(db)], cwd=root, check=True,
                   capture_output=True)
    server = _start([str(BGD), "server", "start", str(root / "config.yml")],
                    root / "server.log", root)
    worker = None
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("BuildGrid did not start:\n"
                                   + (root / "server.log").read_text(errors="replace"))
            time.sleep(0.1)     # polls for the port to open, no longer than the deadline
        worker = _start([str(PYTHON), str(WORKER), f"127.0.0.1:{port}", "--bots", str(bots)],
                        root / "worker.log", root)
        yield Executor(f"grpc://127.0.0.1:{port}", root)
    finally:
        if worker is not None:
            _stop(worker)
        _stop(server)

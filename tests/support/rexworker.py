"""A small Remote Workers API bot for BuildGrid, for the remote-execution tests.

Run with the Python of BuildGrid's own venv (its bundled protos and grpcio), never imported
by the test suite itself:

    python rexworker.py ADDRESS [--bots N] [--root DIR]

Each bot asks BuildGrid for a lease (``CreateBotSession``/``UpdateBotSession``), reads the
Action the lease carries, fetches its Command and input tree from CAS, writes the inputs
into a fresh directory, runs the command there with the Command's environment only (none
of this process's), uploads the outputs, stdout and stderr, and hands back an ActionResult.
It stops on SIGTERM. No sandbox beyond that: the tests run it on this machine, and what
matters to them is that an action sees only the files Bazel declared.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as rex,
)
from buildgrid._protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2_grpc as rex_grpc,
)
from buildgrid._protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import (
    bots_pb2,
    bots_pb2_grpc,
    worker_pb2,
)
from buildgrid._protos.google.rpc import code_pb2, status_pb2

BATCH = 2 << 20         # bytes per BatchReadBlobs/BatchUpdateBlobs request
POLL = 20.0             # seconds one UpdateBotSession may wait for work
STOP = threading.Event()


def digest_of(data: bytes) -> rex.Digest:
    return rex.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class Cas:
    """Reads and writes blobs of one instance (the default one, "")."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.cas = rex_grpc.ContentAddressableStorageStub(channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(channel)

    def read(self, digests: list[rex.Digest]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        small: list[rex.Digest] = []
        for d in digests:
            if d.size_bytes == 0:
                out[d.hash] = b""
            elif d.size_bytes > BATCH:
                name = f"blobs/{d.hash}/{d.size_bytes}"
                out[d.hash] = b"".join(r.data for r in self.bytestream.Read(
                    bytestream_pb2.ReadRequest(resource_name=name)))
            else:
                small.append(d)
        batch: list[rex.Digest] = []
        size = 0
        for d in [*small, None]:
            if d is None or size + d.size_bytes > BATCH:
                if batch:
                    reply = self.cas.BatchReadBlobs(rex.BatchReadBlobsRequest(digests=batch))
                    for r in reply.responses:
                        if r.status.code != code_pb2.OK:
                            raise RuntimeError(f"cannot read blob {r.digest.hash}: "
                                               f"{r.status.message}")
                        out[r.digest.hash] = r.data
                batch, size = [], 0
            if d is not None:
                batch.append(d)
                size += d.size_bytes
        return out

    def write(self, blobs: dict[str, bytes]) -> None:
        batch: list[rex.BatchUpdateBlobsRequest.Request] = []
        size = 0
        items = [(digest_of(b), b) for b in blobs.values()]
        for d, data in [*items, (None, b"")]:
            if d is not None and d.size_bytes > BATCH:
                self._stream(d, data)
                continue
            if d is None or size + d.size_bytes > BATCH:
                if batch:
                    reply = self.cas.BatchUpdateBlobs(rex.BatchUpdateBlobsRequest(
                        requests=batch))
                    for r in reply.responses:
                        if r.status.code != code_pb2.OK:
                            raise RuntimeError(f"cannot write blob: {r.status.message}")
                batch, size = [], 0
            if d is not None:
                batch.append(rex.BatchUpdateBlobsRequest.Request(digest=d, data=data))
                size += d.size_bytes

    def _stream(self, d: rex.Digest, data: bytes) -> None:
        name = f"uploads/{os.getpid()}-{threading.get_ident()}/blobs/{d.hash}/{d.size_bytes}"

        def chunks() -> Iterator[bytestream_pb2.WriteRequest]:
            for at in range(0, len(data), BATCH):
                part = data[at: at + BATCH]
                yield bytestream_pb2.WriteRequest(
                    resource_name=name, write_offset=at, data=part,
                    finish_write=at + len(part) >= len(data))

        self.bytestream.Write(chunks())


def stage(cas: Cas, root_digest: rex.Digest, root: str) -> None:
    """Write the input tree into ``root`` (which exists)."""
    pending = [(root_digest, root)]
    while pending:
        blobs = cas.read([d for d, _ in pending])
        files: list[tuple[rex.Digest, str, bool]] = []
        nxt = []
        for d, path in pending:
            directory = rex.Directory.FromString(blobs[d.hash])
            for f in directory.files:
                files.append((f.digest, os.path.join(path, f.name), f.is_executable))
            for link in directory.symlinks:
                os.symlink(link.target, os.path.join(path, link.name))
            for sub in directory.directories:
                os.mkdir(os.path.join(path, sub.name))
                nxt.append((sub.digest, os.path.join(path, sub.name)))
        contents = cas.read([d for d, _, _ in files])
        for d, path, executable in files:
            with open(path, "wb") as fh:
                fh.write(contents[d.hash])
            os.chmod(path, 0o555 if executable else 0o444)
        pending = nxt


def _tree(path: str, blobs: dict[str, bytes]) -> rex.Directory:
    directory = rex.Directory()
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            directory.symlinks.add(name=name, target=os.readlink(full))
        elif stat.S_ISDIR(st.st_mode):
            sub = _tree(full, blobs)
            data = sub.SerializeToString()
            blobs[digest_of(data).hash] = data
            directory.directories.add(name=name, digest=digest_of(data))
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as fh:
                data = fh.read()
            blobs[digest_of(data).hash] = data
            directory.files.add(name=name, digest=digest_of(data),
                                is_executable=bool(st.st_mode & 0o111))
    return directory


def _subdirs(directory: rex.Directory, blobs: dict[str, bytes]) -> list[rex.Directory]:
    out = []
    for sub in directory.directories:
        child = rex.Directory.FromString(blobs[sub.digest.hash])
        out.append(child)
        out += _subdirs(child, blobs)
    return out


def execute(cas: Cas, action: rex.Action) -> rex.ActionResult:
    command = rex.Command.FromString(cas.read([action.command_digest])[action.command_digest.hash])
    with tempfile.TemporaryDirectory(prefix="rexworker-") as tmp:
        root = os.path.join(tmp, "root")
        os.mkdir(root)
        stage(cas, action.input_root_digest, root)
        cwd = os.path.join(root, command.working_directory)
        outputs = [*command.output_files, *command.output_directories, *command.output_paths]
        for out in outputs:
            os.makedirs(os.path.dirname(os.path.join(cwd, out)), exist_ok=True)
        timeout = action.timeout.seconds or 600
        env = {v.name: v.value for v in command.environment_variables}
        try:
            proc = subprocess.run(list(command.arguments), cwd=cwd, env=env,
                                  capture_output=True, timeout=timeout)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = 142, exc.stdout or b"", (exc.stderr or b"") + b"\ntimed out\n"
        except OSError as exc:
            code, out, err = 127, b"", f"cannot run {command.arguments[0]}: {exc}\n".encode()
        if code < 0:
            code = 128 - code
        blobs: dict[str, bytes] = {}
        result = rex.ActionResult(exit_code=code)
        for data, field in ((out, "stdout_digest"), (err, "stderr_digest")):
            blobs[digest_of(data).hash] = data
            getattr(result, field).CopyFrom(digest_of(data))
        for name in outputs:
            path = os.path.join(cwd, name)
            if os.path.islink(path):
                result.output_file_symlinks.add(path=name, target=os.readlink(path))
            elif os.path.isdir(path):
                top = _tree(path, blobs)
                tree = rex.Tree(root=top, children=_subdirs(top, blobs))
                data = tree.SerializeToString()
                blobs[digest_of(data).hash] = data
                result.output_directories.add(path=name, tree_digest=digest_of(data))
            elif os.path.isfile(path):
                with open(path, "rb") as fh:
                    data = fh.read()
                blobs[digest_of(data).hash] = data
                result.output_files.add(path=name, digest=digest_of(data),
                                        is_executable=os.access(path, os.X_OK))
        cas.write(blobs)
        # The input root is read-only (as Bazel's sandboxes make it): let it be removed.
        for top, dirs, _ in os.walk(root):
            for d in dirs:
                os.chmod(os.path.join(top, d), 0o755)
        shutil.rmtree(root, ignore_errors=True)
    return result


def bot(address: str, number: int) -> None:
    channel = grpc.insecure_channel(address)
    grpc.channel_ready_future(channel).result(timeout=120)     # the server may be starting
    bots = bots_pb2_grpc.BotsStub(channel)
    cas = Cas(channel)
    session = bots_pb2.BotSession(
        bot_id=f"rexworker-{os.getpid()}-{number}", status=bots_pb2.BotStatus.OK,
        worker=worker_pb2.Worker(devices=[worker_pb2.Device(handle=f"bot-{number}")]))
    session = bots.CreateBotSession(bots_pb2.CreateBotSessionRequest(
        parent="", bot_session=session), timeout=POLL)
    while not STOP.is_set():
        for lease in session.leases:
            if lease.state != bots_pb2.LeaseState.ACTIVE:
                continue
            action = rex.Action()
            lease.payload.Unpack(action)
            try:
                result = execute(cas, action)
                lease.status.CopyFrom(status_pb2.Status(code=code_pb2.OK))
                lease.result.Pack(result)
            except Exception as exc:  # the lease fails; the bot goes on
                lease.status.CopyFrom(status_pb2.Status(code=code_pb2.INTERNAL,
                                                        message=str(exc)))
            lease.state = bots_pb2.LeaseState.COMPLETED
        try:
            session = bots.UpdateBotSession(bots_pb2.UpdateBotSessionRequest(
                name=session.name, bot_session=session), timeout=POLL)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED and STOP.wait(1.0):
                return


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--bots", type=int, default=2)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    threads = [threading.Thread(target=bot, args=(args.address, n), daemon=True)
               for n in range(args.bots)]
    for t in threads:
        t.start()
    while not STOP.wait(0.5):   # a timed wait: the handler runs between two waits
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

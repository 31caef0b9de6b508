"""A small HTTP remote cache on the loopback interface, for tests.

Bazel's HTTP cache protocol is plain ``GET`` and ``PUT`` of ``/ac/<sha256>`` (action results)
and ``/cas/<sha256>`` (file contents); a miss is 404. Bazel requires HTTP/1.1 answers ("HTTP
version 1.1 is required", measured on 4.2.3). The store is in memory and bounded: a body
over :data:`MAX_BLOB` or a store over :data:`MAX_TOTAL` is refused (413), and only paths of
that form are served.
"""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

MAX_BLOB = 64 << 20
MAX_TOTAL = 512 << 20
_PATH = re.compile(r"^/(ac|cas)/[0-9a-f]{64}$")


class _Store:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.total = 0
        self.lock = threading.Lock()
        self.hits = {"ac": 0, "cas": 0}
        self.puts = 0


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store: _Store

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, code: int, body: bytes = b"") -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        if not _PATH.match(self.path):
            self._answer(404)
            return
        with self.store.lock:
            body = self.store.blobs.get(self.path)
            if body is not None:
                self.store.hits[self.path.split("/")[1]] += 1
        self._answer(404) if body is None else self._answer(200, body)

    do_HEAD = do_GET

    def do_PUT(self) -> None:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._answer(411)
            return
        if not _PATH.match(self.path) or length < 0 or length > MAX_BLOB:
            self.close_connection = True
            self._answer(413)
            return
        body = self.rfile.read(length)
        with self.store.lock:
            old = len(self.store.blobs.get(self.path, b""))
            if self.store.total - old + len(body) > MAX_TOTAL:
                self._answer(413)
                return
            self.store.blobs[self.path] = body
            self.store.total += len(body) - old
            self.store.puts += 1
        self._answer(200)


@contextmanager
def http_cache() -> Iterator[tuple[str, _Store]]:
    """``(url, store)`` of a cache served on 127.0.0.1 while the block runs."""
    store = _Store()
    handler = type("Handler", (_Handler,), {"store": store})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", store
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

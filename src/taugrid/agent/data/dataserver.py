"""The agent's data server: its region's complete dataset replicas over HTTP, for peers.

Routes (HTTP/1.1, keep-alive):

    GET /healthz                                  200 "ok"
    GET /v1/datasets/{id}/files/{path}            the file; ``Range: bytes=N-`` / ``N-M`` → 206

Only replicas the hub lists as complete in this region are served (``serve`` replaces
the set on each data sync), and only files inside the replica directory. With a token
configured every request needs ``Authorization: Bearer <token>`` (401 otherwise).
Files go out with ``os.sendfile``. ``delays`` (seconds per local address) holds each
response that long, emulating the link's RTT in user space (see ``agent.data.probes``).
"""

from __future__ import annotations

import http.server
import logging
import os
import re
import socketserver
import threading
import time
import urllib.parse
from pathlib import Path

from taugrid.agent.data import probes

__all__ = ["DataServer"]

log = logging.getLogger(__name__)

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("peer %s went away mid-request", client_address)  # an interrupted transfer

    owner: DataServer
    delay_s = 0.0


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        time.sleep(self.server.delay_s)
        owner = self.server.owner
        if owner.token and self.headers.get("Authorization") != f"Bearer {owner.token}":
            self._fail(401, "missing or wrong data token")
            return
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/healthz":
            self._send_bytes(b"ok")
            return
        m = re.match(r"^/v1/datasets/([^/]+)/files/(.+)$", path)
        target = owner.resolve(m.group(1), m.group(2)) if m else None
        if target is None:
            self._fail(404, "no such dataset file here")
            return
        self._send_file(target)

    def _fail(self, code: int, why: str) -> None:
        body = why.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_bytes(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_file(self, target: Path) -> None:
        size = target.stat().st_size
        start, end = 0, size - 1
        rng = _RANGE.match(self.headers.get("Range", ""))
        if rng:
            start = int(rng.group(1))
            end = min(int(rng.group(2)), size - 1) if rng.group(2) else size - 1
            if start >= size and size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        length = max(0, end - start + 1)
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()
        with target.open("rb") as fh:
            sent = 0
            while sent < length:
                n = os.sendfile(self.connection.fileno(), fh.fileno(), start + sent, length - sent)
                if n == 0:
                    break
                sent += n


class DataServer:
    """Serves the replicas in ``served`` from ``data_root`` on each of ``addresses``."""

    def __init__(
        self,
        data_root: Path,
        addresses: list[str],
        port: int,
        ns: str | None = None,
        token: str | None = None,
        delays: dict[str, float] | None = None,
    ) -> None:
        self.data_root = data_root
        self.addresses, self.port, self.ns, self.token = addresses, port, ns, token
        self.delays = delays or {}
        self._served: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._servers: list[tuple[socketserver.TCPServer, threading.Thread]] = []

    def serve(self, replicas: dict[str, str]) -> None:
        """Replace the served set: dataset ID → replica path (relative to the data root)."""
        with self._lock:
            self._served = {d: (self.data_root / p).resolve() for d, p in replicas.items()}

    def served(self) -> list[str]:
        with self._lock:
            return sorted(self._served)

    def resolve(self, dataset_id: str, rel: str) -> Path | None:
        """The file ``rel`` of a served replica, or None (unknown, outside, missing)."""
        with self._lock:
            root = self._served.get(dataset_id)
        if root is None:
            return None
        target = root if root.is_file() and rel == root.name else (root / rel).resolve()
        if not (target == root or target.is_relative_to(root)) or not target.is_file():
            return None
        return target

    def start(self) -> DataServer:
        def setup(srv: socketserver.TCPServer, addr: str) -> None:
            srv.owner = self  # type: ignore[attr-defined]
            srv.delay_s = self.delays.get(addr, 0.0)  # type: ignore[attr-defined]

        self._servers = probes.serve_sockets(
            _Server, _Handler, self.addresses, self.port, self.ns, setup
        )
        return self

    def stop(self) -> None:
        for srv, th in self._servers:
            srv.shutdown()
            srv.server_close()
            th.join(timeout=5)

"""A TCP forwarder a test can cut: the network seam for "X cannot reach Y" (a region
that loses its object store or its hub) while both sides keep running. The Kubernetes
tier also uses it as kube-proxy for the ``kubernetes`` Service (``tests/k8s/controlplane``)
and to give its pods PostgreSQL's Unix socket over TCP (``tests/pg_schema``)."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """A TCP forwarder the test can cut (closes every connection, refuses new ones)."""

    def __init__(self, ip: str, target: tuple[str, int] | str, port: int = 0) -> None:
        """``target``: an address, or a Unix socket's path."""
        self.ip, self.target = ip, target
        self.sock = socket.create_server((ip, port))
        self.port = self.sock.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if not self.open.is_set():
                client.close()
                continue
            try:
                upstream = _connect(self.target)
            except OSError:  # the target is down (an API server restarting): refuse this one
                client.close()
                continue
            upstream.settimeout(None)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        self.open.clear()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
                c.close()
        self._conns.clear()

    def close(self) -> None:
        self.cut()
        self.sock.close()


def _connect(target: tuple[str, int] | str) -> socket.socket:
    if isinstance(target, tuple):
        return socket.create_connection(target, timeout=10)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(target)
    except OSError:
        sock.close()
        raise
    return sock

"""What kube-proxy would do for one Service, for the test control plane: the
``kubernetes`` Service's cluster IP (a loopback address, ``ControlPlane.api_service_ip``)
on port 443, relayed over TCP to the API server. A pod on the real node (host network)
reaches the API server as in any cluster: through ``KUBERNETES_SERVICE_HOST`` and its
service-account token. One thread accepts; each connection gets two relay threads."""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["ServiceProxy"]


class ServiceProxy:
    """Relays ``listen`` (ip, port) to ``target`` (ip, port) until ``close``."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        self._sock = socket.create_server(listen, reuse_port=False)
        self._sock.settimeout(0.5)
        self._closed = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True, name="svc-proxy")
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=5)
        self._sock.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()

"""Network probes between regions: a probe server on the agent's region address and a
client that measures every peer's TCP throughput and RTT on an interval.

Protocol (one TCP connection per measurement, binary):

    client → b"P" + 8 bytes      server → the same 9 bytes back     (a ping; RTT sample)
    client → b"T" + u64 ms (BE)  server → zeros for that long, then closes (throughput)

and, on the same port over UDP, an echo for loss (``measure_loss``): the client sends
``count`` datagrams ``b"L" + nonce + u32 seq`` a few ms apart and counts the distinct
ones that come back; loss is the percentage that did not.

Throughput is measured with a real payload over TCP, in the direction data moves when
this region copies from the peer (peer → here), and only over the last 75 % of the
window, so slow start and a shaper's initial burst do not count. RTT is the median of
several pings on an established connection. ``delays`` (seconds per local address)
emulates link RTT in user space: the server holds each ping echo (and the data server
each response) that long, because kernel ``netem`` is not available everywhere; for the
same reason ``losses`` (fraction per local address) emulates link loss by dropping that
share of UDP echoes (seeded, so a lab run is repeatable). Both are lab settings; on real
links both are zero and the network supplies delay and loss.

``ProbeRunner.latest()`` is what the agent puts in ``StateReport.probes``:
``{peer region: {"throughput_mbps", "rtt_ms", "loss_pct", "measured_at",
"egress_cost_per_gb"}}``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import random
import socket
import socketserver
import statistics
import struct
import threading
import time
from collections.abc import Callable

from taugrid.dataplane import netns

__all__ = ["Peer", "ProbeRunner", "ProbeServer", "measure", "measure_loss", "serve_sockets"]

log = logging.getLogger(__name__)
_ZEROS = bytes(256 * 1024)
_LOSS_COUNT = 50


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while head := _recv_exact(sock, 9):
                if head[:1] == b"P":
                    time.sleep(self.server.delay_s)
                    sock.sendall(head)
                elif head[:1] == b"T":
                    (ms,) = struct.unpack(">Q", head[1:])
                    time.sleep(self.server.delay_s)
                    end = time.monotonic() + min(ms, 30_000) / 1000
                    while time.monotonic() < end:
                        sock.sendall(_ZEROS)
                    return
                else:
                    return
        except OSError:
            return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("peer %s went away mid-request", client_address)  # an interrupted transfer

    allow_reuse_address = True
    delay_s = 0.0


def serve_sockets(
    server_cls: type[socketserver.TCPServer],
    handler: type[socketserver.BaseRequestHandler],
    addresses: list[str],
    port: int,
    ns: str | None,
    setup: Callable[[socketserver.TCPServer, str], None],
) -> list[tuple[socketserver.TCPServer, threading.Thread]]:
    """One threaded server per address, listening inside ``ns``; each in its own thread."""
    out = []
    for addr in addresses:
        srv = server_cls((addr, port), handler, bind_and_activate=False)
        srv.socket.close()
        srv.socket = netns.create_server((addr, port), ns)
        srv.server_address = srv.socket.getsockname()
        setup(srv, addr)
        th = threading.Thread(target=srv.serve_forever, args=(0.2,), daemon=True)
        th.start()
        out.append((srv, th))
    return out


class _UdpEcho:
    """Echoes loss probes on one address after ``delay_s``, dropping a ``loss`` share."""

    def __init__(self, addr: str, port: int, ns: str | None, delay_s: float, loss: float) -> None:
        self.sock = netns.create_udp((addr, port), ns)
        self.delay_s, self.loss = delay_s, loss
        self._rng = random.Random(f"{addr}:{port}")  # repeatable emulated loss per address
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"udp-echo-{addr}", daemon=True)

    def start(self) -> _UdpEcho:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()

    def _loop(self) -> None:
        due: collections.deque[tuple[float, bytes, tuple[str, int]]] = collections.deque()
        while not self._stop.is_set():
            now = time.monotonic()
            while due and due[0][0] <= now:
                _, data, peer = due.popleft()
                self.sock.sendto(data, peer)
            self.sock.settimeout(max(due[0][0] - now, 0.0005) if due else 0.2)
            try:
                data, peer = self.sock.recvfrom(64)
            except OSError:  # timeout, or an ICMP error from a client that went away
                continue
            if data[:1] == b"L" and self._rng.random() >= self.loss:
                due.append((time.monotonic() + self.delay_s, data, peer))


class ProbeServer:
    """Answers probes on each of ``addresses`` (all in ``ns``): TCP and the UDP echo."""

    def __init__(
        self,
        addresses: list[str],
        port: int,
        ns: str | None = None,
        delays: dict[str, float] | None = None,
        losses: dict[str, float] | None = None,
    ) -> None:
        self.addresses, self.port, self.ns = addresses, port, ns
        self.delays, self.losses = delays or {}, losses or {}
        self._servers: list[tuple[socketserver.TCPServer, threading.Thread]] = []
        self._echoes: list[_UdpEcho] = []

    def start(self) -> ProbeServer:
        def setup(srv: socketserver.TCPServer, addr: str) -> None:
            srv.delay_s = self.delays.get(addr, 0.0)  # type: ignore[attr-defined]

        self._servers = serve_sockets(_Server, _Handler, self.addresses, self.port, self.ns, setup)
        self._echoes = [
            _UdpEcho(a, self.port, self.ns, self.delays.get(a, 0.0), self.losses.get(a, 0.0))
            for a in self.addresses
        ]
        for echo in self._echoes:
            echo.start()
        return self

    def stop(self) -> None:
        for srv, th in self._servers:
            srv.shutdown()
            srv.server_close()
            th.join(timeout=5)
        for echo in self._echoes:
            echo.stop()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return b""
        buf += chunk
    return buf


def measure(
    host: str, port: int, ns: str | None = None, pings: int = 5, duration_s: float = 1.0
) -> dict[str, float]:
    """RTT (ms, median of ``pings``) and throughput (Mbit/s) to one probe server."""
    with netns.create_connection((host, port), 10.0, ns) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for i in range(pings):
            t0 = time.perf_counter()
            sock.sendall(b"P" + struct.pack(">Q", i))
            if not _recv_exact(sock, 9):
                raise OSError("probe server closed the connection")
            rtts.append(time.perf_counter() - t0)
        sock.sendall(b"T" + struct.pack(">Q", int(duration_s * 1000)))
        mbps = _download_rate(sock, duration_s) * 8 / 1e6
    rtt_s = statistics.median(rtts)
    return {
        "rtt_ms": round(rtt_s * 1000, 3),
        "throughput_mbps": round(mbps, 3),
        "loss_pct": measure_loss(host, port, ns, wait_s=max(1.0, 4 * rtt_s)),
        "measured_at": time.time(),
    }


def measure_loss(
    host: str,
    port: int,
    ns: str | None = None,
    count: int = _LOSS_COUNT,
    spacing_s: float = 0.002,
    wait_s: float = 1.0,
) -> float:
    """Percent of ``count`` UDP datagrams the peer's echo does not return within ``wait_s``
    of the last one sent (100.0 when nothing answers)."""
    sock = netns.create_udp(None, ns)
    try:
        sock.connect((host, port))
        nonce = os.urandom(4)
        for i in range(count):
            with contextlib.suppress(OSError):  # an earlier datagram's ICMP error
                sock.send(b"L" + nonce + struct.pack(">I", i))
            time.sleep(spacing_s)
        seen: set[bytes] = set()
        deadline = time.monotonic() + wait_s
        while len(seen) < count and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data = sock.recv(64)
            except TimeoutError:
                break
            except OSError:  # ICMP port unreachable: no echo there (yet); keep waiting
                continue
            if data[1:5] == nonce:
                seen.add(data[5:9])
    finally:
        sock.close()
    return round(100.0 * (count - len(seen)) / count, 2)


def _download_rate(sock: socket.socket, duration_s: float) -> float:
    """Bytes/s over the last 75 % of the stream (after slow start and the shaper's burst)."""
    start = time.monotonic()
    mark_at, marked, got = start + duration_s * 0.25, None, 0
    buf = bytearray(1 << 20)
    while True:
        n = sock.recv_into(buf)
        if n == 0:
            break
        got += n
        now = time.monotonic()
        if marked is None and now >= mark_at:
            marked = (now, got)
    end = time.monotonic()
    if marked is None or end - marked[0] <= 0:
        return got / max(end - start, 1e-6)
    return (got - marked[1]) / (end - marked[0])


@dataclasses.dataclass(frozen=True)
class Peer:
    """A peer region's probe server as reached from here, and what its egress costs."""

    region: str
    host: str
    port: int
    data_port: int = 0
    egress_cost_per_gb: float = 0.0


class ProbeRunner:
    """Measures every peer (``peers()`` is asked each round: peers come and go) every
    ``interval_s`` in a thread; skips links ``busy`` says are carrying a transfer (the
    measurement would compete with it)."""

    def __init__(
        self,
        peers: Callable[[], list[Peer]],
        ns: str | None = None,
        interval_s: float = 15.0,
        duration_s: float = 1.0,
        busy: Callable[[str], bool] | None = None,
    ) -> None:
        self.peers, self.ns = peers, ns
        self.interval_s, self.duration_s = interval_s, duration_s
        self.busy = busy or (lambda _region: False)
        self._latest: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tau-probes", daemon=True)

    def start(self) -> ProbeRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.duration_s + 15)

    def latest(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {k: dict(v) for k, v in self._latest.items()}

    def measure_all(self) -> None:
        for p in self.peers():
            if self._stop.is_set() or self.busy(p.region):
                continue
            try:
                m = measure(p.host, p.port, self.ns, duration_s=self.duration_s)
            except OSError as exc:
                log.info("probe of %s (%s:%s) failed: %s", p.region, p.host, p.port, exc)
                continue
            m["egress_cost_per_gb"] = p.egress_cost_per_gb
            with self._lock:
                self._latest[p.region] = m

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.measure_all()
            self._stop.wait(self.interval_s)

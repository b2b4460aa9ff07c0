"""A private PostgreSQL server per test module, and a TCP proxy to cut a replica off it.

The shared cluster on 127.0.0.1:5432 is never stopped or restarted by tests; tests that
restart the database or partition a replica from it start their own server here
(``initdb`` + ``postgres`` from the Debian packages, trust auth, one loopback address)
and stop it in teardown. Running as root, the server runs as the ``postgres`` user.

``TcpProxy`` is the seam of the network between a replica and its database: ``cut()``
closes every open connection and every new one at once (the replica's driver sees the
connection drop, as after a partition with resets), ``heal()`` forwards again.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.hub.harness import free_port

BIN = Path("/usr/lib/postgresql/15/bin")


def available() -> bool:
    return (BIN / "postgres").exists()


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class PgServer:
    """One PostgreSQL server in ``base`` listening on ``host`` (a free port)."""

    def __init__(self, base: Path, host: str) -> None:
        self.base, self.host = base, host
        self.port = free_port(host)
        self.data = base / "data"
        self.url = f"postgresql+psycopg://tau@{host}:{self.port}/tau"

    def _run(self, *cmd: str) -> None:
        subprocess.run(_as_postgres(list(cmd)), check=True, capture_output=True, timeout=120)

    def init(self) -> PgServer:
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        initdb = [str(BIN / "initdb"), "-D", str(self.data), "-U", "tau", "--auth=trust"]
        self._run(*initdb, "-E", "UTF8")
        self.start()
        self._run(str(BIN / "createdb"), "-h", self.host, "-p", str(self.port), "-U", "tau", "tau")
        return self

    def start(self) -> None:
        opts = f"-h {self.host} -p {self.port} -k {self.base} -c max_connections=200"
        self._run(
            str(BIN / "pg_ctl"), "-D", str(self.data), "-o", opts,
            "-l", str(self.base / "log"), "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def new_database(self, name: str) -> str:
        """Create database ``name``; its URL."""
        self._run(str(BIN / "createdb"), "-h", self.host, "-p", str(self.port), "-U", "tau", name)
        return f"postgresql+psycopg://tau@{self.host}:{self.port}/{name}"

    def restart(self) -> None:
        """Stop at once (as a crash would: no clean shutdown of sessions) and start."""
        self.stop("immediate")
        self.start()


@contextlib.contextmanager
def pg_server(host: str) -> Iterator[PgServer]:
    """A started server in a fresh directory the ``postgres`` user can reach (pytest's
    tmp dirs are private to root); stopped and removed after."""
    if shutil.which("runuser") is None and os.geteuid() == 0:
        raise RuntimeError("running as root needs runuser to start PostgreSQL as postgres")
    base = Path(tempfile.mkdtemp(prefix="tau-pg-"))
    try:
        server = PgServer(base, host).init()
        try:
            yield server
        finally:
            server.stop("immediate")
    finally:
        shutil.rmtree(base, ignore_errors=True)


class TcpProxy:
    """Forwards ``listen_host:port`` to ``target``; ``cut``/``heal`` the link."""

    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self.target = target
        self._sock = socket.create_server((listen_host, 0))
        self.host, self.port = listen_host, int(self._sock.getsockname()[1])
        self._cut = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
                with self._lock:
                    self._open.discard(s)


def wait_for(check: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``check()`` until it is true; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")

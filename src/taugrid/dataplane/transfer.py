"""Copy a dataset replica from a peer region's data server: HTTP Range resume + sha256.

Protocol (served by ``agent.data.dataserver``): ``GET /v1/datasets/{id}/files/{path}`` with
``Range: bytes=N-`` answers 206 with the rest of the file. Each file is written to
``<path>.part``; an interrupted transfer leaves the part on disk, and the next attempt
re-hashes it and asks only for the missing bytes. A file is renamed into place only
after its sha256 matches the manifest; a mismatch deletes the part (``IntegrityError``)
so the retry starts that file afresh. Files already in place with the manifest size
were verified when they were renamed and are skipped. ``copy`` is that logic for any
source: ``fetch`` reads a peer's data server, ``dataplane.objstore`` an fsspec URL.

Errors (``TransferError`` is retryable; ``IntegrityError`` is one of them):

    TauError
    └── SystemFault
        └── TransferError           connection lost, HTTP error, stopped
            └── IntegrityError      sha256 of a received file differs from the manifest
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.dataplane import manifest, netns

__all__ = [
    "Getter",
    "IntegrityError",
    "RateLimiter",
    "Result",
    "Source",
    "TransferError",
    "copy",
    "fetch",
]

_BLOCK = 256 * 1024


class TransferError(errors.SystemFault):
    def __init__(self, message: str) -> None:
        super().__init__(message, "the transfer resumes where it stopped", retryable=True)


class IntegrityError(TransferError):
    """A received file's sha256 differs from the manifest; its part was deleted."""


@dataclasses.dataclass(frozen=True)
class Source:
    """A peer's data server: address, the namespace to connect from, and its token."""

    host: str
    port: int
    netns: str | None = None
    token: str | None = None


@dataclasses.dataclass
class Result:
    bytes_total: int = 0
    bytes_fetched: int = 0  # over the network in this call
    bytes_resumed: int = 0  # already on disk when it started
    seconds: float = 0.0

    @property
    def rate_bps(self) -> float:
        return self.bytes_fetched / self.seconds if self.seconds > 0 else 0.0


class RateLimiter:
    """A token bucket of ``rate`` bytes/s (burst: a quarter second)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self._tokens = 0.0
        self._at = time.monotonic()

    def take(self, n: int) -> None:
        if not self.rate:
            return
        now = time.monotonic()
        self._tokens = min(self.rate / 4, self._tokens + (now - self._at) * self.rate) - n
        self._at = now
        if self._tokens < 0:
            time.sleep(-self._tokens / self.rate)


class _Conn(http.client.HTTPConnection):
    def __init__(self, src: Source, timeout: float) -> None:
        super().__init__(src.host, src.port, timeout=timeout)
        self.src = src

    def connect(self) -> None:
        self.sock = netns.create_connection(
            (self.src.host, self.src.port), self.timeout, self.src.netns
        )
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@dataclasses.dataclass
class _Run:
    did: str
    limiter: RateLimiter
    result: Result
    on_progress: Callable[[int, float], None] | None
    stop: threading.Event | None
    started: float
    last_report: float = 0.0

    def tick(self, n: int) -> None:
        self.result.bytes_fetched += n
        self.limiter.take(n)
        now = time.monotonic()
        if self.stop is not None and self.stop.is_set():
            raise TransferError(f"transfer of {self.did} stopped")
        if self.on_progress is not None and now - self.last_report >= 0.5:
            self.last_report = now
            done = self.result.bytes_resumed + self.result.bytes_fetched
            self.on_progress(done, self.result.bytes_fetched / max(now - self.started, 1e-6))


Getter = Callable[["_Run", str, Path, int, Any], None]
"""Append the bytes of manifest file ``path`` from ``offset`` to ``part``, feeding the
hash and ``_Run.tick``: how one source (a peer's data server, an fsspec URL) is read."""


def fetch(
    src: Source,
    dataset_id: str,
    files: list[dict[str, Any]],
    dest: Path,
    *,
    rate_limit_bps: float | None = None,
    on_progress: Callable[[int, float], None] | None = None,
    stop: threading.Event | None = None,
    timeout_s: float = 30.0,
) -> Result:
    """Bring ``dest`` to exactly ``files`` (a manifest), fetching what is missing."""
    conn = _Conn(src, timeout_s)

    def get(run: _Run, path: str, part: Path, offset: int, h: Any) -> None:
        _get(conn, run, path, part, offset, h)

    try:
        return copy(
            dataset_id,
            files,
            dest,
            get,
            where=f"{src.host}:{src.port}",
            rate_limit_bps=rate_limit_bps,
            on_progress=on_progress,
            stop=stop,
        )
    except http.client.HTTPException as exc:
        raise TransferError(f"transfer of {dataset_id} from {src.host}:{src.port}: {exc}") from exc
    finally:
        conn.close()


def copy(
    dataset_id: str,
    files: list[dict[str, Any]],
    dest: Path,
    get: Getter,
    *,
    where: str,
    rate_limit_bps: float | None = None,
    on_progress: Callable[[int, float], None] | None = None,
    stop: threading.Event | None = None,
) -> Result:
    """The source-independent part of a fetch: resume from parts, verify, rename."""
    dest.mkdir(parents=True, exist_ok=True)
    result = Result(bytes_total=manifest.total_size(files))
    run = _Run(dataset_id, RateLimiter(rate_limit_bps), result, on_progress, stop, time.monotonic())
    try:
        for f in files:
            _file(run, f, dest, get)
    except OSError as exc:
        raise TransferError(f"transfer of {dataset_id} from {where}: {exc}") from exc
    finally:
        result.seconds = time.monotonic() - run.started
    return result


def _file(run: _Run, f: dict[str, Any], dest: Path, get: Getter) -> None:
    final = _inside(dest, str(f["path"]))
    size = int(f["size"])
    if final.is_file() and final.stat().st_size == size:
        run.result.bytes_resumed += size
        return
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + manifest.PART_SUFFIX)
    part.touch()
    offset = part.stat().st_size
    if offset > size:
        part.unlink()
        offset = 0
    h = hashlib.sha256()
    if offset:
        manifest.file_sha256(part, h)
    run.result.bytes_resumed += offset
    if offset < size:
        get(run, str(f["path"]), part, offset, h)
    if h.hexdigest() != f["sha256"]:
        part.unlink(missing_ok=True)
        raise IntegrityError(f"{f['path']} of {run.did}: sha256 mismatch; it will be fetched again")
    part.rename(final)


def _get(conn: _Conn, run: _Run, path: str, part: Path, offset: int, h: Any) -> None:
    url = f"/v1/datasets/{urllib.parse.quote(run.did)}/files/{urllib.parse.quote(path)}"
    headers = {"Range": f"bytes={offset}-"}
    if conn.src.token:
        headers["Authorization"] = f"Bearer {conn.src.token}"
    conn.request("GET", url, headers=headers)
    resp = conn.getresponse()
    if resp.status == 200 and offset:  # the server ignored Range: start the file over
        part.unlink()
        run.result.bytes_resumed -= offset
        h.__init__()
    elif resp.status not in (200, 206):
        raise TransferError(f"GET {url}: HTTP {resp.status} {resp.read(300)!r}")
    with part.open("ab") as fh:
        while block := resp.read(_BLOCK):
            fh.write(block)
            h.update(block)
            run.tick(len(block))


def _inside(root: Path, rel: str) -> Path:
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise IntegrityError(f"manifest path {rel!r} escapes the replica directory")
    return target

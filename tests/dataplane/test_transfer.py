"""Transfers and probes over real sockets on loopback: sha256-verified copy, resume after
interruption, corruption caught, Range semantics, data token, user-space RTT."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taugrid.agent.data import dataserver, probes
from taugrid.dataplane import manifest, transfer
from tests.hub.harness import free_port

HOST = "127.0.0.1"


@pytest.fixture
def replica(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "ds"
    (root / "sub").mkdir(parents=True)
    (root / "a.bin").write_bytes(os.urandom(3 * 2**20))
    (root / "sub" / "b.bin").write_bytes(os.urandom(2 * 2**20 + 17))
    (root / "empty").write_bytes(b"")
    return root


@pytest.fixture
def server(replica: Path) -> Iterator[dataserver.DataServer]:
    srv = dataserver.DataServer(replica.parent, [HOST], free_port(HOST), token="s3cret").start()
    srv.serve({"ds@v1": "ds"})
    yield srv
    srv.stop()


def _src(srv: dataserver.DataServer, token: str = "s3cret") -> transfer.Source:
    return transfer.Source(HOST, srv._servers[0][0].server_address[1], token=token)


def _same(a: Path, b: Path) -> bool:
    return manifest.scan(a) == manifest.scan(b)


def test_copy_verifies_every_file(
    server: dataserver.DataServer, replica: Path, tmp_path: Path
) -> None:
    files = manifest.scan(replica)
    res = transfer.fetch(_src(server), "ds@v1", files, tmp_path / "dst")
    assert res.bytes_fetched == res.bytes_total == manifest.total_size(files)
    assert _same(replica, tmp_path / "dst")
    again = transfer.fetch(_src(server), "ds@v1", files, tmp_path / "dst")
    assert again.bytes_fetched == 0 and again.bytes_resumed == res.bytes_total


def test_resume_after_interruption(
    server: dataserver.DataServer, replica: Path, tmp_path: Path
) -> None:
    files = manifest.scan(replica)
    stop = threading.Event()
    seen: list[int] = []

    def progress(done: int, _rate: float) -> None:
        seen.append(done)
        if done > 2**20:
            stop.set()

    with pytest.raises(transfer.TransferError):  # 8 MB/s: stopped after about 1 MB
        transfer.fetch(
            _src(server),
            "ds@v1",
            files,
            tmp_path / "dst",
            rate_limit_bps=8e6,
            on_progress=progress,
            stop=stop,
        )
    parts = list((tmp_path / "dst").rglob("*.part"))
    assert parts and parts[0].stat().st_size > 0
    on_disk = sum(p.stat().st_size for p in (tmp_path / "dst").rglob("*") if p.is_file())
    assert 0 < on_disk < manifest.total_size(files)
    res = transfer.fetch(_src(server), "ds@v1", files, tmp_path / "dst")
    assert res.bytes_resumed == on_disk
    assert res.bytes_fetched == res.bytes_total - on_disk
    assert _same(replica, tmp_path / "dst")
    assert not list((tmp_path / "dst").rglob("*.part"))


def test_corruption_is_caught_and_refetched(
    server: dataserver.DataServer, replica: Path, tmp_path: Path
) -> None:
    files = manifest.scan(replica)
    bad = [dict(f, sha256="0" * 64) if f["path"] == "a.bin" else f for f in files]
    with pytest.raises(transfer.IntegrityError):
        transfer.fetch(_src(server), "ds@v1", bad, tmp_path / "dst")
    assert not (tmp_path / "dst" / "a.bin").exists()
    assert not (tmp_path / "dst" / "a.bin.part").exists()
    transfer.fetch(_src(server), "ds@v1", files, tmp_path / "dst")
    assert _same(replica, tmp_path / "dst")


def test_range_token_and_confinement(server: dataserver.DataServer, replica: Path) -> None:
    port = server._servers[0][0].server_address[1]
    auth = {"Authorization": "Bearer s3cret"}
    with httpx.Client(base_url=f"http://{HOST}:{port}") as c:
        assert c.get("/v1/datasets/ds@v1/files/a.bin").status_code == 401
        r = c.get("/v1/datasets/ds@v1/files/a.bin", headers={**auth, "Range": "bytes=10-19"})
        assert r.status_code == 206 and r.content == (replica / "a.bin").read_bytes()[10:20]
        assert r.headers["Content-Range"] == f"bytes 10-19/{3 * 2**20}"
        r = c.get("/v1/datasets/ds@v1/files/a.bin", headers={**auth, "Range": "bytes=999999999-"})
        assert r.status_code == 416
        assert (
            c.get("/v1/datasets/ds@v1/files/..%2F..%2Fetc%2Fpasswd", headers=auth).status_code
            == 404
        )
        assert c.get("/v1/datasets/other@v1/files/a.bin", headers=auth).status_code == 404


def test_probe_measures_payload_throughput_and_user_space_rtt() -> None:
    port = free_port(HOST)
    srv = probes.ProbeServer([HOST], port, delays={HOST: 0.02}).start()
    try:
        m = probes.measure(HOST, port, pings=3, duration_s=0.4)
    finally:
        srv.stop()
    assert 19.0 <= m["rtt_ms"] <= 60.0
    assert m["throughput_mbps"] > 100  # loopback, unshaped
    assert m["loss_pct"] == 0.0  # every UDP echo comes back on loopback


def test_probe_loss_reads_the_emulated_loss_of_a_link() -> None:
    port = free_port(HOST)
    srv = probes.ProbeServer([HOST], port, delays={HOST: 0.005}, losses={HOST: 0.25}).start()
    try:
        lost = [probes.measure_loss(HOST, port, count=200, spacing_s=0.0005) for _ in range(2)]
    finally:
        srv.stop()
    assert all(12.0 <= pct <= 38.0 for pct in lost), lost  # 25 % ± sampling noise of 200


def test_probe_loss_is_total_when_nothing_echoes() -> None:
    port = free_port(HOST)  # nobody listens: every datagram is lost (ICMP errors ignored)
    assert probes.measure_loss(HOST, port, count=10, wait_s=0.3) == 100.0

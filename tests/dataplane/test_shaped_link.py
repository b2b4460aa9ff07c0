"""Probes and a transfer across a real shaped link: two network namespaces joined by a
veth pair with kernel ``tbf`` at 50 Mbit/s on both ends (needs root and ``ip``/``tc``).

The probe server and data server run in region ``a``'s namespace; the client side runs
in ``b``'s, from this process (``dataplane.netns``)."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.agent.data import dataserver, probes
from taugrid.dataplane import manifest, transfer
from taugrid.lab import net

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("tc"), reason="needs root and iproute2 (netns, tbf)"
)
MBIT = 50.0


@pytest.fixture(scope="module")
def link() -> Iterator[net.Net]:
    n = net.Net(f"tt{secrets.token_hex(2)}", ("a", "b"), (net.LinkSpec("a", "b", MBIT, 10.0),))
    with n.running():
        yield n
    assert not n.exists()


def test_probe_reads_the_shaped_rate_and_emulated_rtt(link: net.Net) -> None:
    a_addr = link.address("a", "b")
    srv = probes.ProbeServer([a_addr], 8870, link.ns("a"), {a_addr: 0.010}).start()
    try:
        m = probes.measure(a_addr, 8870, link.ns("b"), pings=3, duration_s=1.5)
    finally:
        srv.stop()
    assert 0.85 * MBIT <= m["throughput_mbps"] <= 1.05 * MBIT, m
    assert 10.0 <= m["rtt_ms"] <= 30.0, m


def test_transfer_reaches_85_percent_of_the_shaped_rate(link: net.Net, tmp_path: Path) -> None:
    (tmp_path / "a" / "ds").mkdir(parents=True)
    (tmp_path / "a" / "ds" / "blob").write_bytes(os.urandom(12 * 10**6))  # ~2 s at 50 Mbit/s
    a_addr = link.address("a", "b")
    srv = dataserver.DataServer(tmp_path / "a", [a_addr], 8871, link.ns("a")).start()
    srv.serve({"ds@v1": "ds"})
    try:
        files = manifest.scan(tmp_path / "a" / "ds")
        src = transfer.Source(a_addr, 8871, link.ns("b"))
        res = transfer.fetch(src, "ds@v1", files, tmp_path / "b" / "ds")
    finally:
        srv.stop()
    assert manifest.scan(tmp_path / "b" / "ds") == files
    assert res.rate_bps * 8 / 1e6 >= 0.85 * MBIT, res

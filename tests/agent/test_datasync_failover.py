"""The data plane's syncs fail over between hub replicas, as the agent's own syncs do.

A real hub server; the region's data agent is given two hub URLs, the first a replica
that is down (nothing listens there). Its data sync reaches the live one; with only the
dead URL it keeps what it had to report and says the sync failed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taugrid import huburls
from taugrid.agent.data import datasync
from taugrid.dataplane import wire
from tests.dataplane import test_data_api as api
from tests.hub.harness import HubServer


@pytest.fixture
def http(hub: HubServer) -> Iterator[httpx.Client]:
    api._agent(hub, "a", {})
    client = httpx.Client(timeout=10, headers={"Authorization": f"Bearer {hub.agent_token('a')}"})
    yield client
    client.close()


hub = api.hub


def _dead_url() -> str:
    """A loopback URL nothing listens on (a replica that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_data_sync_moves_to_the_replica_that_answers(
    hub: HubServer, http: httpx.Client, tmp_path: Path
) -> None:
    urls = huburls.Failover(f"{_dead_url()},{hub.url}")
    agent = datasync.DataAgent(http, "a", tmp_path / "root", {}, None, 0.2, hubs=urls)
    assert agent.step() is not None
    assert urls.current == hub.url  # later syncs go straight there


def test_data_sync_with_no_replica_up_keeps_its_report(
    hub: HubServer, http: httpx.Client, tmp_path: Path
) -> None:
    urls = huburls.Failover(_dead_url())
    agent = datasync.DataAgent(http, "a", tmp_path / "root", {}, None, 0.2, hubs=urls)
    scan = wire.ScanReport(dataset_id="ds@v1", files=[], size_bytes=0, sha256="0" * 64)
    agent._report(scans=[scan])
    assert agent.step() is None
    assert agent._out.scans == [scan]  # sent again with the next sync

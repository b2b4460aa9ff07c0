"""Peers announced by the hub: an agent's data-plane endpoint goes up in its state report,
the hub hands it to the other regions with the platform's egress price, and a region's
sidecar probes (and can fetch from) an announced peer at the first address it reaches.
Real hub server, real probe/data servers on loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid import payloads as wire
from taugrid.agent.data import datasync
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, free_port, make_hub

A_ADDRS = ["127.0.3.9", "127.0.3.1"]  # nothing listens on the first: it is skipped


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    text = PLATFORM.replace(
        "regions:\n  - name: a\n", "regions:\n  - name: a\n    egress_cost_per_gb: 0.05\n"
    )
    (tmp_path / "platform.yaml").write_text(text)
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml"))
    server.start()
    yield server
    server.stop()


def _sync(hub: HubServer, cluster: str, report: dict[str, Any] | None) -> dict[str, Any]:
    return ab.sync(hub, cluster, report)


def test_hub_announces_the_other_regions_with_their_egress_price(hub: HubServer) -> None:
    endpoint = {"addresses": A_ADDRS, "probe_port": 7001, "data_port": 7002}
    assert _sync(hub, "a", {"cluster_id": "a", "endpoint": endpoint})["peers"] == []
    reply = _sync(hub, "b", {"cluster_id": "b"})
    assert reply["peers"] == [{"region": "a", "egress_cost_per_gb": 0.05, **endpoint}]
    assert _sync(hub, "b", None)["peers"] == []  # only replies to full reports carry peers


def _sidecar(hub: HubServer, region: str, addr: str, tmp: Path) -> datasync.Sidecar:
    cfg = datasync.SidecarConfig(
        data_root=tmp / region,
        addresses=(addr,),
        probe_port=free_port(addr),
        data_port=free_port(addr),
        probe_interval_s=0.2,
        probe_duration_s=0.2,
    )
    return datasync.Sidecar(cfg, hub.url, hub.agent_token(region), region).start()


def test_a_sidecar_probes_and_sources_an_announced_peer(hub: HubServer, tmp_path: Path) -> None:
    a = _sidecar(hub, "a", A_ADDRS[1], tmp_path)
    b = _sidecar(hub, "b", "127.0.4.1", tmp_path)
    try:
        ep = a.endpoint().model_dump()
        _sync(hub, "a", {"cluster_id": "a", "endpoint": {**ep, "addresses": A_ADDRS}})
        peers = _sync(hub, "b", {"cluster_id": "b", "endpoint": b.endpoint().model_dump()})
        b.announce([wire.PeerEndpoint.model_validate(p) for p in peers["peers"]])
        deadline = time.monotonic() + 20
        while "a" not in b.probe_results() and time.monotonic() < deadline:
            time.sleep(0.1)
        probe = b.probe_results()["a"]
        assert probe["loss_pct"] == 0.0 and probe["throughput_mbps"] > 0
        assert probe["egress_cost_per_gb"] == 0.05
        src = b.data.peers["a"]
        assert (src.host, src.port) == (A_ADDRS[1], ep["data_port"])
        assert b.probe_results().keys() == {"a"}  # a region never probes itself
    finally:
        b.stop()
        a.stop()

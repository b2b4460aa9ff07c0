"""GPU utilisation and cross-region failure rate on the hub's Prometheus endpoint, read
back through the real server: utilisation per cluster and region from agent reports;
dataset transfers between regions that end well or fail (failovers between regions are
checked in test_lost_contact.py, where a run really moves)."""

from __future__ import annotations

from tests.dataplane.test_data_api import MB, _agent, _data_sync, _register, hub
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer

__all__ = ["hub"]  # the fixture


def test_transfer_outcomes_give_the_cross_region_failure_ratio(hub: HubServer) -> None:
    _agent(hub, "a", {})
    _agent(hub, "b", {})
    with hub.http() as c:
        _register(c, hub, size=10 * MB)
        for ok in (False, True):  # the first copy fails, the retry succeeds
            t = c.post("/v1/datasets/corpus/replicate", json={"to_region": "b"}).json()
            _data_sync(hub, "b", {})
            end = {"transfer_id": t["id"], "bytes_done": 10 * MB, "rate_bps": 1e6}
            end |= {"finished": True, "ok": ok, "error": "" if ok else "sha256 mismatch"}
            _data_sync(hub, "b", {"progress": [end]})
            metrics = c.get("/metrics").text
            failed = 'tau_cross_region_operations_total{kind="transfer",result="failed"} 1.0'
            assert failed in metrics
        assert 'tau_cross_region_operations_total{kind="transfer",result="ok"} 1.0' in metrics
        assert 'tau_cross_region_failure_ratio{kind="transfer"} 0.5' in metrics
        assert 'tau_cross_region_failure_ratio{kind="failover"} 0.0' in metrics


def test_gpu_utilisation_per_cluster_and_region(hub: HubServer) -> None:
    for cluster, busy in (("a", 3), ("b", 1)):
        ab.sync(hub, cluster, {"cluster_id": cluster, "gpu_busy": busy, "gpu_free": 4 - busy})
    with hub.http() as c:
        metrics = c.get("/metrics").text
    assert 'tau_cluster_gpu_utilization{cluster="a"} 0.75' in metrics
    assert 'tau_region_gpu_utilization{region="a"} 0.75' in metrics
    assert 'tau_region_gpu_utilization{region="b"} 0.25' in metrics

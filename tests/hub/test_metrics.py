"""The hub's Prometheus endpoint read back through the real server: GPU utilisation per
cluster and region from agent reports (allocation unless NVML measured it); run, node
and scheduling series with their run_id/workspace/region labels;
dataset transfers between regions that end well or fail (failovers between regions are
checked in test_lost_contact.py, where a run really moves)."""

from __future__ import annotations

import re
import time

import pytest

from tests.dataplane.test_data_api import MB, _agent, _data_sync, _register, hub
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer
from tests.observability import scene

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


def test_gpu_utilisation_per_cluster_and_region_is_labelled_as_allocation(
    hub: HubServer,
) -> None:
    for cluster, busy in (("a", 3), ("b", 1)):
        ab.sync(hub, cluster, {"cluster_id": cluster, "gpu_busy": busy, "gpu_free": 4 - busy})
    with hub.http() as c:
        metrics = c.get("/metrics").text
    assert 'tau_cluster_gpu_utilization{cluster="a",region="a",source="allocation"} 0.75' in metrics
    assert 'tau_region_gpu_utilization{region="a",source="allocation"} 0.75' in metrics
    assert 'tau_region_gpu_utilization{region="b",source="allocation"} 0.25' in metrics
    assert "source=allocation: share of GPUs allocated to jobs" in metrics  # the HELP says so


def test_measured_gpu_utilisation_is_nvml_only_on_real_gpus(hub: HubServer) -> None:
    measured = {"gpu_busy": 4, "gpu_free": 0, "gpu_utilization": 0.2}
    ab.sync(hub, "a", {"cluster_id": "a", "emulated_gpus": False, **measured})
    ab.sync(hub, "b", {"cluster_id": "b", "emulated_gpus": True, **measured})
    with hub.http() as c:
        metrics = c.get("/metrics").text
    assert 'tau_region_gpu_utilization{region="a",source="nvml"} 0.2' in metrics
    # an emulated GPU has no device to measure: whatever it claims, it is allocation
    assert 'tau_region_gpu_utilization{region="b",source="allocation"} 1.0' in metrics
    assert 'region="b",source="nvml"' not in metrics


def test_a_region_without_gpus_has_no_utilisation_rather_than_zero(hub: HubServer) -> None:
    ab.sync(hub, "a", {"cluster_id": "a", "gpu_busy": 0, "gpu_free": 0})
    ab.sync(hub, "b", {"cluster_id": "b", "gpu_busy": 0, "gpu_free": 4})
    with hub.http() as c:
        metrics = c.get("/metrics").text
    assert 'tau_region_gpu_utilization{region="a"' not in metrics  # would alert as "low"
    assert 'tau_region_gpu_utilization{region="b",source="allocation"} 0.0' in metrics


def test_runs_and_nodes_carry_run_workspace_and_region_labels(hub: HubServer) -> None:
    s = scene.build(hub)
    with hub.http() as c:
        metrics = c.get("/metrics").text
    run = f'region="{s.region}",run_id="{s.run_id}",workspace="default"'
    assert f"tau_run_progress_age_seconds{{{run}}}" in metrics
    assert f"tau_run_last_step{{{run}}} 10.0" in metrics
    assert f"tau_run_gpus{{{run}}} 2.0" in metrics
    assert 'tau_runs{state="running",workspace="default"} 1.0' in metrics
    placed = f'tau_scheduling_latency_seconds_count{{region="{s.region}",workspace="default"}} 1.0'
    assert placed in metrics
    assert "tau_scheduler_tick_seconds_count" in metrics
    node = f'cluster="{s.faulty_region}",node="{s.faulty_node}",reason="ecc"'
    assert f'tau_node_unhealthy{{{node},region="{s.faulty_region}"}} 1.0' in metrics
    assert f'tau_nodes{{cluster="{s.region}",health="unhealthy",region="{s.region}"}} 0.0' in (
        metrics
    )
    assert 'tau_link_utilization{dst="b",src="a"} 0.0' in metrics


def _progress_age(hub: HubServer, s: scene.Scene) -> float:
    with hub.http() as c:
        text = c.get("/metrics").text
    run = f'region="{s.region}",run_id="{s.run_id}",workspace="default"'
    m = re.search(rf"^tau_run_progress_age_seconds\{{{re.escape(run)}\}} (\S+)$", text, re.M)
    assert m, text
    return float(m[1])


def test_progress_age_grows_without_progress_and_restarts_at_a_metric(hub: HubServer) -> None:
    s = scene.build(hub)
    base = time.time()
    hub.hub.metrics.run_state.clock = lambda: base + 1000  # the seam: 1000 s later
    assert _progress_age(hub, s) >= 1000  # nothing since: a stall alert would see it
    metric = {"name": "loss", "value": 0.4, "step": 11, "wall_time": base + 995}
    running = {"token": s.token, "state": "running", "nodes": [f"{s.region}-n0"]}
    report = ab.report(s.region, 4, running_attempts=[s.token])
    ab.sync(hub, s.region, report, attempts=[{**running, "metrics": [metric]}])
    assert _progress_age(hub, s) == pytest.approx(5.0)

"""The data API through a real hub server: registry, replication budget, link matrix, and
explain-placement of a run that needs a dataset. Agents are played over HTTP with their
real tokens (the bytes themselves move in test_transfer.py and the lab test)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.hub import agent_builders as ab
from tests.hub import platform_builders as pb
from tests.hub.harness import HubServer, platform_hub

PLATFORM = pb.platform(
    {"a": 3.0, "b": 1.0},
    pb.TENANCY + "scheduling: {presets: {balanced: {data: 0.4, cost: 0.6}}}\n",
)

RUN = """\
schema_version: 1
name: {name}
run:
  entrypoint: train.py
compute:
  gpus: {gpus}
  cpus: 1
  memory: 1Gi
data:
  inputs: [{{dataset: corpus}}]
"""

MB = 10**6


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _agent(hub: HubServer, cluster: str, probes: dict[str, Any], gpus_free: float = 4) -> None:
    ab.sync(hub, cluster, ab.report(cluster, gpus_free, probes=probes))


def _data_sync(hub: HubServer, cluster: str, body: dict[str, Any]) -> dict[str, Any]:
    with hub.http(hub.agent_token(cluster)) as c:
        r = c.post(f"/v1/agents/{cluster}/data/sync", json=body)
        assert r.status_code == 200, r.text
        return dict(r.json())


def _register(c: httpx.Client, hub: HubServer, size: int = 250 * MB) -> None:
    r = c.post("/v1/datasets", json={"name": "corpus", "region": "a", "path": "corpus"})
    assert r.status_code == 201, r.text
    tasks = _data_sync(hub, "a", {})
    assert tasks["scans"] == [{"dataset_id": "corpus@v1", "path": "corpus"}]
    files = [{"path": "x.bin", "size": size, "sha256": "0" * 64}]
    scan = {"dataset_id": "corpus@v1", "files": files, "size_bytes": size, "sha256": "f" * 64}
    tasks = _data_sync(hub, "a", {"scans": [scan]})
    assert tasks["serve"] == [{"dataset_id": "corpus@v1", "path": "corpus"}]


def test_register_scan_list_and_errors(hub: HubServer) -> None:
    _agent(hub, "a", {})
    with hub.http() as c:
        _register(c, hub)
        (d,) = c.get("/v1/datasets").json()
        assert (d["id"], d["state"], d["size_bytes"], d["regions"]) == (
            "corpus@v1",
            "ready",
            250 * MB,
            ["a"],
        )
        again = c.post("/v1/datasets", json={"name": "corpus", "region": "a", "path": "x"})
        assert again.status_code == 400 and "already registered" in again.json()["detail"]
        bad = c.post("/v1/datasets", json={"name": "other", "region": "mars", "path": "x"})
        assert bad.status_code == 404 and "regions are: a, b" in bad.json()["hint"]
        assert c.get("/v1/datasets/nope").status_code == 404
    with hub.http(hub.agent_token("a")) as agent:
        assert agent.get("/v1/datasets").status_code == 403


def test_replication_reserves_the_link_and_queues_the_next(hub: HubServer) -> None:
    # b measures a->b at 100 Mbit/s: a 250 MB copy is estimated at 20 s.
    probes = {"a": {"throughput_mbps": 100.0, "rtt_ms": 2.0, "measured_at": time.time()}}
    _agent(hub, "a", {})
    _agent(hub, "b", probes)
    with hub.http() as c:
        _register(c, hub)
        c.post("/v1/datasets", json={"name": "second", "region": "a", "path": "s"})
        scan = {"dataset_id": "second@v1", "files": [], "size_bytes": 10, "sha256": "e" * 64}
        _data_sync(hub, "a", {"scans": [scan]})
        t1 = c.post("/v1/datasets/corpus/replicate", json={"to_region": "b"}).json()
        t2 = c.post("/v1/datasets/second/replicate", json={"to_region": "b"}).json()
        assert (t1["src_region"], t1["estimate_s"]) == ("a", 20.0)
        tasks = _data_sync(hub, "b", {})
        # the whole link (12.5 MB/s) goes to the first; the second queues behind it
        assert [t["transfer_id"] for t in tasks["transfers"]] == [t1["id"]]
        assert tasks["transfers"][0]["reserved_bps"] == 12.5e6
        assert tasks["transfers"][0]["rate_limit_bps"] is None
        states = {t["id"]: t["state"] for t in c.get("/v1/transfers").json()}
        assert states == {t1["id"]: "active", t2["id"]: "queued"}
        prog = {"transfer_id": t1["id"], "bytes_done": 125 * MB, "rate_bps": 12.0e6}
        _data_sync(hub, "b", {"progress": [prog]})
        (link,) = c.get("/v1/links").json()["links"]
        assert (link["src"], link["dst"], link["utilisation"]) == ("a", "b", 0.96)
        done = {**prog, "bytes_done": 250 * MB, "finished": True, "ok": True}
        tasks = _data_sync(hub, "b", {"progress": [done]})
        assert [t["transfer_id"] for t in tasks["transfers"]] == [t2["id"]]
        reps = {r["region"]: r["state"] for r in c.get("/v1/datasets/corpus/replicas").json()}
        assert reps == {"a": "complete", "b": "complete"}
        metrics = c.get("/metrics").text
        assert 'tau_link_throughput_mbps{dst="b",src="a"} 100.0' in metrics


def _explain(c: httpx.Client, name: str) -> dict[str, Any]:
    r = c.get(f"/v1/runs/{name}/placement")
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_explain_placement_by_estimated_transfer_time(hub: HubServer) -> None:
    # a holds corpus (250 MB) but costs 3/GPU-h and has 2 of 4 GPUs free;
    # b is 20 s away at 100 Mbit/s, costs 1 and is idle. Weights from PLATFORM
    # (data 0.4, cost 0.6), so a lower price can pay for a short move:
    #   a: .4*100 + .6*70 = 82.0      b: .4*75 + .6*90 = 84.0
    probes = {"a": {"throughput_mbps": 100.0, "rtt_ms": 0.0, "measured_at": time.time()}}
    _agent(hub, "a", {}, gpus_free=2)
    _agent(hub, "b", probes)
    with hub.http() as c:
        _register(c, hub)
        r = c.post("/v1/runs", json={"tau_yaml": RUN.format(name="needs-data", gpus=1)})
        assert r.status_code == 201, r.text
        deadline = time.time() + 20
        while c.get("/v1/runs/needs-data").json()["state"] in ("queued", "admitted"):
            assert time.time() < deadline
            time.sleep(0.2)
        doc = _explain(c, "needs-data")
        totals = {v["cluster_id"]: v["total"] for v in doc["verdicts"]}
        assert totals == {"a": 82.0, "b": 84.0}
        assert doc["cluster"] == "b"
        assert doc["data"]["b"]["seconds"] == pytest.approx(20.0)
        # a run too big for any cluster waits; its verdicts are computed now
        r = c.post("/v1/runs", json={"tau_yaml": RUN.format(name="too-big", gpus=4)})
        doc = _explain(c, "too-big")
        assert doc["source"].startswith("computed now")
        assert doc["data"]["b"]["seconds"] == 20.0 and doc["data"]["a"]["seconds"] == 0.0

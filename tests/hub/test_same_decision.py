"""The live hub and the simulator decide alike on the same snapshot.

Live: a real hub server; three agents register and post their state reports through
the real agent API (played over HTTP with their real tokens; no Ray needed), runs are
submitted through ``POST /v1/runs`` and the hub's scheduler thread places them.
Simulated: the same reports (plus the price the hub adds from platform.yaml) go
through ``snapshot.cluster_from_report`` — the one report → view translation both
shells use — and one ``cycle.schedule`` call, as a simulator replaying them would.
Both must give every run the same cluster and score breakdown, leave the same GPUs
free on the same nodes, and tell the run that fits nowhere the same reason.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.hub import scheduler
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap
from tests.hub.harness import HubServer, platform_hub

COST = {"a": 3.0, "b": 1.0, "c": 2.0}
FREE = {"a": [4, 2], "b": [1, 0], "c": [3, 4]}  # free GPUs per node (4 per node)

PLATFORM = (
    "schema_version: 1\ngpu_types: [{name: A100-80G}]\nregions:\n"
    + "".join(
        f"""  - name: {r}
    clusters:
      - name: {r}
        emulated_gpus: true
        node_pools: [{{name: p, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,
                      memory_per_node: 128Gi, nodes: 2, cost_per_gpu_hour: {cost}}}]
"""
        for r, cost in COST.items()
    )
    + """priority_classes: [{name: normal, value: 1000}]
profiles: [{name: default}]
teams: [{name: research, quotas: [{gpu_model: A100-80G, nominal: 64}]}]
workspaces: [{name: default, team: research, defaults: {priority: normal, profile: default}}]
default_workspace: default
"""
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
"""

# submitted in this order; the last finds no node with 4 GPUs left
RUNS = [("r1", 2), ("r2", 4), ("r3", 1), ("r4", 3), ("r5", 2), ("big", 4)]


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def report(cluster: str) -> dict[str, Any]:
    nodes = [
        {
            "node_id": f"{cluster}-n{i}",
            "gpu_model": "A100-80G",
            "gpus_total": 4,
            "gpus_free": free,
            "cpus_free": 16,
            "memory_free": 128 * 2**30,
            "alive": True,
        }
        for i, free in enumerate(FREE[cluster])
    ]
    return {"cluster_id": cluster, "nodes": nodes, "gpu_free": sum(FREE[cluster])}


def live(hub: HubServer) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each run's explain-placement document, and the waiting run's reason, from the hub."""
    for cluster in COST:
        with hub.http(hub.agent_token(cluster)) as c:
            r = c.post(
                f"/v1/agents/{cluster}/register", json={"cluster_id": cluster, "region": cluster}
            )
            assert r.status_code == 200, r.text
            r = c.post(f"/v1/agents/{cluster}/sync", json={"report": report(cluster)})
            assert r.status_code == 200, r.text
    with hub.http() as c:
        for name, gpus in RUNS:
            r = c.post("/v1/runs", json={"tau_yaml": RUN.format(name=name, gpus=gpus)})
            assert r.status_code == 201, r.text
        docs = {name: wait_decided(c, name) for name, _ in RUNS}
        explained = {name: c.get(f"/v1/runs/{name}/placement").json() for name, _ in RUNS}
    return explained, {n: d["reason"] for n, d in docs.items()}


def wait_decided(c: httpx.Client, name: str) -> dict[str, Any]:
    deadline = time.time() + 30
    while True:
        doc: dict[str, Any] = c.get(f"/v1/runs/{name}").json()
        if doc["state"] not in ("queued", "admitted") or "for capacity" in doc["reason"]:
            return doc
        assert time.time() < deadline, f"{name} still {doc['state']}: {doc['reason']}"
        time.sleep(0.1)


def simulated() -> tuple[list[cycle.Decision], dict[str, snap.ClusterView]]:
    """The simulator's path: the same reports → views → one cycle, reserving as it places."""
    views = tuple(
        snap.cluster_from_report(c, c, True, {**report(c), "cost_per_gpu_hour": COST[c]})
        for c in COST
    )
    quotas = (snap.QuotaView("research", "A100-80G", 64, 0),)
    runs = [
        snap.PendingRun(name, "research", 1000, float(i), 1, gpus, 1.0, float(2**30))
        for i, (name, gpus) in enumerate(RUNS)
    ]
    decisions = cycle.schedule(
        snap.Snapshot(time.time(), views, quotas), runs, cycle.default_policy()
    )
    after = {v.cluster_id: v for v in views}
    for run, d in zip(runs, decisions, strict=True):
        if d.cluster_id is not None:
            after[d.cluster_id] = cycle.reserve(run, after[d.cluster_id])
    return decisions, after


def test_simulator_and_live_hub_make_the_same_decisions(hub: HubServer) -> None:
    explained, reasons = live(hub)
    decisions, after = simulated()
    for d in decisions:
        doc = explained[d.run_id]
        assert doc["cluster"] == d.cluster_id, (d.run_id, reasons, doc)
        assert doc["verdicts"] == [dataclasses.asdict(v) for v in d.verdicts], d.run_id
        if d.outcome is cycle.Outcome.ADMITTED:
            assert reasons[d.run_id] == f"waiting for capacity: {d.reason}"
    placed = [d.run_id for d in decisions if d.outcome is cycle.Outcome.PLACED]
    assert placed == ["r1", "r2", "r3", "r4", "r5"]
    assert len({d.cluster_id for d in decisions if d.cluster_id}) > 1
    # the hub's own snapshot now (assigned attempts take room) holds the same free GPUs
    views = scheduler.build_snapshot(hub.hub, time.time()).clusters
    free = {v.cluster_id: [n.gpus_free for n in v.nodes] for v in views}
    assert free == {c: [n.gpus_free for n in v.nodes] for c, v in after.items()}

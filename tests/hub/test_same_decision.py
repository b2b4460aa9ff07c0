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

from taugrid import payloads as wire
from taugrid.hub.agents import agents
from taugrid.hub.placement import snapshot
from taugrid.hub.runs import runs
from taugrid.hub.server import scheduler
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap
from tests.hub.harness import HubServer, make_hub, platform_hub

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
# (name, workers, GPUs per worker) for the node-binding comparison
PAIRS = [("p1", 2, 1), ("p2", 1, 2), ("p3", 2, 2), ("p4", 1, 1)]


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


def simulated(
    shapes: list[tuple[str, int, int]] | None = None,
) -> tuple[list[cycle.Decision], dict[str, snap.ClusterView]]:
    """The simulator's path: the same reports → views → one cycle, taking each run on
    the nodes the cycle bound it to. ``shapes``: (name, workers, GPUs) of the runs."""
    views = tuple(
        snap.cluster_from_report(c, c, True, {**report(c), "cost_per_gpu_hour": COST[c]})
        for c in COST
    )
    quotas = (snap.QuotaView("research", "A100-80G", 64, 0),)
    runs = [
        snap.PendingRun(name, "research", 1000, float(i), workers, gpus, 1.0, float(2**30))
        for i, (name, workers, gpus) in enumerate(shapes or [(n, 1, g) for n, g in RUNS])
    ]
    decisions = cycle.schedule(
        snap.Snapshot(time.time(), views, quotas), runs, cycle.default_policy()
    )
    after = {v.cluster_id: v for v in views}
    for run, d in zip(runs, decisions, strict=True):
        if d.cluster_id is not None:
            after[d.cluster_id] = cycle.take(run, after[d.cluster_id], d.nodes)
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
    views = snapshot.build(hub.hub, time.time()).clusters
    free = {v.cluster_id: [n.gpus_free for n in v.nodes] for v in views}
    assert free == {c: [n.gpus_free for n in v.nodes] for c, v in after.items()}


def test_a_hub_tick_binds_the_nodes_the_simulator_binds(engine: sa.Engine, tmp_path: Path) -> None:
    """One hub tick over the real store (no scheduler thread: every run is pending in the
    same cycle, as in the simulated one) binds every worker to the simulator's node."""
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    hub = make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")
    for c in COST:
        agents.register(hub, wire.AgentRegister(cluster_id=c, region=c))
        agents.sync(hub, c, wire.AgentSync.model_validate({"report": report(c)}))
    ids = {}
    for name, workers, gpus in PAIRS:
        text = RUN.format(name=name, gpus=gpus).replace(
            "  cpus: 1", f"  workers: {workers}\n  cpus: 1"
        )
        ids[name] = runs.submit(hub, wire.SubmitRequest(tau_yaml=text), "admin")["id"]
    scheduler.tick(hub, cycle.policy_from(hub.platform.scheduling))
    decisions, _after = simulated(PAIRS)
    assert all(d.outcome is cycle.Outcome.PLACED for d in decisions)
    for d in decisions:
        (attempt,) = hub.runs.attempts_for_run(ids[d.run_id])
        assert attempt["cluster_id"] == d.cluster_id, d.run_id
        assert attempt["placement"]["nodes"] == list(d.nodes), d.run_id


def test_a_run_waiting_for_capacity_is_written_once(engine: sa.Engine, tmp_path: Path) -> None:
    """Two 4-GPU nodes are free: the third 4-GPU run waits, and the ticks after the one
    that told it so write nothing of it again (its reason, its phase, its events)."""
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    hub = make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")
    for c in COST:
        agents.register(hub, wire.AgentRegister(cluster_id=c, region=c))
        agents.sync(hub, c, wire.AgentSync.model_validate({"report": report(c)}))
    ids = [
        runs.submit(hub, wire.SubmitRequest(tau_yaml=RUN.format(name=f"w{i}", gpus=4)), "admin")[
            "id"
        ]
        for i in range(3)
    ]
    policy = cycle.policy_from(hub.platform.scheduling)
    scheduler.tick(hub, policy)
    told = hub.runs.get_run(ids[2])
    assert told is not None and told["reason"].startswith("waiting for capacity"), told
    events = hub.runs.events(ids[2])
    for _ in range(3):
        decisions = scheduler.tick(hub, policy)
        assert [d.run_id for d in decisions] == [ids[2]]
    again = hub.runs.get_run(ids[2])
    assert again is not None and again["updated_at"] == told["updated_at"]
    assert hub.runs.events(ids[2]) == events

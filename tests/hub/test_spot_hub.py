"""Spot pools through a real hub server (no Ray): platform.yaml's spot pool prices the
report, the agent's ``taugrid.io/pool`` label marks its nodes spot, a run's
``resilience.capacity`` decides which node it is bound to, its cost is charged at that
pool's price with the saving against on-demand, and tau.yaml asking for capacity the
platform does not sell is refused before anything is stored.

Cluster ``a`` is played over HTTP with its real agent token: one on-demand node and one
spot node, each reporting its pool.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.hub import agent_builders as ab
from tests.hub import platform_builders as pb
from tests.hub.harness import HubServer, platform_hub

PLATFORM = pb.one_cluster(
    "a",
    [
        "{name: od, gpu_model: A100-80G, gpus_per_node: 4, nodes: 1, cost_per_gpu_hour: 3.0}",
        "{name: sp, gpu_model: A100-80G, gpus_per_node: 4, nodes: 1, cost_per_gpu_hour: 0.9,"
        " capacity: spot, reclaims_per_hour: 0.1}",
    ],
)


def _node(name: str, pool: str) -> dict[str, Any]:
    node = ab.report("a")["nodes"][0]
    return {**node, "node_id": name, "pool": pool}


REPORT = {**ab.report("a", 8), "nodes": [_node("a-od", "od"), _node("a-sp", "sp")]}


def _run(name: str, resilience: str = "") -> str:
    text = ab.ONE_GPU_RUN.format(name=name)
    return text + (f"resilience:\n{resilience}" if resilience else "")


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        ab.sync(server, "a", REPORT)
        yield server


def _placed(hub: HubServer, name: str, resilience: str = "") -> tuple[dict[str, Any], Any]:
    """Submit, then sync until the hub assigns it: (the assignment, the run)."""
    with hub.http() as c:
        r = c.post("/v1/runs", json={"tau_yaml": _run(name, resilience), "filename": "tau.yaml"})
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        deadline = time.time() + 20
        while time.time() < deadline:
            reply = ab.sync(hub, "a", REPORT)
            for a in reply["assignments"]:
                if a["run_id"] == run_id:
                    return a, c.get(f"/v1/runs/{run_id}").json()
            time.sleep(0.1)
    raise AssertionError(f"run {run_id} was never assigned")


def test_the_report_is_priced_and_its_spot_nodes_marked_from_platform_yaml(
    hub: HubServer,
) -> None:
    with hub.http() as c:
        (row,) = c.get("/v1/clusters").json()
    report = row["report"]
    assert report["cost_per_gpu_hour"] == 3.0 and report["spot_cost_per_gpu_hour"] == 0.9
    assert report["reclaims_per_hour"] == pytest.approx(0.1, rel=1e-3)  # nothing seen yet
    assert {n["node_id"]: n["spot"] for n in report["nodes"]} == {"a-od": False, "a-sp": True}
    shown = hub.tau("cluster", "list")
    assert shown.returncode == 0, shown.stderr
    assert "$0.90/GPU-h, 0.1 reclaims/node-h (0 seen in 0.0 node-h)" in shown.stdout


def test_the_reclaim_rate_is_what_the_hub_saw_smoothed_by_platform_yamls_estimate(
    hub: HubServer,
) -> None:
    time.sleep(1.0)
    ab.sync(hub, "a", REPORT)  # the spot node seen alive a second more
    with hub.http() as c:
        r = c.post(
            "/v1/admin/nodes/fault",
            json={"cluster_id": "a", "node_id": "a-sp", "kind": "reclaim", "reason": "in 30s"},
        )
        assert r.status_code == 200, r.text
        again = c.post(  # the same notice again is not a second reclaim
            "/v1/admin/nodes/fault",
            json={"cluster_id": "a", "node_id": "a-sp", "kind": "reclaim", "reason": "in 30s"},
        )
        assert again.status_code == 200 and again.json()["new"] is False
        ab.sync(hub, "a", REPORT)
        (row,) = c.get("/v1/clusters").json()
    seen = row["report"]["reclaims_observed"]["sp"]
    assert seen["reclaims"] == 1 and 0 < seen["node_hours"] < 0.01
    # (1 seen + 0.1 x 24 node-hours of prior) / (~0 + 24 node-hours)
    assert row["report"]["reclaims_per_hour"] == pytest.approx(3.4 / 24, rel=0.01)


@pytest.mark.parametrize(
    ("capacity", "node"), [("spot", "a-sp"), ("on-demand", "a-od"), ("any", "a-sp")]
)
def test_a_run_is_bound_to_a_node_of_its_capacity(hub: HubServer, capacity: str, node: str) -> None:
    assignment, run = _placed(hub, f"cap-{capacity}", f"  capacity: {capacity}\n")
    assert assignment["nodes"] == [node]
    placement = run["attempts"][-1]["placement"]
    assert placement["capacity"] == ("on-demand" if node == "a-od" else "spot")
    # the agent is told, for backends that place their own pods (Kubernetes' pool affinity)
    assert assignment["capacity"] == placement["capacity"]


def test_a_spot_attempt_costs_the_spot_price_and_says_what_it_saved(hub: HubServer) -> None:
    assignment, run = _placed(hub, "cheap", "  capacity: spot\n")
    token = assignment["token"]
    ab.sync(hub, "a", REPORT, attempts=[{"token": token, "state": "running"}])
    time.sleep(1.0)
    ab.sync(hub, "a", REPORT, attempts=[{"token": token, "state": "succeeded", "released": True}])
    with hub.http() as c:
        cost = c.get(f"/v1/runs/{run['id']}/cost").json()
    (attempt,) = cost["attempts"]
    assert attempt["capacity"] == "spot" and attempt["price_per_gpu_hour"] == 0.9
    assert attempt["gpu_hours"] > 0
    assert cost["spot_saving"] == pytest.approx(attempt["gpu_hours"] * (3.0 - 0.9))
    shown = hub.tau("run", "status", run["id"])
    assert shown.returncode == 0, shown.stderr
    assert "less than on demand" in shown.stdout


@pytest.mark.parametrize(
    ("resilience", "said"),
    [
        ("  max_price: 2\n", "max_price applies to spot pools but capacity is on-demand"),
        ("  capacity: spot\n  max_price: 0.5\n", "raise resilience.max_price to at least 0.9"),
    ],
)
def test_capacity_the_platform_cannot_give_is_refused_at_submit(
    hub: HubServer, resilience: str, said: str
) -> None:
    with hub.http() as c:
        body = {"tau_yaml": _run("refused", resilience), "filename": "tau.yaml"}
        r = c.post("/v1/runs", json=body)
        assert r.status_code in (400, 422), r.text
        assert said in r.text
        assert "tau.yaml:" in r.text  # the line it comes from
        assert c.get("/v1/runs").json() == []


def test_a_platform_without_spot_pools_refuses_a_spot_run(
    engine: sa.Engine, tmp_path: Path
) -> None:
    plain = pb.platform({"a": 3.0}, pb.TENANCY)
    with platform_hub(engine, tmp_path, plain) as server, server.http() as c:
        body = {"tau_yaml": _run("nospot", "  capacity: spot\n"), "filename": "tau.yaml"}
        r = c.post("/v1/runs", json=body)
        assert r.status_code == 400, r.text
        assert "no spot node pool where the run may go" in r.text
        assert "set resilience.capacity: any" in r.text


SPOT_2 = {**ab.report("a", 12), "nodes": [*REPORT["nodes"], _node("a-sp2", "sp")]}
"""The cluster with a second spot node: a reclaimed run has spot capacity left."""


def _next(hub: HubServer, run_id: str, after: int) -> dict[str, Any] | None:
    """The run's next assignment after token ``after`` (None: the run is not placed)."""
    deadline = time.time() + 20
    while time.time() < deadline:
        for a in ab.sync(hub, "a", SPOT_2)["assignments"]:
            if a["run_id"] == run_id and a["token"] > after:
                return dict(a)
        time.sleep(0.1)
    return None


def _reclaim(hub: HubServer, assignment: dict[str, Any]) -> None:
    """The node's reclaim notice, then the agent's report that it stopped the job."""
    token, (node,) = assignment["token"], assignment["nodes"]
    running = {"token": token, "state": "running", "nodes": [node]}
    ab.sync(hub, "a", SPOT_2, attempts=[running])
    with hub.http() as c:
        body = {"cluster_id": "a", "node_id": node, "kind": "reclaim", "reason": "in 30s"}
        assert c.post("/v1/admin/nodes/fault", json=body).status_code == 200
    stopped = {"token": token, "state": "stopped", "released": True}
    ab.sync(hub, "a", SPOT_2, attempts=[stopped])


def _replaced(hub: HubServer, node: str) -> None:
    with hub.http() as c:
        body = {"cluster_id": "a", "node_id": node, "kind": "reclaim", "reason": ""}
        assert c.post("/v1/admin/nodes/clear", json=body).status_code == 200


@pytest.mark.parametrize("capacity", ["any", "spot"])
def test_past_max_restarts_an_any_run_goes_on_demand_and_a_spot_run_fails(
    hub: HubServer, capacity: str
) -> None:
    first, run = _placed(hub, f"max-{capacity}", f"  capacity: {capacity}\n  max_restarts: 1\n")
    assert first["nodes"] == ["a-sp"]
    _reclaim(hub, first)  # restart 1 of 1: on the other spot node
    second = _next(hub, run["id"], first["token"])
    assert second is not None and second["nodes"] == ["a-sp2"]
    _replaced(hub, "a-sp")  # spot capacity is back, yet the limit is reached
    _reclaim(hub, second)
    third = _next(hub, run["id"], second["token"])
    with hub.http() as c:
        after = c.get(f"/v1/runs/{run['id']}").json()
        events = c.get(f"/v1/runs/{run['id']}/events").json()
    said = "reclaimed 2 times, more than resilience.max_restarts (1)"
    if capacity == "any":
        assert third is not None and third["nodes"] == ["a-od"]
        assert third["capacity"] == "on-demand"
        (given_up,) = [e["payload"]["text"] for e in events if e["kind"] == "spot_given_up"]
        assert given_up.startswith(said)
    else:
        assert third is None
        assert after["state"] == "failed"
        assert said in after["reason"] and "set resilience.capacity: any" in after["reason"]


def test_max_restarts_with_on_demand_capacity_is_refused(hub: HubServer) -> None:
    with hub.http() as c:
        body = {"tau_yaml": _run("refused", "  max_restarts: 2\n"), "filename": "tau.yaml"}
        r = c.post("/v1/runs", json=body)
    assert r.status_code in (400, 422), r.text
    assert "max_restarts applies to spot pools but capacity is on-demand" in r.text

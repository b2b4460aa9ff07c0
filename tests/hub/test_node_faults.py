"""Fault marks and dead nodes on real Ray: the region stays usable and says what it can do.

A dedicated cluster (these tests cordon and kill nodes): the head on 127.0.0.232 and a
worker on 127.0.0.233, each with 4 emulated A100-80G, like the embedded platform — the
head holds GPUs, so it is a node runs land on and a node an admin may mark faulty.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HEAD, WORKER = "127.0.0.232", "127.0.0.233"
QUICK = "--steps 20 --checkpoint-every 10"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    c = rg.start_ray([HEAD, WORKER], tmp_path_factory.mktemp("ray-faults"))
    yield c
    c.stop()


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, cluster: ray_local.LocalRayCluster
) -> Iterator[HubServer]:
    tmp = tmp_path_factory.mktemp("faults-hub")
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp / "home")).start()
    agent = rg.AgentThread(server, cluster, tmp / "agent", expected_nodes=2, report_s=10.0)
    agent.start()
    with server.http() as c:  # marks name nodes the hub has heard of: wait for the report
        bh.wait_for(
            lambda: any(
                len(x["report"].get("nodes", [])) == 2 for x in c.get("/v1/clusters").json()
            ),
            timeout=120,
            what="the agent's first report",
        )
    yield server
    agent.stop()
    server.stop()
    engine.dispose()


def _local(c: httpx.Client) -> dict[str, Any]:
    return next(x for x in c.get("/v1/clusters").json() if x["id"] == "local")


def _head_gpus_free(cluster: ray_local.LocalRayCluster, head: str) -> float:
    inv = cluster.backend().inventory()
    return next(n.gpu_available for n in inv.nodes if n.node_id == head)


def _run_ok(c: httpx.Client, name: str) -> dict[str, Any]:
    run = rg.submit_run(c, rg.quickstart_yaml(QUICK, name=name, retries=0))
    done = rg.wait_run(c, run["id"], rg.finished, timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    return done


def test_fault_mark_on_the_head_keeps_the_region_usable(
    platform: HubServer, cluster: ray_local.LocalRayCluster
) -> None:
    head = cluster.node_ids()[0]
    with platform.http() as c:
        r = c.post(
            "/v1/admin/nodes/fault", json={"cluster_id": "local", "node_id": head, "kind": "ecc"}
        )
        assert r.status_code == 200, r.text
        bh.wait_for(
            lambda: _head_gpus_free(cluster, head) == 0, timeout=120, what="head's GPUs cordoned"
        )
        for i in range(2):  # the region still runs jobs, never on the faulty head
            done = _run_ok(c, f"after-fault-{i}")
            assert head not in done["attempts"][-1]["nodes"]
        report = _local(c)
        assert report["state"] == "ready", report["report"].get("health_reason")
        assert report["report"]["gpu_faulty"] == 4
        assert report["report"]["gpu_free"] + report["report"]["gpu_busy"] == 4
        clear = {"cluster_id": "local", "node_id": head, "kind": "cordon"}
        r = c.post("/v1/admin/nodes/clear", json=clear)
        assert r.status_code == 200, r.text
        bh.wait_for(
            lambda: _head_gpus_free(cluster, head) == 4, timeout=120, what="head's GPUs back"
        )
        bh.wait_for(
            lambda: _local(c)["report"]["gpu_free"] == 8, timeout=60, what="8 free GPUs reported"
        )
        _run_ok(c, "after-clear")


def _gpus(c: httpx.Client) -> tuple[float, float]:
    report = _local(c)["report"]
    return report["gpu_free"], report["gpu_busy"]


def test_cluster_capacity_agrees_with_the_runs(platform: HubServer) -> None:
    """Free/busy GPUs follow the runs at once (the agent's full report is every 10 s)."""
    with platform.http() as c:
        assert _gpus(c) == (8, 0)
        run = rg.submit_run(c, rg.quickstart_yaml("--steps 100000 --step-sleep 0.1", name="hog"))
        rg.wait_run(c, run["id"], lambda r: r["state"] == "running", timeout=120)
        assert _gpus(c) == (7, 1)
        r = c.post(f"/v1/runs/{run['id']}/cancel")
        assert r.status_code == 200, r.text
        rg.wait_run(c, run["id"], rg.finished, timeout=120)  # what `tau run cancel` waits for
        assert _gpus(c) == (8, 0)


def test_dead_nodes_make_the_region_degraded_then_unavailable(
    platform: HubServer, cluster: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    with platform.http() as c:
        cluster.kill_node(1)
        row = bh.wait_for(
            lambda: (x := _local(c))["state"] == "degraded" and x, timeout=120, what="degraded"
        )
        assert "1 of 2 Ray nodes down" in row["report"]["health_reason"]
        assert [n["alive"] for n in row["report"]["nodes"]] == [True, False]
        cluster.kill_node(0)  # the head: GCS, dashboard and job agent with it
        row = bh.wait_for(
            lambda: (x := _local(c))["state"] == "unavailable" and x,
            timeout=120,
            what="unavailable",
        )
        assert "Ray does not answer" in row["report"]["health_reason"]
        run = rg.submit_run(c, rg.quickstart_yaml(QUICK, name="nowhere", retries=0))
        queued = rg.wait_run(c, run["id"], lambda r: bool(r["reason"]), timeout=30)
        assert queued["state"] in ("queued", "admitted"), queued  # not placed on a dead region

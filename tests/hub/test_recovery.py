"""Recovery on real Ray: a node marked faulty and a node whose raylet dies mid-run.

A dedicated cluster (these tests drain and kill nodes): a CPU-only head on 127.0.0.13
and three nodes of 4 emulated A100-80G on 127.0.0.14-16. Each run must end on healthy
nodes, resumed from its latest checkpoint, with the lost work recorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.backends.ray import ray_local
from tests.hub import region as rg
from tests.hub.harness import HubServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    c = rg.start_cpu_head(
        ["127.0.0.13", "127.0.0.14", "127.0.0.15", "127.0.0.16"],
        tmp_path_factory.mktemp("ray-recovery"),
    )
    yield c
    c.stop()


@pytest.fixture
def platform(tmp_path: Path, cluster: ray_local.LocalRayCluster) -> Iterator[HubServer]:
    with rg.hub_and_agent(tmp_path, cluster) as server:
        yield server


def _running_with_checkpoint(run: dict[str, Any]) -> bool:
    a = run["attempts"][-1] if run["attempts"] else None
    return bool(a and a["state"] == "running" and a["nodes"] and (a["checkpoint_step"] or 0) >= 20)


SLOW = "--steps 150 --checkpoint-every 20 --step-sleep 0.08"


def test_node_marked_faulty_moves_the_run_and_resumes(platform: HubServer) -> None:
    with platform.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml(SLOW, name="faulty"))
        live = rg.wait_run(c, run["id"], _running_with_checkpoint, timeout=120)
        bad = live["attempts"][-1]["nodes"][0]
        r = c.post(
            "/v1/admin/nodes/fault", json={"cluster_id": "local", "node_id": bad, "kind": "ecc"}
        )
        assert r.status_code == 200, r.text
        done = rg.wait_run(c, run["id"], rg.finished, timeout=180)
    assert done["state"] == "succeeded", done["reason"]
    first, last = done["attempts"][0], done["attempts"][-1]
    assert first["failure_kind"] == "node_failure" and "faulty" in first["reason"]
    assert bad not in last["nodes"]
    assert last["resumed_from"] and "step-" in last["resumed_from"]
    assert rg.phases(done)["gpu_healthy"] == "done"


def test_raylet_killed_mid_run_retries_from_checkpoint(
    platform: HubServer, cluster: ray_local.LocalRayCluster
) -> None:
    with platform.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml(SLOW, name="killed"))
        live = rg.wait_run(c, run["id"], _running_with_checkpoint, timeout=120)
        victim = live["attempts"][-1]["nodes"][0]
        cluster.kill_node(victim)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
        events = c.get(f"/v1/runs/{run['id']}/events").json()
    assert done["state"] == "succeeded", done["reason"]
    first, last = done["attempts"][0], done["attempts"][-1]
    assert first["failure_kind"] == "node_failure", first["reason"]
    assert victim not in last["nodes"]
    assert last["resumed_from"]
    lost = [e["payload"] for e in events if e["kind"] == "lost_work"]
    assert lost and lost[0]["lost_steps"] is not None and lost[0]["lost_steps"] < 20 + 5

"""Lost contact on real Ray: two regions, one agent goes silent; never run twice.

Regions ``east`` (cheaper, so runs go there first: the platform's default objective is
``cost``) and ``west``, each a one-node Ray
cluster with 4 emulated A100-80G. Lease 2 s, grace 8 s. A silence shorter than the
grace leaves the attempt alone; a longer one revokes it and re-places the run in
``west`` from its checkpoint, and the revoked attempt can no longer write.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.backends.ray import ray_local
from taugrid.hub.runs import runs
from taugrid.store import db
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PLATFORM = pb.platform(
    {"east": 1.0, "west": 3.0}, pb.TENANCY + "scheduling: {default_objective: cost}\n"
)


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, ray_local.LocalRayCluster]]:
    regions = rg.start_regions(
        {"east": "127.0.0.50", "west": "127.0.0.51"}, tmp_path_factory.mktemp("regions")
    )
    yield regions
    rg.stop_regions(regions)


@pytest.fixture
def hub(tmp_path: Path, clusters: dict[str, ray_local.LocalRayCluster]) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(
        make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", lease_s=2.0, grace_s=8.0)
    )
    yield server.start()
    server.stop()
    engine.dispose()


def _agent(
    hub: HubServer, clusters: dict[str, ray_local.LocalRayCluster], name: str, tmp: Path
) -> rg.AgentThread:
    return rg.AgentThread(hub, clusters[name], tmp / f"agent-{name}", cluster_id=name).start()


def _wait_uploaded(hub: HubServer, run_id: str, timeout: float = 30.0) -> None:
    """Until the run's record store holds a complete checkpoint (jobs write to their
    agent's scratch; the agent uploads every second)."""
    deadline = time.time() + timeout
    while runs.latest_checkpoint(hub.hub, hub.hub.runs.get_run(run_id) or {}) is None:
        assert time.time() < deadline, "no checkpoint reached the record store"
        time.sleep(0.2)


def _on_east_with_checkpoint(run: dict[str, object]) -> bool:
    attempts = run["attempts"]
    assert isinstance(attempts, list)
    a = attempts[-1] if attempts else None
    return bool(
        a
        and a["cluster_id"] == "east"
        and a["state"] == "running"
        and (a["checkpoint_step"] or 0) >= 20
    )


SLOW = "--steps 120 --checkpoint-every 20 --step-sleep 0.1"


def test_short_partition_changes_nothing(
    hub: HubServer, clusters: dict[str, ray_local.LocalRayCluster], tmp_path: Path
) -> None:
    east, west = _agent(hub, clusters, "east", tmp_path), _agent(hub, clusters, "west", tmp_path)
    try:
        with hub.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml(SLOW, name="short"))
            rg.wait_run(c, run["id"], _on_east_with_checkpoint, timeout=120)
            east.stop()  # silence, shorter than the grace period
            deadline = time.time() + 10
            while hub.hub.clusters.get("east")["state"] != "unknown":  # type: ignore[index]
                assert time.time() < deadline, "east never became Unknown"
                time.sleep(0.2)
            assert len(c.get(f"/v1/runs/{run['id']}").json()["attempts"]) == 1
            east = _agent(hub, clusters, "east", tmp_path)
            done = rg.wait_run(c, run["id"], rg.finished, timeout=120)
        assert done["state"] == "succeeded" and len(done["attempts"]) == 1
        assert hub.hub.clusters.get("east")["state"] == "ready"  # type: ignore[index]
    finally:
        east.stop()
        west.stop()


def test_long_partition_moves_the_run_and_fences_the_old_attempt(
    hub: HubServer, clusters: dict[str, ray_local.LocalRayCluster], tmp_path: Path
) -> None:
    east, west = _agent(hub, clusters, "east", tmp_path), _agent(hub, clusters, "west", tmp_path)
    try:
        with hub.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml(SLOW, name="long"))
            rg.wait_run(c, run["id"], _on_east_with_checkpoint, timeout=120)
            _wait_uploaded(hub, run["id"])  # the agent uploads scratch within its upload lag
            east.stop()  # silence, longer than the grace period
            moved = rg.wait_run(c, run["id"], lambda r: len(r["attempts"]) == 2, timeout=60)
            first = moved["attempts"][0]
            assert first["revoked"] and first["failure_kind"] == "lost_contact"
            assert moved["attempts"][1]["cluster_id"] == "west"
            east = _agent(hub, clusters, "east", tmp_path)  # the region comes back
            done = rg.wait_run(c, run["id"], rg.finished, timeout=180)
            events = c.get(f"/v1/runs/{run['id']}/events").json()
            metrics = c.get("/metrics").text
        assert done["state"] == "succeeded"
        # east and west are regions of their own: the move counts as a cross-region failover
        assert 'tau_cross_region_operations_total{kind="failover",result="ok"} 1.0' in metrics
        assert 'tau_cross_region_failure_ratio{kind="failover"} 0.0' in metrics
        assert done["attempts"][1]["resumed_from"], "the new attempt resumes from a checkpoint"
        old = done["attempts"][0]
        assert old["state"] in ("stopped", "failed") and old["released"]
        assert not any(
            e["kind"] == "attempt_succeeded" and e["payload"]["token"] == old["token"]
            for e in events
        )
        assert clusters["east"].backend().status(old["submission_id"]).state.terminal
    finally:
        east.stop()
        west.stop()

"""``resilience.max_runtime`` on the live path: real hub, agent and Ray cluster.

A run whose attempt keeps running past its limit is stopped by the hub: it ends Failed
with kind ``timeout`` (not retried, though retries are left), its Ray job is stopped,
its quota is released and its GPUs come back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[tuple[HubServer, ray_local.LocalRayCluster]]:
    cluster = rg.start_ray(["127.0.0.73"], tmp_path / "ray")
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home")).start()
    agent = rg.AgentThread(server, cluster, tmp_path / "agent").start()
    try:
        yield server, cluster
    finally:
        agent.stop()
        server.stop()
        engine.dispose()
        cluster.stop()


def test_max_runtime_fails_the_run_as_timeout_and_releases_everything(
    platform: tuple[HubServer, ray_local.LocalRayCluster],
) -> None:
    server, cluster = platform
    # ~80 s of work, 2 retries left, but a 6 s limit
    text = rg.quickstart_yaml("--steps 400 --step-sleep 0.2").replace(
        "resilience:\n", "resilience:\n  max_runtime: 6s\n"
    )
    with server.http() as c:
        run = rg.submit_run(c, text)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=150)
    assert done["state"] == "failed", done["reason"]
    assert len(done["attempts"]) == 1, "a timeout is not retried"
    (attempt,) = done["attempts"]
    assert attempt["failure_kind"] == "timeout" and attempt["released"]
    assert done["reason"] == (
        "timeout: attempt 1 ran longer than resilience.max_runtime (6s); stopped"
    )
    assert server.hub.runs.quota_usage() == {}
    backend = cluster.backend()
    try:
        status = backend.status(attempt["submission_id"])
    finally:
        backend.close()
    assert status.state.value == "STOPPED", status  # the hub had Ray stop the job

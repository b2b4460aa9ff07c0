"""Runtime pre-warm, hub side, through a real hub server: prepare hints for a queued run's
likely cluster, and agents' runtime statuses as run events and the Scheduled reason.
Agents are played over HTTP with their real tokens (the real agent and Ray builds are
in tests/agent/test_prewarm.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.hub.placement import prewarm
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub

RUN = """\
schema_version: 1
name: pw
run:
  entrypoint: train.py
compute:
  gpus: 4
  cpus: 1
  memory: 1Gi
runtime:
  pip: ["termcolor==2.4.0"]
"""


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setattr(prewarm, "HINT_TTL_S", 0.0)  # every sync sees the latest hints
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _sync(hub: HubServer, cluster: str, gpus_free: float, **body: Any) -> dict[str, Any]:
    return ab.sync(hub, cluster, ab.report(cluster, gpus_free, **body.pop("r", {})), **body)


def _wait(c: httpx.Client, run_id: str, state: str) -> dict[str, Any]:
    deadline = time.time() + 20
    run: dict[str, Any] = c.get(f"/v1/runs/{run_id}").json()
    while run["state"] != state:
        assert time.time() < deadline, f"run stayed {run['state']}: {run['reason']}"
        time.sleep(0.1)
        run = c.get(f"/v1/runs/{run_id}").json()
    return run


def test_queued_run_hints_its_likely_cluster_until_the_runtime_is_warm(hub: HubServer) -> None:
    # Both clusters are full. With every GPU free both fit; idle GPUs score alike and
    # b is cheaper (1 vs 3 per GPU-hour), so b is where the run will likely go.
    _sync(hub, "a", 0)
    _sync(hub, "b", 0)
    with hub.http() as c:
        run = c.post("/v1/runs", json={"tau_yaml": RUN}).json()
        _wait(c, run["id"], "admitted")
        hint_b = _sync(hub, "b", 0)["prepare"]
        hint_a = _sync(hub, "a", 0)["prepare"]
        (hint,) = hint_b
        assert hint["pip"] == ["termcolor==2.4.0"] and hint["run_ids"] == [run["id"]]
        assert hint_a == []
        ready = {
            "key": hint["key"],
            "state": "ready",
            "pip": hint["pip"],
            "run_ids": [run["id"]],
            "seconds": 12.5,
        }
        after = _sync(hub, "b", 0, runtimes=[ready], r={"cached_runtimes": [hint["key"]]})
        events = c.get(f"/v1/runs/{run['id']}/events").json()
    assert after["prepare"] == []  # warm there now: nothing more to prepare
    (ev,) = [e for e in events if e["kind"] == "runtime_ready"]
    assert ev["payload"]["seconds"] == 12.5 and ev["payload"]["cluster"] == "b"


def test_placed_run_shows_its_runtime_preparation_in_the_scheduled_phase(hub: HubServer) -> None:
    _sync(hub, "a", 0)
    with hub.http() as c:
        run = c.post("/v1/runs", json={"tau_yaml": RUN}).json()
        _sync(hub, "b", 4)
        _wait(c, run["id"], "placed")
        preparing = {"key": "k1", "state": "preparing", "pip": ["termcolor==2.4.0"]}
        _sync(hub, "b", 0, runtimes=[{**preparing, "run_ids": [run["id"]]}])
        status = c.get(f"/v1/runs/{run['id']}").json()
        failed = {**preparing, "state": "failed", "message": "pip requirement 'x' could not"}
        _sync(hub, "b", 0, runtimes=[{**failed, "run_ids": [run["id"]]}])
        events = [e["kind"] for e in c.get(f"/v1/runs/{run['id']}/events").json()]
    (sched,) = [p for p in status["phases"] if p["phase"] == "scheduled"]
    assert sched["status"] == "active"
    assert sched["reason"] == "preparing runtime (pip: termcolor==2.4.0) on b before submitting"
    assert events.count("runtime_preparing") == 1 and events.count("runtime_failed") == 1

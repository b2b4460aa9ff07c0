"""The hub never double-books GPUs while Ray's resource view lags a running job.

A real hub server; cluster ``a`` (one 4-GPU node) is played over HTTP with its real
agent token. Its reports keep showing the node's GPUs free after the first run is
running (Ray's view lagging the job), yet the second run must wait until the first
attempt is released.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub
from tests.hub.test_same_decision import RUN


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _run(c: httpx.Client, run_id: str) -> dict[str, Any]:
    return dict(c.get(f"/v1/runs/{run_id}").json())


def _wait(c: httpx.Client, run_id: str, ok: Any, what: str) -> dict[str, Any]:
    deadline = time.time() + 20
    run = _run(c, run_id)
    while not ok(run):
        assert time.time() < deadline, f"{what}: run is {run['state']} ({run['reason']})"
        time.sleep(0.1)
        run = _run(c, run_id)
    return run


def test_a_running_attempt_holds_its_gpus_though_the_report_shows_them_free(
    hub: HubServer,
) -> None:
    ab.sync(hub, "a", ab.report("a", 4))
    with hub.http() as c:
        first = c.post("/v1/runs", json={"tau_yaml": RUN.format(name="first", gpus=4)}).json()
        _wait(c, first["id"], lambda r: r["state"] == "placed", "first placed")
        (assignment,) = ab.sync(hub, "a", ab.report("a", 4))["assignments"]
        running = {"token": assignment["token"], "state": "running", "nodes": ["a-n0"]}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[running])
        _wait(c, first["id"], lambda r: r["state"] == "running", "first running")
        for _ in range(3):  # later reports: Ray's view still lags, the GPUs look free
            ab.sync(hub, "a", ab.report("a", 4, running_attempts=[assignment["token"]]))
        second = c.post("/v1/runs", json={"tau_yaml": RUN.format(name="second", gpus=4)}).json()
        seen = lambda r: r["reason"] != "" or r["state"] == "placed"  # noqa: E731
        waiting = _wait(c, second["id"], seen, "second considered")
        for _ in range(3):
            ab.sync(hub, "a", ab.report("a", 4, running_attempts=[assignment["token"]]))
            time.sleep(0.3)  # scheduler ticks meanwhile
        still = _run(c, second["id"])
        done = {**running, "state": "succeeded", "exit_code": 0, "released": True}
        ab.sync(hub, "a", ab.report("a", 4), attempts=[done])
        placed = _wait(c, second["id"], lambda r: r["state"] == "placed", "second placed")
    assert waiting["state"] in ("queued", "admitted"), waiting
    assert still["state"] in ("queued", "admitted"), still
    assert placed["attempts"][0]["cluster_id"] == "a"

"""Sweeps on a real hub server (no Ray: tests/hub/test_sweeps_ray.py runs one on real Ray):
trials are runs admitted under the workspace's quota, at most ``parallel`` unfinished,
the median rule stops the ones that fall behind, the leaderboard ranks them, cancel
stops all, and a hub restarted mid-sweep goes on without submitting a trial twice.

Cluster ``a`` is played over HTTP with its real agent token: each trial reports its
loss points while running; a good trial then succeeds, a bad one runs on until the
sweep stops it (the hub's stop order, answered "stopped").
"""

from __future__ import annotations

import json
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

PLATFORM = pb.platform({"a": 3.0}, pb.TENANCY.replace("nominal: 8", "nominal: 2"))
"""One region; the workspace's quota admits 2 one-GPU runs at a time."""

LRS = [0.5, 0.4, 9.0, 0.3, 9.5, 0.2]
"""Trial i's lr; its loss is 10*lr at step 1 and 5*lr at step 2: 9.0 and 9.5 fall behind."""

SWEEP = (
    ab.ONE_GPU_RUN.format(name="sw")
    + f"""\
sweep:
  parameters:
    lr: {{values: {json.dumps(LRS)}}}
  parallel: 3
  metric: {{name: loss, mode: min}}
  early_stop: {{rule: median, min_trials: 2, grace_steps: 2}}
"""
)


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


class Agent:
    """Cluster ``a`` played over HTTP: runs each assignment as the test's trial would."""

    def __init__(self) -> None:
        self.running: dict[int, dict[str, Any]] = {}  # token -> assignment
        self.reported: set[int] = set()
        self.max_running = 0

    def sync(self, hub: HubServer) -> None:
        attempts = []
        for token, a in list(self.running.items()):
            lr = json.loads(a["spec"]["env"]["TAU_PARAMS"])["lr"]
            if token not in self.reported:  # its loss points, while running
                self.reported.add(token)
                points = [{"name": "loss", "value": 10 * lr, "step": 1}]
                points.append({"name": "loss", "value": 5 * lr, "step": 2})
                attempts.append(
                    {"token": token, "state": "running", "metrics": points, "metric_ends": [1, 2]}
                )
            elif lr < 1:  # a good trial ends well
                attempts.append({"token": token, "state": "succeeded", "released": True})
                del self.running[token]
        reply = ab.sync(hub, "a", ab.report("a", 4 - len(self.running)), attempts=attempts)
        for stop in reply["stop"]:
            self.running.pop(stop["token"], None)
            ab.sync(
                hub, "a", attempts=[{"token": stop["token"], "state": "stopped", "released": True}]
            )
        for a in reply["assignments"]:
            if a["token"] not in self.running and a["token"] not in self.reported:
                self.running[a["token"]] = a
        self.max_running = max(self.max_running, len(self.running))


def _play(
    hub: HubServer, c: httpx.Client, sweep_id: str, agent: Agent, until: Any
) -> dict[str, Any]:
    deadline = time.time() + 60
    most_unfinished = 0
    while True:
        sw = c.get(f"/v1/sweeps/{sweep_id}").json()
        unfinished = sum(
            1 for t in sw["trials"] if t["state"] not in ("succeeded", "failed", "cancelled")
        )
        most_unfinished = max(most_unfinished, unfinished)
        if until(sw):
            return {**sw, "most_unfinished": most_unfinished}
        assert time.time() < deadline, sw
        agent.sync(hub)
        time.sleep(0.1)


def _submit(c: httpx.Client, text: str = SWEEP) -> dict[str, Any]:
    r = c.post("/v1/sweeps", json={"tau_yaml": text})
    assert r.status_code == 201, r.text
    return dict(r.json())


def test_trials_run_under_the_quota_the_median_rule_stops_the_laggards_and_the_best_leads(
    hub: HubServer,
) -> None:
    agent = Agent()
    with hub.http() as c:
        sw = _submit(c)
        done = _play(hub, c, sw["id"], agent, lambda s: s["state"] != "running")
        trial = c.get(f"/v1/runs/{sw['id']}-t5").json()
    assert done["state"] == "succeeded", done["reason"]
    assert done["submitted"] == 6 and done["budget"] == 6
    assert agent.max_running <= 2  # the quota: 2 GPUs
    assert done["most_unfinished"] <= 3  # parallel: 3
    board = done["trials"]
    assert [t["params"]["lr"] for t in board[:4]] == [0.2, 0.3, 0.4, 0.5]
    assert board[0]["best"] == pytest.approx(1.0) and board[0]["best_step"] == 2
    stopped = {t["params"]["lr"]: t for t in board if t["stopped"]}
    assert set(stopped) == {9.0, 9.5}, board
    assert all(
        "median rule" in t["stopped"] and t["state"] == "cancelled" for t in stopped.values()
    )
    assert "6 trials: 4 succeeded, 2 stopped early" in done["reason"]
    # every trial is an ordinary run of the workspace, with its parameters as arguments
    assert trial["spec"]["args"][-1] == "--lr=0.2"
    assert json.loads(trial["spec"]["env"]["TAU_PARAMS"]) == {"lr": 0.2}


def test_a_dry_run_lists_the_trials_and_a_run_submission_of_a_sweep_is_refused(
    hub: HubServer,
) -> None:
    with hub.http() as c:
        r = c.post("/v1/sweeps", json={"tau_yaml": SWEEP, "dry_run": True})
        assert r.status_code == 201, r.text
        assert r.json()["budget"] == 6 and r.json()["trials"][2] == {"lr": 9.0}
        r = c.post("/v1/runs", json={"tau_yaml": SWEEP})
        assert r.status_code == 400 and "tau sweep submit" in r.json()["hint"], r.text
        bad = SWEEP.replace("parallel: 3", "parallel: 0")
        r = c.post("/v1/sweeps", json={"tau_yaml": bad})
        assert r.status_code == 422, r.text
        (problem,) = r.json()["problems"]
        assert problem["line"] == SWEEP.splitlines().index("  parallel: 3") + 1, problem
        assert c.get("/v1/sweeps").json() == []


def test_cancel_stops_every_unfinished_trial_and_submits_no_more(hub: HubServer) -> None:
    agent = Agent()
    with hub.http() as c:
        sw = _submit(c, SWEEP.replace("[0.5, 0.4,", "[9.1, 9.2,"))  # two that never finish
        _play(hub, c, sw["id"], agent, lambda s: s["counts"].get("running", 0) == 2)
        out = c.post(f"/v1/sweeps/{sw['id']}/cancel").json()
        assert out["state"] == "cancelled"
        done = _play(hub, c, sw["id"], agent, lambda s: set(s["counts"]) == {"cancelled"})
    assert done["submitted"] == 3, done["trials"]  # parallel 3: none after the cancel


def test_a_hub_restarted_mid_sweep_goes_on_and_submits_no_trial_twice(
    engine: sa.Engine, tmp_path: Path
) -> None:
    agent = Agent()
    with platform_hub(engine, tmp_path, PLATFORM) as hub, hub.http() as c:
        sw = _submit(c)
        _play(hub, c, sw["id"], agent, lambda s: s["counts"].get("succeeded", 0) >= 2)
    with platform_hub(engine, tmp_path, PLATFORM) as hub, hub.http() as c:
        done = _play(hub, c, sw["id"], agent, lambda s: s["state"] != "running")
        runs = [r["id"] for r in c.get("/v1/runs").json()]
    assert done["state"] == "succeeded" and done["submitted"] == 6
    assert sorted(runs) == sorted(f"{sw['id']}-t{i}" for i in range(6))

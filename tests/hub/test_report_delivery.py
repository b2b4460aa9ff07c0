"""Attempt reports through a real hub: each log character and metric point stored once,
a hole named, and a hub back from a long outage that does not blame the cluster.

The hub server is real; cluster ``a`` is played over HTTP with its real agent token,
sending what a real agent sends after a lost answer (the same report again, coalesced
with what came since: ``agent.outbox``) and after a restart (reading on from the
offsets its assignment carries).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.store import schema
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, make_hub, platform_hub


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _running(hub: HubServer, c: httpx.Client) -> dict[str, Any]:
    """Submit a run and play its attempt to ``running``; returns the assignment."""
    r = c.post("/v1/runs", json={"tau_yaml": ab.ONE_GPU_RUN.format(name="steps")})
    assert r.status_code == 201, r.text
    deadline = time.time() + 30
    while not (got := ab.sync(hub, "a", ab.report("a", 4))["assignments"]):
        assert time.time() < deadline, "no assignment"
        time.sleep(0.1)
    a = dict(got[0])
    ab.sync(hub, "a", ab.report("a", 3), attempts=[_rep(a, state="running")])
    return a


def _rep(a: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"token": a["token"], "state": "running", "submission_id": f"s{a['token']}", **kw}


def _points(step: int, end: int) -> dict[str, Any]:
    return {"metrics": [{"name": "loss", "value": 1.0, "step": step}], "metric_ends": [end]}


def test_a_report_sent_again_is_stored_once_and_a_restart_reads_on(hub: HubServer) -> None:
    with hub.http() as c:
        a = _running(hub, c)
        first = _rep(a, log_chunk="line 0\n", log_from=0, metrics_to=40, **_points(0, 40))
        ab.sync(hub, "a", attempts=[first])
        # its answer was lost: the agent sends it again, coalesced with the next one
        both = _rep(
            a,
            log_chunk="line 0\nline 1\n",
            log_from=0,
            metrics=[*first["metrics"], {"name": "loss", "value": 0.5, "step": 1}],
            metric_ends=[40, 80],
            metrics_to=80,
        )
        reply = ab.sync(hub, "a", attempts=[both])
        logs = c.get(f"/v1/runs/{a['run_id']}/logs").json()["text"]
        steps = [m["step"] for m in c.get(f"/v1/runs/{a['run_id']}/metrics").json()]
        detail = c.get(f"/v1/runs/{a['run_id']}").json()
    assert logs == "line 0\nline 1\n" and steps == [0, 1]
    assert detail["gaps"] == []
    # a restarted agent re-attaches from what the hub has, not from its own state
    (mine,) = [x for x in reply["assignments"] if x["token"] == a["token"]]
    assert (mine["log_offset"], mine["metrics_offset"]) == (14, 80)


def test_text_that_never_arrived_is_shown_as_missing(hub: HubServer) -> None:
    with hub.http() as c:
        a = _running(hub, c)
        ab.sync(hub, "a", attempts=[_rep(a, log_chunk="line 0\n", log_from=0)])
        ab.sync(hub, "a", attempts=[_rep(a, log_chunk="line 9\n", log_from=63)])
        detail = c.get(f"/v1/runs/{a['run_id']}").json()
        logs = c.get(f"/v1/runs/{a['run_id']}/logs").json()["text"]
    assert logs == "line 0\nline 9\n"
    (gap,) = detail["gaps"]
    assert (gap["attempt"], gap["from"], gap["to"]) == (1, 7, 63) and "never reached" in gap["why"]


def test_a_hub_back_from_an_outage_gives_the_cluster_a_lease_before_blaming_it(
    engine: sa.Engine, tmp_path: Path
) -> None:
    """The cluster's lease ran out while the hub was down, longer than lease + grace:
    the hub back up must wait for the agent's next sync, not revoke its attempt."""
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    cfg: dict[str, float] = {"lease_s": 10.0, "grace_s": 2.0}
    first = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", **cfg))
    with first.start().http() as c:
        a = _running(first, c)
    first.stop()
    with engine.begin() as conn:  # the hub was down for 1000 s
        conn.execute(schema.clusters.update().values(lease_expires=time.time() - 1000))
    again = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", **cfg))
    try:
        with again.start().http() as c:
            time.sleep(1.0)  # scheduler ticks every 0.2 s: five looks at the stale lease
            run = c.get(f"/v1/runs/{a['run_id']}").json()
            cluster = next(x for x in c.get("/v1/clusters").json() if x["id"] == "a")
        assert run["state"] == "running" and len(run["attempts"]) == 1, run["reason"]
        assert not run["attempts"][0]["revoked"] and cluster["state"] != "unknown"
    finally:
        again.stop()


def test_steps_a_revoked_attempt_ran_on_are_counted_as_lost_work(
    engine: sa.Engine, tmp_path: Path
) -> None:
    """Out of contact past the grace, the attempt is revoked and its run retried; when
    its agent is back and reports how far the stray really got, ``lost_work`` says so."""
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    cfg: dict[str, float] = {"lease_s": 1.0, "grace_s": 1.0}
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", **cfg))
    try:
        with server.start().http() as c:
            a = _running(server, c)
            ab.sync(server, "a", attempts=[_rep(a, last_step=10, checkpoint_step=5)])
            deadline = time.time() + 30
            while not c.get(f"/v1/runs/{a['run_id']}").json()["attempts"][0]["revoked"]:
                assert time.time() < deadline, "the silent cluster's attempt was not revoked"
                time.sleep(0.2)
            stray_end = _rep(a, state="failed", last_step=30, released=True)
            ab.sync(server, "a", attempts=[stray_end])
            events = c.get(f"/v1/runs/{a['run_id']}/events").json()
    finally:
        server.stop()
    lost = [e["payload"] for e in events if e["kind"] == "lost_work"]
    assert lost[-1]["lost_steps"] == 25 and "ran on to step 30" in lost[-1]["why"], lost

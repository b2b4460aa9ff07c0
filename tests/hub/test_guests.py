"""A spanning run through a real hub (``hub.runs.guests``): placed across clusters, its guest
orders relayed to the guest cluster's agent once the head says where to join, the
guest's room held while it runs, the guest's word recorded, and the order withdrawn when
the attempt ends.

The hub server is real (HTTP, scheduler thread, SQLite and PostgreSQL); the agents are
this test speaking the sync protocol with their real tokens (the agent's side, with real
Ray nodes, is ``tests/agent/test_span_guests.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from taugrid.cli import main as cli_main
from tests.backends import backend_helpers as bh
from tests.hub import test_placement_config as pc
from tests.hub.harness import HubServer, platform_hub

# free GPUs of 8 per cluster: idle holds 2 workers of 4 GPUs, eu 1, cheap none
FREE = {"cheap": 0, "idle": 8, "eu": 4}
JOIN = {"address": "127.0.0.9:6379", "auth_token": "0123abcd"}


def _report(cluster: str) -> dict[str, Any]:
    return pc.report(cluster, FREE[cluster]) | {"spannable": True}


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, pc.PLATFORM) as server:
        for region in FREE:
            reply = _sync(server, region, {"report": _report(region)}, register=True)
            assert reply["guests"] == []
        yield server


def _sync(
    server: HubServer, cluster: str, body: dict[str, Any], register: bool = False
) -> dict[str, Any]:
    with server.http(server.agent_token(cluster)) as c:
        if register:
            reg = {"cluster_id": cluster, "region": cluster}
            assert c.post(f"/v1/agents/{cluster}/register", json=reg).status_code == 200
        r = c.post(f"/v1/agents/{cluster}/sync", json=body)
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        return doc


def _submit(c: httpx.Client, name: str, workers: int, placement: str) -> None:
    text = pc.RUN.format(name=name, placement=placement)
    text = text.replace("gpus: 2", f"gpus: 4\n  workers: {workers}")
    assert c.post("/v1/runs", json={"tau_yaml": text}).status_code == 201


def test_a_span_is_placed_relayed_held_and_withdrawn(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with hub.http() as c:
        _submit(c, "wide", 3, "  communication: async")
        explained = pc.placed(c, "wide")
    # the core's span (tests/scheduling/test_spanning.py): head idle (2), eu (1)
    assert explained["cluster"] == "idle" and "spans clusters: head idle" in explained["reason"]
    assert explained["guests"] == [{"cluster": "eu", "workers": 1, "nodes": ["eu-n0"]}]
    monkeypatch.setenv("TAU_HUB_URL", hub.url)
    monkeypatch.setenv("TAU_TOKEN", hub.admin_token)
    out = CliRunner().invoke(cli_main.app, ["run", "explain-placement", "wide"])
    assert out.exit_code == 0, out.output
    assert "one Ray cluster across clusters; worker groups on: eu (1 workers)" in out.output
    head = _sync(hub, "idle", {"report": _report("idle")})
    (assignment,) = head["assignments"]
    token = assignment["token"]
    assert assignment["guests"] == {"eu": 1}
    # eu holds the order; where to join is not known yet
    (order,) = _sync(hub, "eu", {})["guests"]
    assert (order["token"], order["head_cluster"], order["workers"]) == (token, "idle", 1)
    assert order["gpus_per_worker"] == 4 and order["address"] is None
    # the head's agent says where its Ray cluster is; eu's next reply carries it
    _sync(hub, "idle", {"known": [token], "joins": [{"token": token, **JOIN}]})
    (order,) = _sync(hub, "eu", {})["guests"]
    assert (order["address"], order["auth_token"]) == (JOIN["address"], JOIN["auth_token"])

    # eu's 4 GPUs are lent: a run that only eu may take waits while the span runs
    with hub.http() as c:
        _submit(c, "eu-only", 1, "  allowed_regions: [eu]")
        time.sleep(1.0)  # scheduler ticks
        assert c.get("/v1/runs/eu-only").json()["state"] == "admitted"

    # the guest's word becomes events; a failure warns on Scheduled
    joined = {"token": token, "state": "joined", "nodes": 1}
    _sync(hub, "eu", {"guests": [joined]})
    failed = {"token": token, "state": "failed", "message": "ray start exited with 1"}
    _sync(hub, "eu", {"guests": [failed]})
    with hub.http() as c:
        kinds = [e["kind"] for e in c.get("/v1/runs/wide/events").json()]
        scheduled = pc._phase(c.get("/v1/runs/wide").json(), "scheduled")
    assert kinds.count("guest_joined") == 1 and kinds.count("guest_failed") == 1
    assert scheduled["status"] == "warning" and "on eu did not join" in scheduled["reason"]

    # the attempt ends: the order is withdrawn and eu's room comes back
    end = {"token": token, "state": "succeeded", "released": True}
    _sync(hub, "idle", {"known": [token], "attempts": [end], "report": _report("idle")})
    assert _sync(hub, "eu", {"report": _report("eu")})["guests"] == []
    with hub.http() as c:
        bh.wait_for(lambda: c.get("/v1/runs/eu-only").json()["state"] == "placed", what="placed")


def test_a_join_from_another_cluster_than_the_head_is_ignored(hub: HubServer) -> None:
    with hub.http() as c:
        _submit(c, "wide", 3, "  communication: async")
        pc.placed(c, "wide")
    (assignment,) = _sync(hub, "idle", {})["assignments"]
    token = assignment["token"]
    _sync(hub, "eu", {"joins": [{"token": token, **JOIN}]})  # eu does not head it
    (order,) = _sync(hub, "eu", {})["guests"]
    assert order["address"] is None

"""Node marks over the real hub API: who may mark, the source recorded, clears, history.

Agents are played over HTTP with their real cluster tokens (``agent_builders``), the
seam the agent's node health checker uses.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _marks(hub: HubServer, node: str) -> list[tuple[str, str]]:
    with hub.http() as c:
        rows = [n for n in c.get("/v1/admin/nodes").json() if n["node_id"] == node]
    return [(m["kind"], m["source"]) for r in rows for m in r["marks"]]


def _post(hub: HubServer, token: str | None, path: str, body: dict[str, Any]) -> int:
    with hub.http(token) as c:
        return c.post(path, json=body).status_code


def test_agent_marks_its_own_nodes_as_checker_and_clears_only_its_own(hub: HubServer) -> None:
    ab.sync(hub, "a", ab.report("a", 4))
    ab.sync(hub, "b", ab.report("b", 4))
    agent_a = hub.agent_token("a")
    fault = {"cluster_id": "a", "node_id": "a-n0", "kind": "xid", "source": "checker"}
    assert _post(hub, agent_a, "/v1/admin/nodes/fault", fault) == 200
    assert _post(hub, agent_a, "/v1/admin/nodes/fault", fault) == 200  # idempotent
    other = {**fault, "cluster_id": "b", "node_id": "b-n0"}
    assert _post(hub, agent_a, "/v1/admin/nodes/fault", other) == 403  # not its cluster
    assert _post(hub, agent_a, "/v1/admin/nodes/fault", {**fault, "source": "admin"}) == 403
    admin_mark = {"cluster_id": "a", "node_id": "a-n0", "kind": "cordon", "source": "checker"}
    assert _post(hub, None, "/v1/admin/nodes/fault", admin_mark) == 200  # recorded as admin
    assert _marks(hub, "a-n0") == [("xid", "checker"), ("cordon", "admin")]
    with hub.http(agent_a) as c:  # the agent's next sync tells it to cordon the node
        reply = c.post("/v1/agents/a/sync", json={}).json()
    assert set(reply["faulty_nodes"]) == {"a-n0"}
    clear = {"cluster_id": "a", "node_id": "a-n0", "source": "checker"}
    assert _post(hub, agent_a, "/v1/admin/nodes/clear", clear) == 200
    assert _marks(hub, "a-n0") == [("cordon", "admin")]  # an admin's mark stays
    assert _post(hub, None, "/v1/admin/nodes/clear", clear) == 200
    assert _marks(hub, "a-n0") == []
    with hub.http() as c:
        hist = c.get("/v1/admin/nodes/a-n0/history", params={"cluster": "a"}).json()
    assert [(e["event"], e["source"]) for e in hist] == [
        ("node_marked", "checker"),
        ("node_marked", "admin"),
        ("node_cleared", "checker"),
        ("node_cleared", "all"),
    ]
    with hub.http(agent_a) as c:  # listing and history are for admins
        assert c.get("/v1/admin/nodes").status_code == 403


def test_node_list_shows_conditions_from_the_report(hub: HubServer) -> None:
    state = ab.report("a", 4)
    state["nodes"][0] |= {
        "health_check": "unknown",
        "conditions": [{"type": "HealthChecker", "status": "unknown", "reason": "crashed"}],
    }
    ab.sync(hub, "a", state)
    with hub.http() as c:
        (row,) = [n for n in c.get("/v1/admin/nodes").json() if n["node_id"] == "a-n0"]
    assert row["health"] == "unknown" and row["conditions"][0]["reason"] == "crashed"


XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."
RUN = """\
schema_version: 1
name: xid
run:
  entrypoint: train.py
compute: {gpus: 1, cpus: 1, memory: 1Gi}
resilience:
  max_retries: 3
  retry_on: [node_failure]
  backoff: {initial: 1s}
"""


def _attempt_fails_with_xid(hub: HubServer, known: set[int]) -> None:
    deadline = time.time() + 60
    while True:
        new = [
            x
            for x in ab.sync(hub, "a", ab.report("a", 4))["assignments"]
            if x["token"] not in known
        ]
        if new:
            break
        assert time.time() < deadline, "no assignment"
        time.sleep(0.1)
    token = new[0]["token"]
    known.add(token)
    running = {"token": token, "state": "running", "submission_id": f"s{token}", "nodes": ["a-n0"]}
    ab.sync(hub, "a", ab.report("a", 4), attempts=[running])
    end = {"token": token, "state": "failed", "released": True, "exit_code": 1}
    end |= {"failure_kind": "exit_nonzero", "message": f"step 30\n{XID}\nTraceback: boom"}
    ab.sync(hub, "a", ab.report("a", 4), attempts=[end])


def test_two_attempts_blaming_a_node_quarantine_it_and_the_run_waits(hub: HubServer) -> None:
    known: set[int] = set()
    with hub.http() as c:
        run_id = c.post("/v1/runs", json={"tau_yaml": RUN}).json()["id"]
        _attempt_fails_with_xid(hub, known)
        assert _marks(hub, "a-n0") == []  # one attempt: suspect only
        _attempt_fails_with_xid(hub, known)
        assert _marks(hub, "a-n0") == [("quarantine", "log_monitor")]
        run = c.get(f"/v1/runs/{run_id}").json()
        assert [a["failure_kind"] for a in run["attempts"]] == ["node_failure"] * 2
        assert run["state"] in ("queued", "admitted")  # waits for a healthy node
        hist = c.get("/v1/admin/nodes/a-n0/history", params={"cluster": "a"}).json()
        assert [e["event"] for e in hist] == ["node_suspect", "node_suspect", "node_marked"]
        events = [e["kind"] for e in c.get(f"/v1/runs/{run_id}/events").json()]
        assert events.count("node_suspect") == 2

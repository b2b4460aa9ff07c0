"""Node marks over the real hub API: who may mark, the source recorded, clears, history.

Agents are played over HTTP with their real cluster tokens (``agent_builders``), the
seam the agent's node health checker uses.
"""

from __future__ import annotations

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

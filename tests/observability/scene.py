"""A small platform state every metric has series for, played over HTTP on a real hub.

Regions ``a`` and ``b`` (one 4-GPU emulated node each, tests.dataplane.test_data_api's
platform) with agents played over HTTP with their real tokens; ``b`` reports a probe
of the link from ``a``; one run is placed by the real scheduler and reported running
with a metric; node ``<other>-n0`` of the region the run is not in is marked faulty
through the admin API.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer
from tests.hub.test_same_decision import RUN

PROBE = {"a": {"throughput_mbps": 100.0, "rtt_ms": 2.0, "measured_at": 0.0}}


@dataclasses.dataclass(frozen=True)
class Scene:
    run_id: str
    token: int  # its running attempt's
    region: str  # where the run runs (each cluster is its own region)
    faulty_region: str
    faulty_node: str


def _reports(running: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
    probe = {"a": {**PROBE["a"], "measured_at": time.time()}}
    return {
        "a": ab.report("a", 4, running_attempts=running.get("a", [])),
        "b": ab.report("b", 4, probes=probe, running_attempts=running.get("b", [])),
    }


def build(hub: HubServer, timeout_s: float = 30.0) -> Scene:
    for cluster, rep in _reports({}).items():
        ab.sync(hub, cluster, rep)
    with hub.http() as c:
        r = c.post("/v1/runs", json={"tau_yaml": RUN.format(name="watched", gpus=2)})
        assert r.status_code in (200, 201), r.text
        run_id = r.json()["id"]
        deadline = time.time() + timeout_s
        while c.get(f"/v1/runs/{run_id}").json()["state"] != "placed":
            assert time.time() < deadline, "the run was not placed"
            time.sleep(0.1)
        where = c.get(f"/v1/runs/{run_id}").json()["attempts"][0]["cluster_id"]
        (assignment,) = ab.sync(hub, where, _reports({})[where])["assignments"]
        token = assignment["token"]
        metric = {"name": "loss", "value": 0.5, "step": 10, "wall_time": time.time()}
        running = {"token": token, "state": "running", "nodes": [f"{where}-n0"]}
        running |= {"metrics": [metric], "last_step": 10}
        ab.sync(hub, where, _reports({where: [token]})[where], attempts=[running])
        while c.get(f"/v1/runs/{run_id}").json()["state"] != "running":
            assert time.time() < deadline, "the run did not start running"
            time.sleep(0.1)
        other = "b" if where == "a" else "a"
        fault = {"cluster_id": other, "node_id": f"{other}-n0", "kind": "ecc", "reason": "xid 48"}
        r = c.post("/v1/admin/nodes/fault", json=fault)
        assert r.status_code == 200, r.text
    return Scene(run_id, token, where, other, f"{other}-n0")

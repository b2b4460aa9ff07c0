"""A running job asks to be moved (``tau.request_relocation``): the hub moves it when
another cluster has the room, and says why not when none has.

A real hub server; clusters ``a`` and ``b`` (each its own region) are played over HTTP
with their real agent tokens. tests/elastic/test_elastic_relocation.py does it on real
Ray, with the pipeline driver asking.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.hub import agent_builders as ab
from tests.hub import platform_builders as pb
from tests.hub.harness import HubServer, platform_hub

ASK = {"cpus": 8, "reason": "stage decode limits the pipeline to 40.0 items/s"}


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, pb.platform({"a": 1.0, "b": 1.0}, pb.TENANCY)) as s:
        yield s


def _report(cluster: str, cpus_free: float) -> dict[str, Any]:
    doc = ab.report(cluster, 4)
    doc["nodes"][0]["cpus_free"] = cpus_free
    return doc


def _running_on_a(hub: HubServer, c: httpx.Client) -> dict[str, Any]:
    """A one-worker run placed on ``a`` (the only cluster yet) and reported running."""
    ab.sync(hub, "a", _report("a", 4))
    run = c.post("/v1/runs", json={"tau_yaml": ab.ONE_GPU_RUN.format(name="r")}).json()
    ab.wait(c, run["id"], lambda r: r["state"] == "placed", "placed")
    (assignment,) = ab.sync(hub, "a", _report("a", 4))["assignments"]
    running = {"token": assignment["token"], "state": "running", "nodes": ["a-n0"]}
    ab.sync(hub, "a", _report("a", 4), attempts=[running])
    ab.wait(c, run["id"], lambda r: r["state"] == "running", "running")
    return dict(assignment)


def _kinds(c: httpx.Client, run_id: str) -> list[str]:
    return [e["kind"] for e in c.get(f"/v1/runs/{run_id}/events").json()]


def test_a_run_asking_for_more_cpus_moves_to_the_cluster_that_has_them(hub: HubServer) -> None:
    with hub.http() as c:
        a = _running_on_a(hub, c)
        ab.sync(hub, "b", _report("b", 16))  # a bigger cluster joins
        ask = {"token": a["token"], "state": "running", "nodes": ["a-n0"], "relocate": ASK}
        reply = ab.sync(hub, "a", _report("a", 4), attempts=[ask])
        reply = reply if reply["stop"] else ab.sync(hub, "a", _report("a", 4))
        assert [s["token"] for s in reply["stop"]] == [a["token"]] and not reply["assignments"]
        stopped = {"token": a["token"], "state": "stopped", "released": True}
        ab.sync(hub, "a", _report("a", 4), attempts=[stopped])
        run = ab.wait(c, a["run_id"], lambda r: len(r["attempts"]) == 2, "placed again")
        kinds = _kinds(c, a["run_id"])
    first, second = run["attempts"]
    assert first["failure_kind"] == "relocation"
    assert first["reason"].startswith("Relocating to b: stage decode limits")
    assert second["cluster_id"] == "b"
    assert run["relocation"] == {"away_from": ["a"], "cpus": 8}
    assert "relocation_accepted" in kinds and "relocation_declined" not in kinds
    assert run["state"] in ("placed", "starting", "running")


def test_no_cluster_with_the_room_keeps_the_run_where_it_is_and_says_why(
    hub: HubServer,
) -> None:
    with hub.http() as c:
        a = _running_on_a(hub, c)
        ab.sync(hub, "b", _report("b", 4))  # no room for 8 more CPUs
        ask = {"token": a["token"], "state": "running", "nodes": ["a-n0"], "relocate": ASK}
        ab.sync(hub, "a", _report("a", 4), attempts=[ask])
        reply = ab.sync(hub, "a", _report("a", 4))
        run = c.get(f"/v1/runs/{a['run_id']}").json()
        events = c.get(f"/v1/runs/{a['run_id']}/events").json()
    assert not reply["stop"] and [x["token"] for x in reply["assignments"]] == [a["token"]]
    assert run["state"] == "running" and run["relocation"] is None
    (declined,) = [e["payload"] for e in events if e["kind"] == "relocation_declined"]
    assert "a: relocation: cluster a could not meet the run's goal" in declined["why"]
    assert "b: relocation: the run was moved to get 9 free CPUs; 4 are free here" in declined["why"]
    going = next(p for p in run["phases"] if p["phase"] == "progressing")
    assert going["status"] == "warning" and "no cluster has the room now" in going["reason"]


def test_an_ask_that_comes_with_the_first_running_report_is_heard(hub: HubServer) -> None:
    with hub.http() as c:
        ab.sync(hub, "a", _report("a", 4))
        run = c.post("/v1/runs", json={"tau_yaml": ab.ONE_GPU_RUN.format(name="r")}).json()
        ab.wait(c, run["id"], lambda r: r["state"] == "placed", "placed")
        (a,) = ab.sync(hub, "a", _report("a", 4))["assignments"]
        ab.sync(hub, "b", _report("b", 16))
        ask = {"token": a["token"], "state": "running", "nodes": ["a-n0"], "relocate": ASK}
        ab.sync(hub, "a", _report("a", 4), attempts=[ask])
        kinds = _kinds(c, run["id"])
    assert "relocation_accepted" in kinds

"""What a person reads about a run's failure, through a real hub.

The hub server is real; cluster ``a`` (one 4-GPU node) is played over HTTP with its
real agent token, reporting attempt ends with the texts a real agent sends (Ray's
failed-job message with the last logs plus the agent's own log tail; an exception that
carries a server-side traceback). The run's ``reason`` must be one line without
traceback frames, exit 137 must say the process was killed, the full text must be kept
in the run's events, and a retried run that succeeds must not keep a stale
"waiting for resources" phase. Fault marks on nodes the cluster does not have are
refused, and marks on nodes that are gone are not listed.
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
from tests.lifecycle.test_reasons import EXIT, SUBMIT

RETRIES = """\
resilience:
  max_retries: {retries}
  backoff: {{initial: 1s}}
"""


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _wait(c: httpx.Client, run_id: str, ok: Any, what: str) -> dict[str, Any]:
    deadline = time.time() + 30
    run: dict[str, Any] = c.get(f"/v1/runs/{run_id}").json()
    while not ok(run):
        assert time.time() < deadline, f"{what}: run is {run['state']} ({run['reason']})"
        time.sleep(0.1)
        run = c.get(f"/v1/runs/{run_id}").json()
    return run


def _assignment(hub: HubServer, known: set[int]) -> dict[str, Any]:
    """The next new assignment of cluster ``a`` (the scheduler places runs every 0.2 s)."""
    deadline = time.time() + 30
    while True:
        new = [
            x
            for x in ab.sync(hub, "a", ab.report("a", 4))["assignments"]
            if x["token"] not in known
        ]
        if new:
            known.add(new[0]["token"])
            return dict(new[0])
        assert time.time() < deadline, "no assignment"
        time.sleep(0.1)


def _end(hub: HubServer, token: int, **report: Any) -> None:
    starting = {"token": token, "state": "starting", "submission_id": f"s{token}"}
    ab.sync(hub, "a", ab.report("a", 4), attempts=[starting])
    ab.sync(hub, "a", ab.report("a", 4), attempts=[{"token": token, "released": True, **report}])


def _submit(c: httpx.Client, name: str, retries: int) -> str:
    text = ab.ONE_GPU_RUN.format(name=name) + RETRIES.format(retries=retries)
    if retries:
        text += "  retry_on: [exit_nonzero]\n"
    r = c.post("/v1/runs", json={"tau_yaml": text})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _released(run: dict[str, Any]) -> bool:
    done = {p["phase"]: p["status"] for p in run["phases"]}["released"] == "done"
    return run["state"] in ("succeeded", "failed") and done


def test_failure_reasons_are_one_line_and_keep_the_full_text_in_events(hub: HubServer) -> None:
    known: set[int] = set()
    ends: dict[str, dict[str, Any]] = {
        "oom": {"exit_code": 137, "failure_kind": "exit_nonzero", "message": "Killed"},
        "no-ray": {"failure_kind": "submit_error", "message": SUBMIT},
        "crash": {"exit_code": 3, "failure_kind": "exit_nonzero", "message": EXIT},
    }
    runs = {}
    with hub.http() as c:
        for name, end in ends.items():
            runs[name] = _submit(c, name, retries=0)
            a = _assignment(hub, known)
            _end(hub, a["token"], state="failed", **end)
        done = {n: _wait(c, rid, _released, n) for n, rid in runs.items()}
        events = c.get(f"/v1/runs/{runs['no-ray']}/events").json()
    reasons = {n: d["reason"] for n, d in done.items()}
    assert reasons["oom"] == "exit code 137: killed (out of memory or a signal): Killed"
    assert reasons["crash"] == "exit code 3: RuntimeError: failing at step 5 on purpose"
    assert reasons["no-ray"].startswith("submit_error: submission failed: Ray Jobs API at")
    assert "ClientConnectorError: Cannot connect to host" in reasons["no-ray"]
    for why in reasons.values():
        assert "\n" not in why and 'File "' not in why and "raise " not in why, why
    completed = {p["phase"]: p for p in done["crash"]["phases"]}["completed"]
    assert completed["reason"] == reasons["crash"]
    # the attempt keeps the whole text, with the log tail once (Ray's copy and the agent's)
    attempt = done["crash"]["attempts"][0]["reason"]
    assert attempt.count("step 4 loss=0.91") == 1 and "last available logs" not in attempt
    # ... and a one-line summary for the history table's cell
    assert done["crash"]["attempts"][0]["summary"] == reasons["crash"]
    detail = [e for e in events if e["kind"] == "failure_detail"]
    assert detail and 'aiohttp/connector.py", line 1268' in str(detail[0]["payload"])


def test_a_retried_run_that_succeeds_shows_no_stale_scheduled_phase(hub: HubServer) -> None:
    known: set[int] = set()
    with hub.http() as c:
        run_id = _submit(c, "retried", retries=1)
        first = _assignment(hub, known)
        _end(
            hub,
            first["token"],
            state="failed",
            exit_code=3,
            failure_kind="exit_nonzero",
            message=EXIT,
        )
        second = _assignment(hub, known)  # after the 1 s backoff
        # a short second attempt: Ray reports it done before the agent ever saw it running
        _end(hub, second["token"], state="succeeded", exit_code=0)
        done = _wait(c, run_id, _released, "retried")
    assert done["state"] == "succeeded" and len(done["attempts"]) == 2
    scheduled = {p["phase"]: p for p in done["phases"]}["scheduled"]
    assert scheduled["status"] == "done", scheduled
    assert "waiting for resources" not in scheduled["reason"]


def test_fault_marks_only_on_nodes_that_exist(hub: HubServer) -> None:
    ab.sync(hub, "a", ab.report("a", 4))
    with hub.http() as c:
        body = {"cluster_id": "a", "node_id": "no-such-node", "kind": "ecc"}
        r = c.post("/v1/admin/nodes/fault", json=body)
        assert r.status_code == 404 and "has no node 'no-such-node'" in r.text
        body["node_id"] = "a-n0"
        assert c.post("/v1/admin/nodes/fault", json=body).status_code == 200
        (a,) = [x for x in c.get("/v1/clusters").json() if x["id"] == "a"]
        assert [m["node_id"] for m in a["faulty_nodes"]] == ["a-n0"]
        # the node leaves the cluster (e.g. Ray restarted with new node IDs)
        replaced = ab.report("a", 4)
        replaced["nodes"][0]["node_id"] = "a-n1"
        ab.sync(hub, "a", replaced)
        (a,) = [x for x in c.get("/v1/clusters").json() if x["id"] == "a"]
        assert a["faulty_nodes"] == []

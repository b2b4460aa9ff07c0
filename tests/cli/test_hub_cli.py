"""``tau run ...``, ``tau cluster list`` and ``tau admin node list`` through the real
console script against a real hub (issue 36 item 7, what a newcomer hit).

The hub is served by the test (``tests.hub.harness``, clusters ``a`` and ``b``); cluster
``a`` is played over HTTP with its real agent token (``tests.hub.agent_builders``): it
takes the assignment, reports the attempt running with log and metric lines, and ends
it. No Ray. Output goes to a pipe with ``COLUMNS=60``, as a script sees it.
"""

from __future__ import annotations

import json
import pathlib
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.cli.test_spec_cli import tau
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import agent_builders as ab
from tests.hub.harness import HubServer, platform_hub

NODE = "3f2a9c01d4e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7"
"""A node ID as long as Ray's (56 hex digits)."""

WHY = "RuntimeError: tokenizer choked on [/INST] after [exit_nonzero] " + "x" * 120
"""A job's last error line with square brackets (Rich markup, were it read as such)."""


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: pathlib.Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _env(hub: HubServer) -> dict[str, str]:
    return {"TAU_HUB_URL": hub.url, "TAU_TOKEN": hub.admin_token}


def _tau(hub: HubServer, tmp: pathlib.Path, *args: str) -> str:
    out = tau(*args, cwd=tmp, env=_env(hub))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _node_report(**node: Any) -> dict[str, Any]:
    """Cluster ``a``'s state report: one node with a Ray-long ID whose checks pass."""
    state = ab.report("a", 4)
    ok = {"type": "GpuEcc", "status": "ok", "reason": ""}
    state["nodes"][0] |= {"node_id": NODE, "health_check": "ok", "conditions": [ok], **node}
    return state


def _submit(c: httpx.Client, name: str, extra: str = "") -> str:
    r = c.post("/v1/runs", json={"tau_yaml": ab.ONE_GPU_RUN.format(name=name) + extra})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _assignment(hub: HubServer) -> dict[str, Any]:
    """The first assignment cluster ``a`` gets (the scheduler places runs every 0.2 s)."""
    deadline = time.time() + 30
    while not (got := ab.sync(hub, "a", _node_report())["assignments"]):
        assert time.time() < deadline, "no assignment"
        time.sleep(0.1)
    return dict(got[0])


def _attempt(hub: HubServer, token: int, **fields: Any) -> None:
    """Cluster ``a`` reports attempt ``token`` with ``fields``."""
    ab.sync(hub, "a", _node_report(), attempts=[{"token": token, **fields}])


def _running(hub: HubServer, token: int, metrics: list[dict[str, Any]]) -> None:
    _attempt(
        hub,
        token,
        state="running",
        submission_id=f"s{token}",
        nodes=[NODE],
        log_chunk="step 1\nstep 2\n",
        log_from=0,
        metrics=metrics,
        last_step=2,
    )


def _failed(hub: HubServer, token: int) -> None:
    _attempt(
        hub,
        token,
        state="failed",
        released=True,
        exit_code=3,
        failure_kind="exit_nonzero",
        message=f"step 2\n{WHY}",
    )


def _ended(c: httpx.Client, run_id: str) -> dict[str, Any]:
    return ab.wait(c, run_id, lambda r: r["state"] == "failed", "the run failing")


def test_history_and_logs_end_with_a_newline_and_keep_long_reasons_whole(
    hub: HubServer, tmp_path: pathlib.Path
) -> None:
    with hub.http() as c:
        run_id = _submit(c, "newcomer")
        token = _assignment(hub)["token"]
        _running(hub, token, [{"name": "loss", "step": 2, "value": 0.5}])
        _failed(hub, token)
        run = _ended(c, run_id)
    summary = run["attempts"][0]["summary"]
    assert "[/INST] after [exit_nonzero]" in summary and len(summary) > 60
    history = _tau(hub, tmp_path, "run", "history", run_id)
    assert history.endswith("\n")
    # one row per attempt, its REASON cell whole on it however narrow COLUMNS is
    (row,) = [ln for ln in history.splitlines() if ln.startswith("1 ")]
    assert row.rstrip().endswith(summary), row
    # an event's text is printed as it is: brackets are not markup
    assert WHY in history.replace(row, "")
    logs = _tau(hub, tmp_path, "run", "logs", run_id, "-o", "json")
    assert logs.endswith("\n")
    assert [json.loads(ln)["text"] for ln in logs.splitlines()] == ["step 1\nstep 2\n"]
    assert _tau(hub, tmp_path, "run", "history", run_id, "-o", "json").endswith("\n")


def test_node_ids_have_one_length_and_a_marked_node_is_never_ok(
    hub: HubServer, tmp_path: pathlib.Path
) -> None:
    ab.sync(hub, "a", _node_report())
    with hub.http() as c:
        run_id = _submit(c, "nodes")
        token = _assignment(hub)["token"]
        _running(hub, token, [{"name": "loss", "step": 2, "value": 0.5}])
        _failed(hub, token)
        _ended(c, run_id)
        mark = {"cluster_id": "a", "node_id": NODE, "kind": "ecc", "reason": "by hand"}
        assert c.post("/v1/admin/nodes/fault", json=mark).status_code == 200
    # the agent has not run its checks since: they still pass, the mark is open
    ab.sync(hub, "a", _node_report())
    nodes = _tau(hub, tmp_path, "admin", "node", "list")
    (row,) = [ln.split() for ln in nodes.splitlines() if ln.startswith("a ")]
    assert row[1:5] == [NODE[:12], "-", "yes", "faulty"], nodes
    doc = json.loads(_tau(hub, tmp_path, "admin", "node", "list", "-o", "json"))
    assert [(n["health"], n["checks"], n["node_id"]) for n in doc] == [("faulty", "ok", NODE)]
    shown = {
        "history": _tau(hub, tmp_path, "run", "history", run_id),
        "cluster list": _tau(hub, tmp_path, "cluster", "list"),
        "node list": nodes,
    }
    for what, out in shown.items():  # every ID as long as the others, in every command
        ids = re.findall(NODE[:6] + r"[0-9a-f]*", out)
        assert ids and set(ids) == {NODE[:12]}, (what, out)


RETRY = """\
resilience:
  max_retries: 2
  retry_on: [exit_nonzero]
  backoff:
    initial: 10m
    max: 10m
"""
"""Retries after a non-zero exit, the next attempt far enough away to look at the wait."""


def test_status_names_the_loss_and_shows_a_retry_not_a_live_phase(
    hub: HubServer, tmp_path: pathlib.Path
) -> None:
    with hub.http() as c:
        run_id = _submit(c, "retried", RETRY)
        token = _assignment(hub)["token"]
        logged = [  # one step, in the order the job logged it: loss neither first nor last
            {"name": "accuracy", "step": 2, "value": 0.9},
            {"name": "loss", "step": 2, "value": 0.25},
            {"name": "lr", "step": 2, "value": 0.001},
        ]
        _running(hub, token, logged)
        live = json.loads(_tau(hub, tmp_path, "run", "status", run_id, "-o", "json"))
        (progressing,) = [p for p in live["phases"] if p["phase"] == "progressing"]
        assert progressing["reason"] == "step 2: loss=0.25", progressing
        _failed(hub, token)
        ab.wait(c, run_id, lambda r: r["state"] == "queued", "the run waiting for its retry")
    out = _tau(hub, tmp_path, "run", "status", run_id)
    head = out.splitlines()[:2]
    assert "state: queued" in head[0] and "attempts: 1" in head[0], out
    assert head[1].startswith("attempt 1 failed (exit_nonzero); retrying in 600s"), out
    doc = json.loads(_tau(hub, tmp_path, "run", "status", run_id, "-o", "json"))
    phases = {p["phase"]: p for p in doc["phases"]}
    after = ("admitted", "placed", "scheduled", "gpu_healthy", "progressing")
    assert {phases[p]["status"] for p in after if p in phases} == {"pending"}, phases
    assert phases["progressing"]["reason"] == (
        "attempt 1 ended at step 2 (exit_nonzero); the retry resumes from the start "
        "(no checkpoint committed)"
    )
    assert "[" not in out.replace("[/INST]", ""), out  # no raw Python list anywhere

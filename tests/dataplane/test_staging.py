"""Staging on placement through a real hub server: a run placed away from its dataset is
held (Placed, with progress) until the replica is complete, runs needing the same dataset
share one transfer, and repeated transfer failures fail the attempt with a clear reason
and give the quota back. Agents are played over HTTP with their real tokens; the bytes
move for real in test_staging_ray.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from taugrid.cli import main as cli_main
from tests.dataplane import test_data_api as api
from tests.hub.harness import HubServer, make_hub

MB = 10**6
RUN = api.RUN + "resilience:\n  max_retries: {retries}\n  backoff: {{initial: 1s}}\n"
PROBES = {"a": {"throughput_mbps": 100.0, "rtt_ms": 0.0, "measured_at": 0.0}}


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(api.PLATFORM)
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml"))
    server.start()
    yield server
    server.stop()


def _until(what: str, fn: Callable[[], Any], timeout: float = 20) -> Any:
    deadline = time.time() + timeout
    while not (value := fn()):
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def _sync(hub: HubServer, cluster: str, attempts: list[dict[str, Any]] | None = None) -> Any:
    with hub.http(hub.agent_token(cluster)) as c:
        r = c.post(f"/v1/agents/{cluster}/sync", json={"attempts": attempts or []})
        assert r.status_code == 200, r.text
        return r.json()


def _placed(c: httpx.Client, hub: HubServer, name: str, retries: int = 1) -> dict[str, Any]:
    r = c.post("/v1/runs", json={"tau_yaml": RUN.format(name=name, gpus=1, retries=retries)})
    assert r.status_code == 201, r.text
    return dict(_until(f"{name} placed and staging", lambda: _staging(c, name)))


def _staging(c: httpx.Client, name: str) -> dict[str, Any] | None:
    run = _state(c, name, "placed")
    return run if run and "staging" in _phase(run, "placed")["reason"] else None


def _state(c: httpx.Client, name: str, state: str) -> dict[str, Any] | None:
    run = c.get(f"/v1/runs/{name}").json()
    return dict(run) if run["state"] == state else None


def _phase(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in run["phases"] if p["phase"] == name)


def _setup(hub: HubServer, c: httpx.Client) -> None:
    # a holds corpus (250 MB) but has no free GPU; b is idle, 20 s away: runs go to b
    api._agent(hub, "a", {}, gpus_free=0)
    api._agent(hub, "b", {"a": {**PROBES["a"], "measured_at": time.time()}})
    api._register(c, hub)


def test_held_until_replica_complete_and_one_transfer_for_two_runs(
    hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAU_HUB_URL", hub.url)
    monkeypatch.setenv("TAU_TOKEN", hub.admin_token)
    monkeypatch.setenv("COLUMNS", "250")
    with hub.http() as c:
        _setup(hub, c)
        first, second = _placed(c, hub, "first"), _placed(c, hub, "second")
        assert {first["cluster_id"], second["cluster_id"]} == {"b"}
        assert first["quota_held"] and second["quota_held"]  # Placed keeps its quota
        (t,) = c.get("/v1/transfers").json()  # both runs wait on the same copy
        assert (t["dataset_id"], t["src_region"], t["dst_region"]) == ("corpus@v1", "a", "b")
        assert "staging dataset corpus@v1 into b: 0.0/250.0 MB" in _phase(first, "placed")["reason"]
        assert _sync(hub, "b")["assignments"] == []  # held: nothing dispatched
        tasks = api._data_sync(hub, "b", {})
        prog = {"transfer_id": t["id"], "bytes_done": 125 * MB, "rate_bps": 12.5e6}
        api._data_sync(hub, "b", {"progress": [prog]})

        def halfway() -> bool:
            reason = _phase(c.get("/v1/runs/first").json(), "placed")["reason"]
            return "125.0/250.0 MB, ETA 10 s" in reason

        _until("progress on the Placed phase", halfway)
        shown = CliRunner().invoke(cli_main.app, ["run", "status", "first"])
        assert "staging dataset corpus@v1 into b: 125.0/250.0 MB" in shown.output, shown.output
        assert "look at data plane" in shown.output
        assert _sync(hub, "b")["assignments"] == []
        assert [x["transfer_id"] for x in tasks["transfers"]] == [t["id"]]
        done = {**prog, "bytes_done": 250 * MB, "finished": True, "ok": True}
        api._data_sync(hub, "b", {"progress": [done]})
        got = _until("both assignments", lambda: len(_sync(hub, "b")["assignments"]) == 2)
        assert got
        run = c.get("/v1/runs/first").json()
        assert _phase(run, "placed")["status"] == "done"
        assert "staged corpus@v1" in _phase(run, "placed")["reason"]
        assert _phase(run, "scheduled")["status"] == "active"
        assert len(c.get("/v1/transfers").json()) == 1


def test_repeated_transfer_failure_fails_the_attempt_and_releases_quota(
    hub: HubServer,
) -> None:
    with hub.http() as c:
        _setup(hub, c)
        _placed(c, hub, "doomed", retries=0)
        seen: set[int] = set()
        for _ in range(3):  # the copy is retried (resuming) until MAX_TRIES failures
            tasks = _until(
                "a new transfer",
                lambda: [
                    x
                    for x in api._data_sync(hub, "b", {})["transfers"]
                    if x["transfer_id"] not in seen
                ],
            )
            tid = tasks[0]["transfer_id"]
            seen.add(tid)
            bad = {"transfer_id": tid, "bytes_done": 0, "finished": True}
            bad["error"] = "sha256 mismatch"
            api._data_sync(hub, "b", {"progress": [bad]})
        failed = _until("the run failed", lambda: _state(c, "doomed", "failed"))
        assert "data staging failed: copy of corpus@v1 into b failed 3 times" in failed["reason"]
        assert "sha256 mismatch" in failed["reason"]
        assert not failed["quota_held"]
        (a,) = failed["attempts"]
        assert (a["state"], a["failure_kind"]) == ("failed", "data_staging")
        # the never-started attempt is stopped through its agent, and the run is released
        reply = _sync(hub, "b")
        assert [s["token"] for s in reply["stop"]] == [a["token"]]
        _sync(hub, "b", [{"token": a["token"], "state": "stopped", "released": True}])
        _until(
            "released",
            lambda: _phase(c.get("/v1/runs/doomed").json(), "released")["status"] == "done",
        )
        reps = {r["region"]: r["state"] for r in c.get("/v1/datasets/corpus/replicas").json()}
        assert reps == {"a": "complete", "b": "failed"}  # the source replica is untouched


def test_staging_failure_retries_per_policy(hub: HubServer) -> None:
    with hub.http() as c:
        _setup(hub, c)
        run = _placed(c, hub, "again", retries=1)
        first_token = run["current_token"]
        for _ in range(3):
            tid = _until(
                "a transfer",
                lambda: [x["transfer_id"] for x in api._data_sync(hub, "b", {})["transfers"]],
            )[0]
            bad = {"transfer_id": tid, "bytes_done": 0, "finished": True, "error": "unreachable"}
            api._data_sync(hub, "b", {"progress": [bad]})
        _until(
            "a second attempt",
            lambda: c.get("/v1/runs/again").json()["current_token"] not in (first_token, None),
            timeout=60,
        )

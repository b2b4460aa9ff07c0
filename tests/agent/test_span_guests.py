"""A spanning run end to end on real Ray: the hub spans it over two clusters, the guest
cluster's agent joins a node to the head's Ray cluster, the job's workers run in both,
the guest node is stopped when the attempt ends; and when the guest node dies mid-run the
job shrinks and finishes instead of failing.

Two regions of ``tests/agent/span_regions.py``, ``a`` and ``b``, 2 emulated GPUs each.
The run is ``examples/span-data-parallel`` with 4 one-GPU workers: no cluster holds
them, so the hub spans them 2 + 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.backends.ray import _procs
from tests.agent import span_regions as sr
from tests.backends import backend_helpers as bh
from tests.cli.platform_env import copy_example
from tests.hub import region as rg
from tests.hub.harness import HubServer

# Guest nodes are swept by their marker prefix host-wide: one module at a time.
pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("guest-nodes"),
]


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    with sr.regions(tmp_path, {"a": 2, "b": 2}) as server:
        yield server


def _args(shards: int) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        doc["run"]["args"] = [
            *("--workers", "4", "--shards", str(shards)),
            *("--shard-mb", "0.05", "--step-s", "0.1"),
        ]

    return edit


def _events(c: httpx.Client, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in c.get(f"/v1/runs/{run_id}/events").json() if e["kind"] == kind]


def _span_run(c: httpx.Client, code: Path) -> tuple[str, str]:
    """Submit; once it runs with its guest node joined: (run ID, the guest cluster)."""
    rid = rg.submit_run(c, (code / "tau.yaml").read_text(), code_dir=code)["id"]
    placed = rg.wait_run(c, rid, lambda r: r["state"] not in ("queued", "admitted"), 120)
    guest = next(iter(set(sr.IPS) - {placed["attempts"][0]["cluster_id"]}))
    joined = bh.wait_for(lambda: _events(c, rid, "guest_joined"), timeout=120, what="join")
    assert joined[0]["cluster"] == guest
    return rid, guest


def _result(run: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(next(Path(run["record_dir"]).rglob("result.json")).read_text())
    return doc


@pytest.mark.long
def test_a_span_runs_in_both_clusters_and_its_guest_node_goes_with_it(
    hub: HubServer, tmp_path: Path
) -> None:
    code = copy_example(sr.EXAMPLE, tmp_path / "code", _args(120))
    with hub.http() as c:
        rid, _guest = _span_run(c, code)
        done = rg.wait_run(c, rid, rg.finished, 300)
        explained = c.get(f"/v1/runs/{rid}/placement").json()
        # the attempt ended: its guest node is stopped
        bh.wait_for(lambda: not sr.guest_pids(), timeout=30, what="the guest node to stop")
    assert done["state"] == "succeeded", done["reason"]
    assert "spans clusters" in explained["reason"], explained
    result = _result(done)
    assert result["shards"] == 120 and result["workers_end"] == 4, result
    assert set(result["by_region"]) == set(sr.IPS), result  # both clusters' workers trained

    # the guest node dies mid-run (its region lost): the job shrinks to the head's workers
    code = copy_example(sr.EXAMPLE, tmp_path / "code2", _args(400))
    with hub.http() as c:
        rid, guest = _span_run(c, code)
        bh.wait_for(lambda: _shards(c, rid) >= 40, timeout=120, what="40 shards")
        assert sr.guest_pids()
        assert not _procs.terminate("tau-guest/", prefix=True, grace_s=0)
        done = rg.wait_run(c, rid, rg.finished, 300)
        failed = _events(c, rid, "guest_failed")
    assert done["state"] == "succeeded", done["reason"]
    assert failed and failed[0]["cluster"] == guest
    result = _result(done)
    assert result["shards"] == 400
    assert result["workers_start"] == 4 and result["workers_end"] == 2, result
    assert result["workers_lost"] >= 2, result


def _shards(c: httpx.Client, run_id: str) -> float:
    rows = c.get(f"/v1/runs/{run_id}/metrics", params={"name": "loss"}).json()
    return max((float(r["step"] or 0) for r in rows), default=0.0)

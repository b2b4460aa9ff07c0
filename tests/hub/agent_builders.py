"""Builders for agents played over HTTP: a one-node state report, one register +
sync with the cluster's real agent token (each cluster is its own region), and a
wait for a run to reach a state."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.hub.harness import HubServer

ONE_GPU_RUN = """\
schema_version: 1
name: {name}
run:
  entrypoint: train.py
compute:
  gpus: 1
  cpus: 1
  memory: 1Gi
"""
"""A tau.yaml of one 1-GPU worker (``{name}`` to fill); append a ``resilience`` block."""


def report(cluster: str, gpus_free: float = 4, **fields: Any) -> dict[str, Any]:
    """A state report of one 4-GPU A100-80G node with ``gpus_free`` free, plus ``fields``."""
    node = {
        "node_id": f"{cluster}-n0",
        "gpu_model": "A100-80G",
        "gpus_total": 4,
        "gpus_free": gpus_free,
        "cpus_free": 16,
        "memory_free": 128 * 2**30,
        "alive": True,
    }
    return {"cluster_id": cluster, "nodes": [node], "gpu_free": gpus_free, **fields}


def sync(
    hub: HubServer, cluster: str, state: dict[str, Any] | None = None, **body: Any
) -> dict[str, Any]:
    """Register ``cluster`` and sync once (with ``state`` as its full report, if given)."""
    with hub.http(hub.agent_token(cluster)) as c:
        r = c.post(
            f"/v1/agents/{cluster}/register", json={"cluster_id": cluster, "region": cluster}
        )
        assert r.status_code == 200, r.text
        doc = {"report": state, **body} if state is not None else body
        r = c.post(f"/v1/agents/{cluster}/sync", json=doc)
        assert r.status_code == 200, r.text
        return dict(r.json())


def wait(c: httpx.Client, run_id: str, ok: Any, what: str) -> dict[str, Any]:
    """The run once ``ok(run)`` holds (20 s at most; the message says ``what`` was awaited)."""
    deadline = time.time() + 20
    run = dict(c.get(f"/v1/runs/{run_id}").json())
    while not ok(run):
        assert time.time() < deadline, f"{what}: run is {run['state']} ({run['reason']})"
        time.sleep(0.1)
        run = dict(c.get(f"/v1/runs/{run_id}").json())
    return run

"""Data-plane calls of the hub client: datasets, replicas, replication, transfers, the
measured link matrix, regions, and explain-placement.

Functions take a ``sdk.client.client.Client`` (request path CLI → SDK → HTTP → hub); errors
are the client's (``ApiError`` for 4xx, ``HubUnreachable``). ``wait_transfer`` polls a
transfer until it ends, reporting progress through a callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from taugrid import errors
from taugrid.sdk.client import client

__all__ = [
    "dataset",
    "datasets",
    "explain_placement",
    "links",
    "regions",
    "register",
    "replicas",
    "replicate",
    "transfers",
    "wait_transfer",
]

Doc = dict[str, Any]


def register(
    c: client.Client,
    name: str,
    region: str,
    path: str,
    version: str = "v1",
    workspace: str | None = None,
) -> Doc:
    body = {"name": name, "region": region, "path": path, "version": version}
    if workspace is not None:
        body["workspace"] = workspace
    out: Doc = c.request("POST", "/v1/datasets", json=body)
    return out


def datasets(c: client.Client, workspace: str | None = None) -> list[Doc]:
    params = {"workspace": workspace} if workspace else {}
    out: list[Doc] = c.request("GET", "/v1/datasets", params=params)
    return out


def dataset(c: client.Client, ref: str) -> Doc:
    out: Doc = c.request("GET", f"/v1/datasets/{quote(ref)}")
    return out


def replicas(c: client.Client, ref: str) -> list[Doc]:
    out: list[Doc] = c.request("GET", f"/v1/datasets/{quote(ref)}/replicas")
    return out


def replicate(
    c: client.Client,
    ref: str,
    to_region: str,
    from_region: str | None = None,
    to_url: str | None = None,
) -> Doc:
    body = {"to_region": to_region, "from_region": from_region, "to_url": to_url}
    out: Doc = c.request("POST", f"/v1/datasets/{quote(ref)}/replicate", json=body)
    return out


def transfers(c: client.Client, state: str | None = None) -> list[Doc]:
    out: list[Doc] = c.request("GET", "/v1/transfers", params={"state": state} if state else {})
    return out


def wait_transfer(
    c: client.Client,
    transfer_id: int,
    progress: Callable[[Doc], None] | None = None,
    timeout_s: float = 3600.0,
    poll_s: float = 0.5,
) -> Doc:
    """Poll until the transfer is done or failed; returns its last row."""
    deadline = time.monotonic() + timeout_s
    while True:
        row = next((t for t in transfers(c) if t["id"] == transfer_id), None)
        if row is None:
            raise errors.UserError(f"no transfer {transfer_id}", "list them: tau data show NAME")
        if progress is not None:
            progress(row)
        if row["state"] in ("done", "failed"):
            return row
        if time.monotonic() > deadline:
            raise errors.SystemFault(
                f"transfer {transfer_id} still {row['state']} after {timeout_s:.0f} s",
                "it keeps going; check it with: tau data show NAME",
            )
        time.sleep(poll_s)


def links(c: client.Client) -> Doc:
    out: Doc = c.request("GET", "/v1/links")
    return out


def regions(c: client.Client) -> list[Doc]:
    """One row per region: its clusters' capacity and health, and its measured inbound links."""
    clusters = c.clusters()
    matrix = links(c)
    names = list(matrix["regions"]) + sorted(
        {x["region"] for x in clusters} - set(matrix["regions"])
    )
    out = []
    for name in names:
        mine = [x for x in clusters if x["region"] == name]
        models: dict[str, int] = {}
        for x in mine:
            for m, n in x["report"].get("gpu_models", {}).items():
                models[m] = models.get(m, 0) + int(n)
        out.append(
            {
                "region": name,
                "clusters": [x["id"] for x in mine],
                "state": ",".join(sorted({x["state"] for x in mine})) or "no agent",
                "gpu_models": models,
                "gpu_free": sum(float(x["report"].get("gpu_free", 0)) for x in mine),
                "gpu_busy": sum(float(x["report"].get("gpu_busy", 0)) for x in mine),
                "queued_jobs": sum(int(x["report"].get("queued_jobs", 0)) for x in mine),
                "last_heartbeat": max((x["last_heartbeat"] for x in mine), default=None),
                "datasets": sorted(
                    {d for x in mine for d in x["report"].get("cached_datasets", [])}
                ),
                "inbound": [ln for ln in matrix["links"] if ln["dst"] == name],
            }
        )
    return out


def explain_placement(c: client.Client, ref: str) -> Doc:
    out: Doc = c.request("GET", f"/v1/runs/{quote(ref)}/placement")
    return out

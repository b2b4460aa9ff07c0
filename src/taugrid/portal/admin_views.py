"""Platform pages (admin role): regions and clusters with the measured link matrix and
GPU utilisation over time, nodes, queue, quotas and borrowing per team/cohort, quota
requests, audit.

A researcher opening one of these gets a refusal page (403) and no data: the check is
made on the role the hub reports for the session's token before anything is fetched.
Actions (approve/reject a quota request, mark/clear a node) call the same admin API the
CLI does and are audited by the hub as the signed-in user.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import fastapi
from fastapi import responses

from taugrid.portal import charts, pages, render, session
from taugrid.sdk.client import client, data, tenancy, usage

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/ui/admin", include_in_schema=False)


def _admin_page(
    request: fastapi.Request, name: str, load: Callable[[client.Client], dict[str, Any]]
) -> fastapi.Response:
    with session.api(request) as c:
        ctx = pages.context(request, c, name)
        if not ctx["is_admin"]:
            msg = "the platform pages need an admin token"
            hint = "sign in with an admin token, or ask a platform admin"
            return render.html(
                "error.html", 403, **ctx, title="Not allowed", message=msg, hint=hint
            )
        return render.html(f"admin_{name}.html", **ctx, **load(c))


@router.get("/platform")
def platform_page(request: fastapi.Request) -> fastapi.Response:
    def load(c: client.Client) -> dict[str, Any]:
        matrix = data.links(c)
        return {
            "regions": data.regions(c),
            "clusters": c.clusters(),
            "matrix": _matrix(matrix),
            "util": _util_charts(usage.utilization(c)),
        }

    return _admin_page(request, "platform", load)


def _matrix(doc: dict[str, Any]) -> dict[str, Any]:
    """Rows = source region, columns = destination region, cell = the measured link."""
    names = sorted({*doc["regions"], *(x["src"] for x in doc["links"])})
    cells = {(x["src"], x["dst"]): x for x in doc["links"]}
    return {"regions": names, "cells": {f"{s}>{d}": v for (s, d), v in cells.items()}}


def _util_charts(doc: dict[str, Any]) -> list[charts.Chart | charts.Constant]:
    """One chart per source of the figure (nvml / allocation), one line per region;
    x = minutes before now, y = percent."""
    now = time.time()
    series = {
        region: [
            {
                "name": f"GPU utilisation % ({x['source']})",
                "step": round((x["ts"] - now) / 60, 2),
                "value": 100 * x["utilization"],
            }
            for x in samples
        ]
        for region, samples in doc["regions"].items()
    }
    return charts.charts(sorted(series.items()), xlabel="min")


@router.get("/quotas")
def quotas_page(request: fastapi.Request) -> fastapi.Response:
    """Quotas and borrowing per team, grouped by cohort (teams lend within a cohort)."""

    def load(c: client.Client) -> dict[str, Any]:
        cohorts: dict[str, list[dict[str, Any]]] = {}
        for team in usage.teams(c):
            cohorts.setdefault(team["cohort"] or "", []).append(team)
        return {"cohorts": sorted(cohorts.items())}

    return _admin_page(request, "quotas", load)


@router.get("/queue")
def queue_page(request: fastapi.Request) -> fastapi.Response:
    return _admin_page(request, "queue", lambda c: {"queue": tenancy.queue(c)})


@router.get("/quota")
def quota_page(request: fastapi.Request) -> fastapi.Response:
    return _admin_page(request, "quota", lambda c: {"requests": tenancy.quota_requests(c)})


@router.get("/audit")
def audit_page(request: fastapi.Request) -> fastapi.Response:
    return _admin_page(request, "audit", lambda c: {"rows": tenancy.audit(c, 200)})


async def _act(
    request: fastapi.Request, back: str, do: Callable[[client.Client, dict[str, str]], Any]
) -> fastapi.Response:
    fields = await session.form(request)
    session.check_csrf(request, fields, session.csrf_token(session.token_of(request)))

    def run() -> None:
        with session.api(request) as c:
            do(c, fields)

    await anyio.to_thread.run_sync(run)
    return responses.RedirectResponse(back, status_code=303)


@router.post("/quota/{request_id}/approve")
async def approve(request: fastapi.Request, request_id: str) -> fastapi.Response:
    def do(c: client.Client, f: dict[str, str]) -> None:
        tenancy.approve_quota(c, request_id, f.get("reason", ""))

    return await _act(request, "/ui/admin/quota", do)


@router.post("/quota/{request_id}/reject")
async def reject(request: fastapi.Request, request_id: str) -> fastapi.Response:
    def do(c: client.Client, f: dict[str, str]) -> None:
        tenancy.reject_quota(c, request_id, f.get("reason", ""))

    return await _act(request, "/ui/admin/quota", do)


@router.post("/nodes/mark")
async def mark(request: fastapi.Request) -> fastapi.Response:
    def do(c: client.Client, f: dict[str, str]) -> None:
        c.mark_node(f.get("cluster_id", ""), f.get("node_id", ""), "cordon", f.get("reason", ""))

    return await _act(request, "/ui/admin/platform", do)


@router.post("/nodes/clear")
async def clear(request: fastapi.Request) -> fastapi.Response:
    def do(c: client.Client, f: dict[str, str]) -> None:
        node = {"cluster_id": f.get("cluster_id", ""), "node_id": f.get("node_id", "")}
        body = {**node, "kind": "cordon"}
        c.request("POST", "/v1/admin/nodes/clear", json=body)

    return await _act(request, "/ui/admin/platform", do)

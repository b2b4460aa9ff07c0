"""HTTP routes of the hub (FastAPI, OpenAPI at /openapi.json), version ``/v1``.

Owns request parsing, authorization checks and the mapping of errors to status codes:
``SpecError`` → 422 with ``problems`` (file:line:col each); ``NotFound`` → 404; other
``UserError`` → 400 with ``detail`` and ``hint``. Handlers stay thin: they call
``hub.runs.runs``, ``hub.agents.agents`` and the stores.
"""

from __future__ import annotations

from typing import Annotated, Any

import fastapi
from fastapi import responses

from taugrid import errors
from taugrid import payloads as wire
from taugrid.hub.agents import agents
from taugrid.hub.api.auth import Admin, Auth, Principal, require_agent, workspaces_of
from taugrid.hub.core import context
from taugrid.hub.data import data_ops
from taugrid.hub.dev import sessions
from taugrid.hub.metrics import util_history
from taugrid.hub.runs import results, runs
from taugrid.hub.tenancy import cost, tenancy
from taugrid.record import layout
from taugrid.record.run import resolve_inside
from taugrid.spec import errors as spec_errors

__all__ = ["install_error_handlers", "router"]

router = fastapi.APIRouter(prefix="/v1")
Agent = Annotated[Principal, fastapi.Depends(require_agent)]
_INT32 = 2**31 - 1  # integer columns (event ids, fencing tokens) are 32-bit on PostgreSQL


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def install_error_handlers(app: fastapi.FastAPI) -> None:
    @app.exception_handler(errors.UserError)
    async def _user_error(_: fastapi.Request, exc: errors.UserError) -> responses.JSONResponse:
        body: dict[str, Any] = {"detail": exc.message, "hint": exc.hint}
        if isinstance(exc, spec_errors.SpecError):
            body["problems"] = [p.to_dict() for p in exc.problems]
            return responses.JSONResponse(body, status_code=422)
        return responses.JSONResponse(
            body, status_code=404 if isinstance(exc, runs.NotFound) else 400
        )


def _run(request: fastapi.Request, ref: str, p: Principal) -> dict[str, Any]:
    return runs.find(_hub(request), ref, workspaces_of(p))


@router.post("/runs", status_code=201)
def submit_run(request: fastapi.Request, body: wire.SubmitRequest, p: Auth) -> dict[str, Any]:
    hub = _hub(request)
    body = runs.default_workspace(body, workspaces_of(p))
    spec = runs.resolve_request(hub, body)
    if not p.can_see(spec.workspace):
        raise fastapi.HTTPException(403, f"you are not a member of workspace {spec.workspace}")
    data_ops.check_inputs(hub, spec.workspace, [i.dataset for i in spec.inputs])
    results.check(hub, spec.workspace, spec.model_dump(mode="json"))
    if body.dry_run:  # runs.submit checks them otherwise
        hub.vault.check(spec.workspace, spec.secrets)
        return {"dry_run": True, "spec": spec.model_dump(mode="json")}
    row = runs.submit(hub, body, p.name, spec=spec)  # resolved once, above
    request.app.state.scheduler.wake()
    return {k: v for k, v in row.items() if k != "config_yaml"}


@router.get("/runs")
def list_runs(
    request: fastapi.Request,
    p: Auth,
    workspace: str | None = None,
    state: str | None = None,
    limit: Annotated[int, fastapi.Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    allowed = workspaces_of(p)
    wss = [workspace] if workspace else allowed
    if allowed is not None and workspace and workspace not in allowed:
        raise fastapi.HTTPException(403, f"you are not a member of workspace {workspace}")
    hub = _hub(request)
    rows = hub.runs.list_runs(wss, state.split(",") if state else None, min(limit, 1000))
    specs = hub.runs.get_runs([r["id"] for r in rows])
    for r in rows:  # kind: dev (a session, hub.dev.sessions) or the workload kind
        r["kind"] = sessions.kind(specs[r["id"]]["spec"]) if r["id"] in specs else "rayjob"
    return rows


@router.get("/runs/{ref}")
def get_run(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    """The run with ``same_name``: IDs of the runs sharing its name, newest first."""
    run = _run(request, ref, p)
    out = runs.detail(_hub(request), run)
    out["same_name"] = _hub(request).runs.ids_named(run["name"], workspaces_of(p))
    return out


@router.post("/runs/{ref}/cancel")
def cancel_run(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    out = runs.cancel(_hub(request), _run(request, ref, p), p.name)
    return runs.detail(_hub(request), out)


@router.post("/runs/{ref}/resume")
def resume_run(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    out = runs.resume(_hub(request), _run(request, ref, p), p.name)
    request.app.state.scheduler.wake()
    return runs.detail(_hub(request), out)


@router.get("/runs/{ref}/logs")
def run_logs(
    request: fastapi.Request,
    ref: str,
    p: Auth,
    offset: Annotated[int, fastapi.Query(ge=0)] = 0,
    tail: Annotated[int | None, fastapi.Query(ge=0, le=1_000_000)] = None,
) -> dict[str, Any]:
    text = runs.record_of(_hub(request), _run(request, ref, p)).read_log()
    if tail is not None:
        return {
            "text": "\n".join(text.splitlines()[-tail:]) + ("\n" if text else ""),
            "offset": len(text),
        }
    return {"text": text[offset:], "offset": len(text)}


@router.get("/runs/{ref}/metrics")
def run_metrics(
    request: fastapi.Request, ref: str, p: Auth, name: str | None = None
) -> list[dict[str, Any]]:
    return _hub(request).runs.metrics(_run(request, ref, p)["id"], name)


@router.get("/runs/{ref}/events")
def run_events(
    request: fastapi.Request,
    ref: str,
    p: Auth,
    after: Annotated[int, fastapi.Query(ge=0, le=_INT32)] = 0,
) -> list[dict[str, Any]]:
    return _hub(request).runs.events(_run(request, ref, p)["id"], after)


@router.get("/runs/{ref}/files")
def run_files(request: fastapi.Request, ref: str, p: Auth, sub: str = "") -> list[dict[str, Any]]:
    return runs.record_of(_hub(request), _run(request, ref, p)).files(sub)


@router.get("/runs/{ref}/file")
def run_file(request: fastapi.Request, ref: str, path: str, p: Auth) -> fastapi.Response:
    rec = runs.record_of(_hub(request), _run(request, ref, p))
    missing = runs.NotFound(
        f"no file '{path}' in the run's record", "list files with: tau run get NAME --list"
    )
    if rec.dir is None:  # an object store: the object, fetched by the hub
        data = rec.read_bytes(path)
        if data is None:
            raise missing
        return fastapi.Response(data, media_type="application/octet-stream")
    target = resolve_inside(rec.dir, path)
    if not target.is_file():
        raise missing
    return responses.FileResponse(target)


@router.get("/runs/{ref}/cost")
def run_cost(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    """GPU-hours x the pool's price plus egress, per attempt and copy (``hub.tenancy.cost``)."""
    return cost.run_cost(_hub(request), _run(request, ref, p)["id"])


@router.get("/admin/utilization")
def utilization(request: fastapi.Request, p: Admin) -> dict[str, Any]:
    """GPU utilisation per region over time, as the hub sampled its agents' reports."""
    return util_history.of(_hub(request)).series()


@router.get("/clusters")
def list_clusters(request: fastapi.Request, p: Auth) -> list[dict[str, Any]]:
    hub = _hub(request)
    marks = hub.clusters.open_marks()
    out = []
    for c in hub.clusters.all():
        nodes = _node_ids(c)  # marks on nodes gone from the report are not shown
        c["faulty_nodes"] = [
            m for m in marks if m["cluster_id"] == c["id"] and m["node_id"] in nodes
        ]
        out.append(c)
    return out


def _node_ids(cluster: dict[str, Any]) -> set[str]:
    return {str(n.get("node_id")) for n in (cluster.get("report") or {}).get("nodes", [])}


@router.get("/platform")
def get_platform(request: fastapi.Request, p: Auth) -> dict[str, Any]:
    allowed = [] if p.role == "agent" else workspaces_of(p)
    return tenancy.visible_platform(_hub(request).platform, allowed).model_dump(mode="json")


@router.post("/agents/{cluster_id}/register")
def agent_register(
    request: fastapi.Request, cluster_id: str, body: wire.AgentRegister, p: Agent
) -> dict[str, Any]:
    return {"lease_expires": agents.register(_hub(request), body)}


@router.post("/agents/{cluster_id}/sync")
async def agent_sync(
    request: fastapi.Request, cluster_id: str, body: wire.AgentSync, p: Agent
) -> wire.AgentSyncReply:
    reply = await agents.sync_async(_hub(request), cluster_id, body)
    if body.attempts:
        request.app.state.scheduler.wake()
    return reply


@router.get("/agents/{cluster_id}/code/{run_id}")
def agent_code(
    request: fastapi.Request, cluster_id: str, run_id: str, p: Agent
) -> fastapi.Response:
    hub = _hub(request)
    run = hub.runs.get_run(run_id)
    if run is None or run["cluster_id"] != cluster_id:
        raise runs.NotFound(f"run {run_id} is not assigned to cluster {cluster_id}")
    code = runs.record_of(hub, run).read_bytes(layout.CODE_ARCHIVE)
    return fastapi.Response(code or b"", media_type="application/zip")

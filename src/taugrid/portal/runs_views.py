"""Researcher pages: the runs list, a run's page, its live stream, downloads, actions.

Every page carries its content in the first response (usable without JavaScript);
``static/portal.js`` layers live updates on top through the ``.../stream`` endpoints
(server-sent events). Runs of workspaces the token may not see are "not found", as in
the API.

The log opens at its newest lines: the page carries the log's last ``LOG_LINES`` lines
(at most ``LOG_CHARS`` characters, read from the hub by offset, not the whole log), its
box starts scrolled to the end (CSS without JavaScript, ``portal.js`` with it) and
follows the stream while the reader stays at the end.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote

import anyio.to_thread
import fastapi
from fastapi import responses

from taugrid import errors
from taugrid.portal import charts, checkpoints, pages, render, session
from taugrid.render import plan, runspec
from taugrid.sdk.client import client, data, tenancy, usage

__all__ = ["LOG_CHARS", "LOG_LINES", "router"]

router = fastapi.APIRouter(prefix="/ui", include_in_schema=False)
_SORTS = {"created": "created_at", "name": "name", "state": "state", "workspace": "workspace"}
LOG_CHARS = 200_000  # at most this much of the log in the first response (the rest: download)
LOG_LINES = 2_000  # and at most this many lines
Q = Annotated[str, fastapi.Query(max_length=200)]


def _runs(c: client.Client, workspace: str, state: str, q: str, sort: str) -> list[dict[str, Any]]:
    rows = c.runs(workspace or None, state or None, limit=1000)
    if q:
        rows = [r for r in rows if q.lower() in str(r["name"]).lower() or q in str(r["id"])]
    key = _SORTS.get(sort.lstrip("-"), "created_at")
    rows.sort(key=lambda r: (r.get(key) is None, r.get(key)), reverse=sort.startswith("-"))
    return rows


@router.get("/runs")
def runs_page(
    request: fastapi.Request, workspace: Q = "", state: Q = "", q: Q = "", sort: Q = "-created"
) -> fastapi.Response:
    with session.api(request) as c:
        ctx = pages.context(request, c, "runs")
        rows = _runs(c, workspace, state, q, sort)
        workspaces = [w["name"] for w in tenancy.workspaces(c)]
    filters = {"workspace": workspace, "state": state, "q": q, "sort": sort}
    args = {**filters, "fp": _list_fp(rows)}
    stream = "/ui/runs/stream?" + "&".join(f"{k}={quote(v)}" for k, v in args.items() if v)
    return render.html(
        "runs.html", **ctx, runs=rows, filters=filters, workspaces=workspaces, stream=stream
    )


@router.get("/runs/stream")
def runs_stream(
    request: fastapi.Request,
    workspace: Q = "",
    state: Q = "",
    q: Q = "",
    sort: Q = "-created",
    fp: Q = "",
) -> responses.StreamingResponse:
    def poll(c: client.Client, st: dict[str, Any]) -> list[str]:
        now = _list_fp(_runs(c, workspace, state, q, sort))
        changed, st["fp"] = now != st["fp"], now
        return [pages.sse("changed", {}, now)] if changed else [": idle\n\n"]

    return pages.stream(request, poll, {"fp": request.headers.get("last-event-id") or fp}, 2.0)


def _list_fp(rows: list[dict[str, Any]]) -> str:
    """What the runs list shows changes iff this does (the page and its stream agree)."""
    # not updated_at: the scheduler touches a waiting run every cycle without a change
    shown = ("id", "state", "reason", "cluster_id", "attempts_used")
    text = json.dumps([[r.get(k) for k in shown] for r in rows])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run_fp(run: dict[str, Any], n_metrics: int) -> str:
    shown = [run["state"], run["reason"], run["cluster_id"], run["phases"], run["attempts"]]
    shown.append(run.get("gaps"))
    text = json.dumps([*shown, n_metrics], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _log(c: client.Client, ref: str, q: str) -> tuple[str, int, bool]:
    """The log's newest lines (filtered by ``q``), the offset they end at, whether older
    text was left out. Only the last ``LOG_CHARS`` travel from the hub."""
    end = int(c.logs(ref, tail=1)["offset"])
    start = max(0, end - LOG_CHARS)
    doc = c.logs(ref, start)
    text, offset = str(doc["text"]), int(doc["offset"])
    lines = text.splitlines(True)
    if start > 0:
        lines = lines[1:]  # the first one was cut by the offset
    cut = start > 0 or len(lines) > LOG_LINES
    text = "".join(lines[-LOG_LINES:])
    if q:
        text = "".join(line for line in text.splitlines(True) if q in line)
    return text, offset, cut


@router.get("/runs/{ref}")
def run_page(request: fastapi.Request, ref: str, log_q: Q = "") -> fastapi.Response:
    with session.api(request) as c:
        ctx = pages.context(request, c, "runs")
        run = c.run(ref)
        metrics = c.metrics(ref)
        files = c.files(ref, "artifacts")
        saved = checkpoints.load(c, ref)
        log, offset, cut = _log(c, ref, log_q)
        placement = _side(lambda: data.explain_placement(c, ref))
        cost = _side(lambda: usage.run_cost(c, ref))
        rendered = c.files(ref, "rendered")
    return render.html(
        "run.html",
        **ctx,
        run=run,
        charts=charts.charts([(str(run["name"]), metrics)]),
        files=files,
        checkpoints=saved,
        files_shown=checkpoints.FILES_SHOWN,
        log=log,
        log_offset=offset,
        log_cut=cut,
        log_q=log_q,
        placement=placement,
        cost=cost,
        config=_config(run),
        manifests=_manifests(run),
        rendered=rendered,
        fp=_run_fp(run, len(metrics)),
    )


def _side(load: Callable[[], Any]) -> Any:
    """A side panel's data; its failure is shown in the panel, never fails the page."""
    try:
        return load()
    except (client.ApiError, client.HubUnreachable) as exc:
        return {"unavailable": exc.message}


def _config(run: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The resolved config: ``(field, value, where it came from)`` per field."""
    spec = dict(run.get("spec") or {})
    prov: dict[str, str] = spec.pop("provenance", None) or {}
    rows = []
    for key, value in spec.items():
        src = prov.get(key) or ", ".join(
            sorted({v for k, v in prov.items() if k.startswith(f"{key}.")})
        )
        rows.append((key, json.dumps(value, default=str), src or "-"))
    return rows


def _manifests(run: dict[str, Any]) -> str:
    """The Kubernetes objects this run renders to (what a Kubernetes region applies)."""
    try:
        spec = runspec.read(run.get("spec") or {})
    except errors.TauError as exc:  # a spec this release cannot read says what to upgrade
        return f"# cannot render this run's stored spec: {exc}".splitlines()[0]
    return plan.to_yaml(plan.render_manifests(spec, str(run["id"])))


@router.get("/runs/{ref}/stream")
def run_stream(
    request: fastapi.Request,
    ref: str,
    offset: Annotated[int, fastapi.Query(ge=0)] = 0,
    fp: Q = "",
) -> responses.StreamingResponse:
    """Log text after ``offset`` and ``changed`` when the run's fingerprint leaves ``fp``;
    event ids are ``offset:fingerprint``, so a reconnect resumes where it stopped."""
    last_offset, _, last_fp = request.headers.get("last-event-id", "").partition(":")
    start = {
        "offset": int(last_offset) if last_offset.isdigit() else offset,
        "fp": last_fp or fp,
    }

    def poll(c: client.Client, st: dict[str, Any]) -> list[str]:
        out = []
        doc = c.logs(ref, st["offset"])
        if doc["text"]:
            st["offset"] = int(doc["offset"])
            out.append(pages.sse("log", {"text": doc["text"]}, f"{st['offset']}:{st['fp']}"))
        run = c.run(ref)
        now = _run_fp(run, len(c.metrics(ref)))
        if now != st["fp"]:
            st["fp"] = now
            out.append(pages.sse("changed", {"state": run["state"]}, f"{st['offset']}:{now}"))
        return out or [": idle\n\n"]

    return pages.stream(request, poll, start)


@router.get("/compare")
def compare_page(
    request: fastapi.Request, run: Annotated[list[str] | None, fastapi.Query()] = None
) -> fastapi.Response:
    """Several runs' metrics overlaid: one chart per metric, one line per run."""
    refs = list(dict.fromkeys(run or []))[:6]
    with session.api(request) as c:
        ctx = pages.context(request, c, "runs")
        runs = [c.run(ref) for ref in refs]
        series = [(f"{r['name']} ({r['id']})", c.metrics(r["id"])) for r in runs]
    return render.html("compare.html", **ctx, runs=runs, charts=charts.charts(series))


@router.get("/runs/{ref}/log")
def run_log_download(request: fastapi.Request, ref: str) -> fastapi.Response:
    with session.api(request) as c:
        text = str(c.logs(ref)["text"])
    headers = {"Content-Disposition": f'attachment; filename="{_safe(ref)}.log"'}
    return responses.PlainTextResponse(text, headers={**render.SECURITY_HEADERS, **headers})


@router.get("/runs/{ref}/file")
def run_file(request: fastapi.Request, ref: str, path: Q) -> fastapi.Response:
    with session.api(request) as c:
        body = c.download(ref, path)
    name = _safe(path.rsplit("/", 1)[-1])
    headers = {**render.SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
    return fastapi.Response(body, media_type="application/octet-stream", headers=headers)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "download"


async def _action(request: fastapi.Request, ref: str, verb: str) -> fastapi.Response:
    fields = await session.form(request)
    session.check_csrf(request, fields, session.csrf_token(session.token_of(request)))

    def act() -> None:
        with session.api(request) as c:
            c.cancel(ref) if verb == "cancel" else c.resume(ref)

    await anyio.to_thread.run_sync(act)
    return responses.RedirectResponse(f"/ui/runs/{quote(ref)}", status_code=303)


@router.post("/runs/{ref}/cancel")
async def cancel(request: fastapi.Request, ref: str) -> fastapi.Response:
    return await _action(request, ref, "cancel")


@router.post("/runs/{ref}/resume")
async def resume(request: fastapi.Request, ref: str) -> fastapi.Response:
    return await _action(request, ref, "resume")

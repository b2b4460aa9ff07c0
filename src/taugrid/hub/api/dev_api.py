"""HTTP routes of interactive sessions: ``/v1/sessions`` (thin wrappers over
``hub.dev.sessions``) and ``/v1/dev/<workspace>/<name>/...``, the session's JupyterLab
through the hub (``hub.dev.proxy``: HTTP and websocket, bearer token or the ``tau_dev``
cookie a ticket sets). Researchers reach sessions of their workspaces only.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import fastapi

from taugrid import payloads as wire
from taugrid.hub.api import auth
from taugrid.hub.api.auth import Auth, workspaces_of
from taugrid.hub.core import context
from taugrid.hub.dev import proxy, sessions

__all__ = ["door", "router"]

router = fastapi.APIRouter(prefix="/v1/sessions")
door = fastapi.APIRouter(prefix="/v1/dev")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _hub(request: fastapi.requests.HTTPConnection) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _proxy(request: fastapi.requests.HTTPConnection) -> proxy.Proxy:
    state = request.app.state
    if getattr(state, "dev_proxy", None) is None:
        state.dev_proxy = proxy.Proxy(_hub(request))
    got: proxy.Proxy = state.dev_proxy
    return got


def _scope(p: auth.Principal, workspace: str | None) -> list[str] | None:
    allowed = workspaces_of(p)
    if workspace is None:
        return allowed
    if allowed is not None and workspace not in allowed:
        raise fastapi.HTTPException(403, f"you are not a member of workspace {workspace}")
    return [workspace]


@router.post("", status_code=201)
def up(request: fastapi.Request, body: wire.DevUpRequest, p: Auth) -> dict[str, Any]:
    out = sessions.up(_hub(request), body, workspaces_of(p), p.name)
    request.app.state.scheduler.wake()
    _proxy(request).forget(out["workspace"], out["name"])
    return out


@router.get("")
def list_sessions(
    request: fastapi.Request, p: Auth, workspace: str | None = None
) -> list[dict[str, Any]]:
    return sessions.list_views(_hub(request), _scope(p, workspace))


def _session(
    request: fastapi.Request, name: str, p: auth.Principal, workspace: str | None
) -> dict[str, Any]:
    run = sessions.find(_hub(request), name, _scope(p, workspace))
    if run is None:
        raise fastapi.HTTPException(
            404, f"no interactive session named '{name}'; list them with: tau dev list"
        )
    return run


@router.get("/{name}")
def get_session(
    request: fastapi.Request, name: str, p: Auth, workspace: str | None = None
) -> dict[str, Any]:
    return sessions.view(_hub(request), _session(request, name, p, workspace))


@router.post("/{name}/stop")
def stop(
    request: fastapi.Request, name: str, p: Auth, workspace: str | None = None
) -> dict[str, Any]:
    run = _session(request, name, p, workspace)
    out = sessions.stop(_hub(request), name, [run["workspace"]], p.name)
    _proxy(request).forget(out["workspace"], name)
    return out


@router.post("/{name}/ticket")
def ticket(
    request: fastapi.Request, name: str, p: Auth, workspace: str | None = None
) -> dict[str, Any]:
    """The URL that signs a browser in to the session (``tau dev open``): single use."""
    run = _session(request, name, p, workspace)
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    t = _proxy(request).ticket(bearer, run["workspace"], name)
    base = str(request.base_url).rstrip("/")
    path = sessions.path_of(run["workspace"], name)
    query = urllib.parse.urlencode({proxy.TICKET_PARAM: t})
    return {"url": f"{base}{path}lab?{query}", "expires_in_s": proxy.TICKET_S}


async def _caller(conn: fastapi.requests.HTTPConnection, workspace: str) -> auth.Principal:
    """The caller by bearer token or session cookie, who must see ``workspace``."""
    header = conn.headers.get("authorization", "")
    if header.startswith("Bearer "):
        p = await auth.principal_of(conn, header.removeprefix("Bearer ").strip())
    else:
        token = proxy.cookie_token(conn.cookies.get(proxy.COOKIE, ""))
        if token is None:
            raise fastapi.HTTPException(
                401,
                "not signed in to this session; open it with: tau dev open NAME "
                "(or send a bearer token)",
            )
        p = await auth.principal_of(conn, token)
    auth.require_workspace(p, workspace)
    return p


def _same_origin(request: fastapi.Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urllib.parse.urlsplit(origin).netloc == request.headers.get("host", "")


@door.api_route("/{workspace}/{name}/{path:path}", methods=METHODS)
async def forward(
    request: fastapi.Request, workspace: str, name: str, path: str = ""
) -> fastapi.Response:
    """The session's JupyterLab, through the hub."""
    ticket_ = request.query_params.get(proxy.TICKET_PARAM)
    if ticket_ is not None:
        return _redeem(request, ticket_, workspace, name)
    await _caller(request, workspace)
    by_cookie = not request.headers.get("authorization", "").startswith("Bearer ")
    if by_cookie and request.method not in ("GET", "HEAD") and not _same_origin(request):
        raise fastapi.HTTPException(403, "a cross-origin request to a session is refused")
    return await _proxy(request).forward(request, workspace, name, path)


def _redeem(request: fastapi.Request, ticket_: str, workspace: str, name: str) -> fastapi.Response:
    token = _proxy(request).redeem(ticket_, workspace, name)
    if token is None:
        raise fastapi.HTTPException(
            401, f"this link was used or has expired; get a new one with: tau dev open {name}"
        )
    query = [(k, v) for k, v in request.query_params.multi_items() if k != proxy.TICKET_PARAM]
    url = request.url.path + (f"?{urllib.parse.urlencode(query)}" if query else "")
    out = fastapi.responses.RedirectResponse(url, status_code=303)
    out.set_cookie(
        proxy.COOKIE,
        proxy.cookie_value(token),
        max_age=int(proxy.COOKIE_S),
        path=sessions.path_of(workspace, name),
        httponly=True,
        samesite="strict",
    )
    return out


@door.websocket("/{workspace}/{name}/{path:path}")
async def forward_ws(ws: fastapi.WebSocket, workspace: str, name: str, path: str = "") -> None:
    """The session's websockets (kernels, terminals), through the hub."""
    try:
        await _caller(ws, workspace)
    except fastapi.HTTPException as exc:
        await ws.close(1008, str(exc.detail)[:120])
        return
    by_cookie = not ws.headers.get("authorization", "").startswith("Bearer ")
    origin = ws.headers.get("origin")
    if by_cookie and origin and urllib.parse.urlsplit(origin).netloc != ws.headers.get("host"):
        await ws.close(1008, "a cross-origin websocket to a session is refused")
        return
    await _proxy(ws).websocket(ws, workspace, name, path)

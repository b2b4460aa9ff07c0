"""HTTP routes of serving deployments (``/v1/serve``): thin wrappers over ``hub.serving.serving``.

Researchers see and change deployments of their workspaces only, as with runs.
``endpoints`` is the hub's endpoint of each deployment
(``/v1/endpoints/<workspace>/<name>/...``, ``hub.serving.serve_router``): it takes the same
bearer token and forwards to the nearest healthy region.
"""

from __future__ import annotations

from typing import Any

import fastapi

from taugrid import payloads as wire
from taugrid.hub.api.auth import Auth, workspaces_of
from taugrid.hub.core import context
from taugrid.hub.serving import serve_router, serving

__all__ = ["endpoints", "router"]

router = fastapi.APIRouter(prefix="/v1/serve")
endpoints = fastapi.APIRouter(prefix="/v1/endpoints")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _router(request: fastapi.Request) -> serve_router.Router:
    state = request.app.state
    if getattr(state, "serve_router", None) is None:
        state.serve_router = serve_router.Router(_hub(request))
    router_: serve_router.Router = state.serve_router
    return router_


def _shown(request: fastapi.Request, dep: dict[str, Any]) -> dict[str, Any]:
    """``hub_endpoint`` (the ``endpoint`` too, of a multi-region deployment) and each
    region's health and RTT as the hub's router sees them."""
    base = str(request.base_url).rstrip("/")
    dep["hub_endpoint"] = f"{base}/v1/endpoints/{dep['workspace']}/{dep['name']}"
    if dep["phase"] != "Deleted" and dep["source"].get("regions"):
        dep["endpoint"] = dep["hub_endpoint"]
    if dep["phase"] != "Deleted":
        dep["regions"] = _router(request).regions(dep["workspace"], dep["name"], None)
    return dep


def _wake(request: fastapi.Request) -> None:
    request.app.state.scheduler.wake()


@router.post("", status_code=201)
def deploy(request: fastapi.Request, body: wire.DeployRequest, p: Auth) -> dict[str, Any]:
    out = serving.deploy(_hub(request), body, workspaces_of(p), p.name)
    _wake(request)
    return _shown(request, out)


@router.get("")
def list_deployments(request: fastapi.Request, p: Auth) -> list[dict[str, Any]]:
    return [_shown(request, d) for d in serving.list_views(_hub(request), workspaces_of(p))]


@router.get("/{name}")
def get_deployment(request: fastapi.Request, name: str, p: Auth) -> dict[str, Any]:
    dep = serving.find(_hub(request), name, workspaces_of(p))
    return _shown(request, serving.view(_hub(request), dep))


@router.post("/{name}/update")
def update(
    request: fastapi.Request, name: str, body: wire.DeployRequest, p: Auth
) -> dict[str, Any]:
    body = body.model_copy(update={"name": name})
    out = serving.update(_hub(request), body, workspaces_of(p), p.name)
    _wake(request)
    return _shown(request, out)


@router.post("/{name}/scale")
def scale(request: fastapi.Request, name: str, body: wire.ScaleRequest, p: Auth) -> dict[str, Any]:
    out = serving.scale(_hub(request), name, body.replicas, workspaces_of(p), p.name)
    _wake(request)
    return _shown(request, out)


@router.delete("/{name}")
def delete(request: fastapi.Request, name: str, p: Auth) -> dict[str, Any]:
    out = serving.delete(_hub(request), name, workspaces_of(p), p.name)
    _router(request).forget(out["workspace"], name)
    return _shown(request, out)


@endpoints.api_route("/{workspace}/{name}", methods=METHODS)
@endpoints.api_route("/{workspace}/{name}/{path:path}", methods=METHODS)
async def forward(
    request: fastapi.Request, workspace: str, name: str, p: Auth, path: str = ""
) -> fastapi.Response:
    """The deployment's one URL: forwarded to its nearest healthy region."""
    return await _router(request).forward(request, workspace, name, path, workspaces_of(p))

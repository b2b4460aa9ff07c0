"""HTTP routes of serving deployments (``/v1/serve``): thin wrappers over ``hub.serving``.

Researchers see and change deployments of their workspaces only, as with runs.
"""

from __future__ import annotations

from typing import Annotated, Any

import fastapi

from taugrid import payloads as wire
from taugrid.hub import context, serving
from taugrid.hub.auth import Principal, principal, workspaces_of

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/v1/serve")
Auth = Annotated[Principal, fastapi.Depends(principal)]


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _wake(request: fastapi.Request) -> None:
    request.app.state.scheduler.wake()


@router.post("", status_code=201)
def deploy(request: fastapi.Request, body: wire.DeployRequest, p: Auth) -> dict[str, Any]:
    out = serving.deploy(_hub(request), body, workspaces_of(p), p.name)
    _wake(request)
    return out


@router.get("")
def list_deployments(request: fastapi.Request, p: Auth) -> list[dict[str, Any]]:
    return serving.list_views(_hub(request), workspaces_of(p))


@router.get("/{name}")
def get_deployment(request: fastapi.Request, name: str, p: Auth) -> dict[str, Any]:
    return serving.view(_hub(request), serving.find(_hub(request), name, workspaces_of(p)))


@router.post("/{name}/update")
def update(
    request: fastapi.Request, name: str, body: wire.DeployRequest, p: Auth
) -> dict[str, Any]:
    body = body.model_copy(update={"name": name})
    out = serving.update(_hub(request), body, workspaces_of(p), p.name)
    _wake(request)
    return out


@router.post("/{name}/scale")
def scale(request: fastapi.Request, name: str, body: wire.ScaleRequest, p: Auth) -> dict[str, Any]:
    out = serving.scale(_hub(request), name, body.replicas, workspaces_of(p), p.name)
    _wake(request)
    return out


@router.delete("/{name}")
def delete(request: fastapi.Request, name: str, p: Auth) -> dict[str, Any]:
    return serving.delete(_hub(request), name, workspaces_of(p), p.name)

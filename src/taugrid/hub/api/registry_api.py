"""HTTP routes of the model registry (``/v1/models``): thin wrappers over ``hub.runs.registry``."""

from __future__ import annotations

from typing import Any

import fastapi

from taugrid import payloads as wire
from taugrid.hub.api.auth import Auth, workspaces_of
from taugrid.hub.core import context
from taugrid.hub.runs import registry

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/v1/models")


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


@router.post("", status_code=201)
def register(request: fastapi.Request, body: wire.ModelRegisterRequest, p: Auth) -> dict[str, Any]:
    return registry.register(_hub(request), body, workspaces_of(p), p.name)


@router.get("")
def list_versions(request: fastapi.Request, p: Auth) -> list[dict[str, Any]]:
    return registry.versions(_hub(request), workspaces_of(p))


@router.get("/{ref}")
def show(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    """``NAME``: every version; ``NAME@ALIAS`` / ``NAME@vN``: that one (``resolved``)."""
    hub, ws = _hub(request), workspaces_of(p)
    name = ref.partition("@")[0]
    return {
        "versions": registry.versions(hub, ws, name),
        "resolved": registry.resolve(hub, ref, ws),
    }


@router.post("/{name}/aliases")
def set_alias(
    request: fastapi.Request, name: str, body: wire.AliasRequest, p: Auth
) -> dict[str, Any]:
    return registry.set_alias(_hub(request), name, body.version, body.alias, workspaces_of(p))

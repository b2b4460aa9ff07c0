"""HTTP routes of workspace secrets (``/v1``): set, list and delete; values go in, never
come out (``hub.core.vault`` seals them and hands them only to the agent starting a run).

    workspace secrets   its members and admins: ``/v1/workspaces/{ws}/secrets[/{name}]``
    platform secrets    admins set and delete (``/v1/secrets/{name}``); anyone lists them

Every set and delete is in the audit log with the key names, never the values.
"""

from __future__ import annotations

from typing import Annotated

import fastapi

from taugrid import payloads as wire
from taugrid.hub.api.auth import (
    Admin,
    Auth,
    Principal,
    require_workspace,
    workspaces_of,
)
from taugrid.hub.core import context
from taugrid.hub.tenancy import tenancy
from taugrid.spec import models as spec_models
from taugrid.store.secrets import PLATFORM_SCOPE

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/v1", tags=["secrets"])
Name = Annotated[str, fastapi.Path(pattern=spec_models.NAME_PATTERN)]  # as runtime.secrets
Workspace = Annotated[str, fastapi.Path(max_length=128)]


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _workspace(request: fastapi.Request, p: Principal, ws: str) -> context.Hub:
    workspaces_of(p)  # agents and metrics tokens: 403
    require_workspace(p, ws)
    hub = _hub(request)
    tenancy.workspace(hub, ws)  # 404 for an admin naming a workspace that does not exist
    return hub


def _set(
    hub: context.Hub, scope: str, name: str, body: wire.SecretSet, actor: str
) -> wire.SecretInfo:
    row = wire.SecretInfo.model_validate(hub.vault.put(scope, name, dict(body.data), actor))
    hub.auth.audit(actor, "secret.set", f"{scope}/{name}", {"keys": row.keys})
    return row


def _listing(hub: context.Hub, workspace: str | None) -> list[wire.SecretInfo]:
    return [wire.SecretInfo.model_validate(r) for r in hub.vault.listing(workspace)]


def _delete(hub: context.Hub, scope: str, name: str, actor: str) -> None:
    hub.vault.delete(scope, name)
    hub.auth.audit(actor, "secret.delete", f"{scope}/{name}", {})


@router.get("/workspaces/{ws}/secrets")
def list_workspace_secrets(
    request: fastapi.Request, ws: Workspace, p: Auth
) -> list[wire.SecretInfo]:
    """The workspace's secrets and the platform's (names, keys, who set them)."""
    return _listing(_workspace(request, p, ws), ws)


@router.put("/workspaces/{ws}/secrets/{name}")
def set_workspace_secret(
    request: fastapi.Request, ws: Workspace, name: Name, body: wire.SecretSet, p: Auth
) -> wire.SecretInfo:
    return _set(_workspace(request, p, ws), ws, name, body, p.name)


@router.delete("/workspaces/{ws}/secrets/{name}", status_code=204)
def delete_workspace_secret(request: fastapi.Request, ws: Workspace, name: Name, p: Auth) -> None:
    _delete(_workspace(request, p, ws), ws, name, p.name)


@router.get("/secrets")
def list_platform_secrets(request: fastapi.Request, p: Auth) -> list[wire.SecretInfo]:
    workspaces_of(p)
    return _listing(_hub(request), None)


@router.put("/secrets/{name}")
def set_platform_secret(
    request: fastapi.Request, name: Name, body: wire.SecretSet, p: Admin
) -> wire.SecretInfo:
    return _set(_hub(request), PLATFORM_SCOPE, name, body, p.name)


@router.delete("/secrets/{name}", status_code=204)
def delete_platform_secret(request: fastapi.Request, name: Name, p: Admin) -> None:
    _delete(_hub(request), PLATFORM_SCOPE, name, p.name)

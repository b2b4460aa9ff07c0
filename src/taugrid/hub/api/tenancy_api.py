"""HTTP routes of tenancy (``/v1``): workspaces, members, quotas and quota requests, the
queue, tokens, the audit log and ``whoami``.

Owns who may call what (docs/tenancy.md, "Roles and scope"); the rules live in
``hub.tenancy.tenancy``:

    admin       everything below
    researcher  its workspaces only: list/status/quota/queue, request quota;
                read its workspaces' quota requests
    agent       whoami only (everything else here is 403)

A researcher asking about a workspace it is not a member of gets 403 whether or not
the workspace exists. Errors map as in ``hub.api.api`` (UserError 400, NotFound 404).
"""

from __future__ import annotations

from typing import Annotated, Any

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
from taugrid.hub.tenancy import cost, tenancy

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/v1", tags=["tenancy"])
Limit = Annotated[int, fastapi.Query(ge=1, le=1000)]
Name = Annotated[str, fastapi.Path(max_length=128)]


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _member(p: Principal, name: str) -> None:
    workspaces_of(p)  # agents: 403
    require_workspace(p, name)


@router.get("/whoami")
def whoami(p: Auth) -> dict[str, Any]:
    """The caller's token: id, name, role and scope (workspaces include memberships)."""
    return {"id": p.token_id, "name": p.name, "role": p.role, "scope": p.scope}


@router.get("/workspaces")
def list_workspaces(request: fastapi.Request, p: Auth) -> list[dict[str, Any]]:
    allowed = workspaces_of(p)
    return [
        w.model_dump(mode="json")
        for w in _hub(request).platform.workspaces
        if allowed is None or w.name in allowed
    ]


@router.post("/workspaces", status_code=201)
def create_workspace(
    request: fastapi.Request, body: wire.WorkspaceCreate, p: Admin
) -> dict[str, Any]:
    return tenancy.create_workspace(_hub(request), body, p.name).model_dump(mode="json")


@router.get("/workspaces/{name}")
def get_workspace(request: fastapi.Request, name: Name, p: Auth) -> dict[str, Any]:
    _member(p, name)
    return tenancy.workspace(_hub(request), name).model_dump(mode="json")


@router.get("/workspaces/{name}/status")
def workspace_status(request: fastapi.Request, name: Name, p: Auth) -> dict[str, Any]:
    _member(p, name)
    return tenancy.status(_hub(request), name)


@router.post("/workspaces/{name}/members")
def workspace_members(
    request: fastapi.Request, name: Name, body: wire.MembersChange, p: Admin
) -> dict[str, Any]:
    return tenancy.change_members(_hub(request), name, body, p.name).model_dump(mode="json")


@router.get("/workspaces/{name}/quota")
def workspace_quota(request: fastapi.Request, name: Name, p: Auth) -> dict[str, Any]:
    _member(p, name)
    return tenancy.quota(_hub(request), name)


@router.post("/workspaces/{name}/quota-requests", status_code=201)
def request_quota(
    request: fastapi.Request, name: Name, body: wire.QuotaRequestCreate, p: Auth
) -> dict[str, Any]:
    _member(p, name)
    return tenancy.request_quota(_hub(request), name, body, p.name)


@router.get("/quota-requests")
def list_quota_requests(
    request: fastapi.Request, p: Auth, state: str | None = None
) -> list[dict[str, Any]]:
    return tenancy.list_requests(_hub(request), state, workspaces_of(p))


def _decide(request: fastapi.Request, rid: str, ok: bool, p: Principal, why: str) -> Any:
    out = tenancy.decide(_hub(request), rid, ok, p.name, why)
    request.app.state.scheduler.wake()
    return out


@router.post("/admin/quota-requests/{request_id}/approve")
def approve_quota(
    request: fastapi.Request,
    request_id: Name,
    p: Admin,
    body: wire.QuotaDecision | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = _decide(request, request_id, True, p, body.reason if body else "")
    return out


@router.post("/admin/quota-requests/{request_id}/reject")
def reject_quota(
    request: fastapi.Request,
    request_id: Name,
    p: Admin,
    body: wire.QuotaDecision | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = _decide(request, request_id, False, p, body.reason if body else "")
    return out


@router.get("/cost")
def cost_summary(request: fastapi.Request, p: Auth) -> dict[str, Any]:
    """Cost per workspace and per team (a researcher: its workspaces only)."""
    return cost.summary(_hub(request), workspaces_of(p))


@router.get("/admin/teams")
def team_quotas(request: fastapi.Request, p: Admin) -> list[dict[str, Any]]:
    """Every team's quotas with GPUs held and borrowed, and its cohort."""
    return tenancy.teams(_hub(request))


@router.get("/queue")
def queue(request: fastapi.Request, p: Auth, workspace: str | None = None) -> list[dict[str, Any]]:
    allowed = workspaces_of(p)
    if workspace is not None:
        require_workspace(p, workspace)
        allowed = [workspace]
    return tenancy.queue(_hub(request), allowed)


@router.post("/admin/tokens", status_code=201)
def create_token(request: fastapi.Request, body: wire.TokenCreate, p: Admin) -> dict[str, Any]:
    return tenancy.create_token(_hub(request), body, p.name)


@router.get("/admin/tokens")
def list_tokens(request: fastapi.Request, p: Admin) -> list[dict[str, Any]]:
    return _hub(request).auth.list_tokens()


@router.post("/admin/tokens/{token_id}/revoke")
def revoke_token(request: fastapi.Request, token_id: Name, p: Admin) -> dict[str, Any]:
    return tenancy.revoke_token(_hub(request), token_id, p.name)


@router.get("/admin/audit")
def audit_log(
    request: fastapi.Request, p: Admin, limit: Limit = 200, action: str | None = None
) -> list[dict[str, Any]]:
    rows = _hub(request).auth.audit_log(1000 if action else limit)
    if action:
        rows = [r for r in rows if r["action"] == action or r["action"].startswith(f"{action}.")]
    return rows[:limit]

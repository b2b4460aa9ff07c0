"""Authentication and authorization of hub requests (docs/tenancy.md, "Roles and scope").

Every endpoint but ``/healthz`` requires ``Authorization: Bearer <token>``. A
``Principal`` is the looked-up token: ``admin`` may do anything; ``researcher`` sees
only its workspaces — those in its token's ``scope.workspaces`` plus every workspace
whose members list the token's ``name`` (looked up on each request, so adding or
removing a member takes effect at once); ``agent`` may only sync for its own cluster.
Tokens are looked up on every request: a revoked token fails its next request.
Failures are 401 (no/unknown/revoked token) or 403 (known token, wrong scope).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import fastapi
from starlette import concurrency

from taugrid.hub.core import context

__all__ = [
    "Admin",
    "Auth",
    "Principal",
    "principal",
    "principal_of",
    "require_admin",
    "require_agent",
    "require_metrics",
    "require_workspace",
    "workspaces_of",
]


@dataclasses.dataclass(frozen=True)
class Principal:
    token_id: str
    name: str
    role: str
    scope: dict[str, Any]

    def can_see(self, workspace: str) -> bool:
        return self.role == "admin" or (
            self.role == "researcher" and workspace in self.scope.get("workspaces", [])
        )


def _hub(request: fastapi.requests.HTTPConnection) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


async def principal(
    request: fastapi.Request,
    authorization: Annotated[str | None, fastapi.Header()] = None,
) -> Principal:
    """The caller, on the event loop: a token looked up within the last seconds costs no
    query and no thread (an agent's sync, a thousand a second at a large fleet); a lookup
    and a researcher's memberships are read in the thread pool."""
    if not authorization or not authorization.startswith("Bearer "):
        raise fastapi.HTTPException(
            401,
            "missing bearer token; run `tau login` or set TAU_TOKEN",
            {"WWW-Authenticate": "Bearer"},
        )
    return await principal_of(request, authorization.removeprefix("Bearer ").strip())


async def principal_of(conn: fastapi.requests.HTTPConnection, secret: str) -> Principal:
    """The caller holding token ``secret`` (from a header, or a session cookie: ``hub.dev``);
    401 when it is unknown or revoked."""
    hub = _hub(conn)
    row = hub.auth.cached(secret) or await concurrency.run_in_threadpool(hub.auth.lookup, secret)
    if row is None:
        raise fastapi.HTTPException(401, "unknown or revoked token", {"WWW-Authenticate": "Bearer"})
    scope = dict(row["scope"])
    if row["role"] == "researcher":
        own = set(scope.get("workspaces", []))
        theirs = await concurrency.run_in_threadpool(hub.tenancy.memberships, row["name"])
        scope["workspaces"] = sorted(own | set(theirs))
    return Principal(row["id"], row["name"], row["role"], scope)


async def require_admin(p: Annotated[Principal, fastapi.Depends(principal)]) -> Principal:
    if p.role != "admin":
        raise fastapi.HTTPException(403, "this action needs an admin token")
    return p


Auth = Annotated[Principal, fastapi.Depends(principal)]
"""A route parameter: the authenticated caller."""
Admin = Annotated[Principal, fastapi.Depends(require_admin)]
"""A route parameter: the authenticated caller, who must be an admin."""


async def require_metrics(p: Annotated[Principal, fastapi.Depends(principal)]) -> Principal:
    """``/metrics`` names every workspace's runs: admins and scrape-only tokens only."""
    if p.role not in ("admin", "metrics"):
        raise fastapi.HTTPException(
            403,
            "/metrics needs an admin or a metrics token; "
            "create one with `tau admin token create --role metrics --name prometheus`",
        )
    return p


async def require_agent(
    cluster_id: str, p: Annotated[Principal, fastapi.Depends(principal)]
) -> Principal:
    if p.role == "admin" or (p.role == "agent" and p.scope.get("cluster") == cluster_id):
        return p
    raise fastapi.HTTPException(403, f"this token may not act as the agent of cluster {cluster_id}")


def workspaces_of(p: Principal) -> list[str] | None:
    """Workspaces a principal may see (None: all). Agents see none."""
    if p.role == "admin":
        return None
    if p.role == "researcher":
        return list(p.scope.get("workspaces", []))
    raise fastapi.HTTPException(403, f"{p.role} tokens cannot read runs")


def require_workspace(p: Principal, workspace: str) -> None:
    """403 unless ``p`` may see ``workspace`` (admins see every workspace)."""
    if not p.can_see(workspace):
        raise fastapi.HTTPException(403, f"you are not a member of workspace {workspace}")

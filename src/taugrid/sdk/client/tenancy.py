"""Tenancy calls of the hub client: workspaces, quotas, quota requests, the queue,
tokens, the audit log, ``whoami``; and ``login`` (credentials for a remote hub).

Functions take a ``sdk.client.client.Client`` (request path CLI → SDK → HTTP → hub); their
errors are the client's (``ApiError`` for 4xx, ``HubUnreachable``). ``login`` writes
``$TAU_HOME/credentials.json`` (mode 0600) only after the hub answered ``/healthz`` and
accepted the token on ``/v1/whoami``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from taugrid import private
from taugrid.sdk.client import client

__all__ = [
    "approve_quota",
    "audit",
    "change_members",
    "create_token",
    "create_workspace",
    "list_tokens",
    "login",
    "queue",
    "quota",
    "quota_requests",
    "reject_quota",
    "request_quota",
    "revoke_token",
    "whoami",
    "workspace",
    "workspace_status",
    "workspaces",
]

Doc = dict[str, Any]


def _doc(c: client.Client, method: str, path: str, **kw: Any) -> Doc:
    out: Doc = c.request(method, path, **kw)
    return out


def _docs(c: client.Client, method: str, path: str, **kw: Any) -> list[Doc]:
    out: list[Doc] = c.request(method, path, **kw)
    return out


def whoami(c: client.Client) -> Doc:
    return _doc(c, "GET", "/v1/whoami")


def workspaces(c: client.Client) -> list[Doc]:
    return _docs(c, "GET", "/v1/workspaces")


def workspace(c: client.Client, name: str) -> Doc:
    return _doc(c, "GET", f"/v1/workspaces/{name}")


def create_workspace(c: client.Client, name: str, team: str, members: list[str]) -> Doc:
    body = {"name": name, "team": team, "members": members}
    return _doc(c, "POST", "/v1/workspaces", json=body)


def workspace_status(c: client.Client, name: str) -> Doc:
    return _doc(c, "GET", f"/v1/workspaces/{name}/status")


def change_members(c: client.Client, name: str, add: list[str], remove: list[str]) -> Doc:
    body = {"add": add, "remove": remove}
    return _doc(c, "POST", f"/v1/workspaces/{name}/members", json=body)


def quota(c: client.Client, name: str) -> Doc:
    return _doc(c, "GET", f"/v1/workspaces/{name}/quota")


def request_quota(c: client.Client, name: str, gpu_model: str, gpus: int, reason: str) -> Doc:
    body = {"gpu_model": gpu_model, "gpus": gpus, "reason": reason}
    return _doc(c, "POST", f"/v1/workspaces/{name}/quota-requests", json=body)


def quota_requests(c: client.Client, state: str | None = None) -> list[Doc]:
    return _docs(c, "GET", "/v1/quota-requests", params={"state": state} if state else {})


def approve_quota(c: client.Client, request_id: str, reason: str = "") -> Doc:
    path = f"/v1/admin/quota-requests/{request_id}/approve"
    return _doc(c, "POST", path, json={"reason": reason})


def reject_quota(c: client.Client, request_id: str, reason: str) -> Doc:
    path = f"/v1/admin/quota-requests/{request_id}/reject"
    return _doc(c, "POST", path, json={"reason": reason})


def queue(c: client.Client, workspace: str | None = None) -> list[Doc]:
    return _docs(c, "GET", "/v1/queue", params={"workspace": workspace} if workspace else {})


def create_token(
    c: client.Client, name: str, role: str, workspaces: list[str], cluster: str | None
) -> Doc:
    body = {"name": name, "role": role, "workspaces": workspaces, "cluster": cluster}
    return _doc(c, "POST", "/v1/admin/tokens", json=body)


def list_tokens(c: client.Client) -> list[Doc]:
    return _docs(c, "GET", "/v1/admin/tokens")


def revoke_token(c: client.Client, token_id: str) -> Doc:
    return _doc(c, "POST", f"/v1/admin/tokens/{token_id}/revoke")


def audit(c: client.Client, limit: int = 200, action: str | None = None) -> list[Doc]:
    params: dict[str, Any] = {"limit": limit}
    if action:
        params["action"] = action
    return _docs(c, "GET", "/v1/admin/audit", params=params)


def login(url: str, token: str, home: Path | None = None) -> tuple[Path, Doc]:
    """Check ``url`` and ``token`` against the hub, then save them; returns (file, whoami)."""
    c = client.Client(client.HubConfig(url.rstrip("/"), token), timeout_s=15)
    try:
        c.compatible_health()
        me = whoami(c)
    finally:
        c.close()
    path = (home or client.tau_home()) / "credentials.json"
    private.write(path, json.dumps({"hub_url": url.rstrip("/"), "token": token}, indent=2))
    return path, me

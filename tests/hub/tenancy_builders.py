"""Builders for tenancy tests: tau.yaml text, tokens, workspaces and waiting helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from tests.hub.harness import HubServer


def tau_yaml(name: str = "tiny", gpus: int = 1, workers: int = 1, priority: str = "") -> str:
    text = (
        f"schema_version: 1\nname: {name}\nrun:\n  entrypoint: train.py\n"
        f"compute:\n  gpus: {gpus}\n  workers: {workers}\n  cpus: 1\n  memory: 1Gi\n"
    )
    if priority:
        text += f"policy:\n  priority: {priority}\n"
    return text


def submit(
    c: httpx.Client, workspace: str | None = None, name: str = "tiny", gpus: int = 1
) -> httpx.Response:
    body = {"tau_yaml": tau_yaml(name, gpus), "filename": "tau.yaml", "workspace": workspace}
    return c.post("/v1/runs", json=body)


def ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, f"{r.request.method} {r.request.url}: {r.status_code} {r.text}"
    return r.json()


def token(server: HubServer, name: str, role: str = "researcher", **scope: Any) -> str:
    with server.http() as admin:
        body = {"name": name, "role": role, **scope}
        secret: str = ok(admin.post("/v1/admin/tokens", json=body), 201)["secret"]
    return secret


def workspace(server: HubServer, name: str, team: str = "research", members: Any = ()) -> None:
    with server.http() as admin:
        body = {"name": name, "team": team, "members": list(members)}
        ok(admin.post("/v1/workspaces", json=body), 201)


def wait_for(check: Callable[[], Any], timeout: float = 15.0, every: float = 0.1) -> Any:
    deadline = time.time() + timeout
    while True:
        got = check()
        if got or time.time() > deadline:
            return got
        time.sleep(every)

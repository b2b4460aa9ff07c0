"""Secret calls of the hub client: set, list and delete workspace and platform secrets.

Values go to the hub and never come back (``hub.core.vault`` seals them; a listing shows
names and keys). ``scope_of`` picks the workspace a command means when none is named:
the caller's only workspace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taugrid import errors
from taugrid.sdk.client import client

if TYPE_CHECKING:  # pydantic's models: imported where used, not at `tau` start
    from taugrid import payloads as wire

__all__ = ["delete", "listing", "parse_pairs", "put", "scope_of"]


def _path(workspace: str | None, name: str = "") -> str:
    base = f"/v1/workspaces/{workspace}/secrets" if workspace else "/v1/secrets"
    return f"{base}/{name}" if name else base


def scope_of(c: client.Client, workspace: str | None) -> str:
    """``workspace``, or the caller's only workspace; a clear error otherwise."""
    if workspace:
        return workspace
    mine: list[str] = c.request("GET", "/v1/whoami").get("scope", {}).get("workspaces", [])
    if len(mine) == 1:
        return mine[0]
    raise errors.UserError(
        "which workspace? this token can use " + (", ".join(mine) or "every workspace"),
        "name it with --workspace NAME (or --platform for a secret of every workspace, admins)",
    )


def parse_pairs(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict; a clear error for anything else."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise errors.UserError(
                f"{pair.split('=')[0]!r} is not KEY=VALUE",
                "give each key as KEY=VALUE (KEY=- reads the value from standard input)",
            )
        out[key] = value
    return out


def put(
    c: client.Client, workspace: str | None, name: str, data: dict[str, str]
) -> wire.SecretInfo:
    """Create or replace a secret (``workspace`` None: the platform's); its metadata."""
    from taugrid import payloads as wire

    return wire.SecretInfo.model_validate(
        c.request("PUT", _path(workspace, name), json={"data": data})
    )


def listing(c: client.Client, workspace: str | None) -> list[wire.SecretInfo]:
    """Secrets a workspace's runs can use (``workspace`` None: the platform's only)."""
    from taugrid import payloads as wire

    return [wire.SecretInfo.model_validate(r) for r in c.request("GET", _path(workspace))]


def delete(c: client.Client, workspace: str | None, name: str) -> None:
    c.request("DELETE", _path(workspace, name))

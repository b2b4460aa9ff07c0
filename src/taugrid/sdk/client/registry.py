"""SDK side of ``tau model``: the model registry over the hub's ``/v1/models`` API.

``register`` imports the payload models when it builds its body; the reads do not.
"""

from __future__ import annotations

from typing import Any

from taugrid.sdk.client import client

__all__ = ["register", "set_alias", "show", "versions"]


def register(
    cli: client.Client,
    name: str,
    from_run: str,
    *,
    checkpoint: str | None = None,
    artifact: str | None = None,
    best_by: str | None = None,
    aliases: list[str] | None = None,
) -> dict[str, Any]:
    """A new version of model ``name`` from ``from_run`` (or its name's best run)."""
    from taugrid import payloads as wire

    body = wire.ModelRegisterRequest(
        name=name,
        from_run=from_run,
        checkpoint=checkpoint,
        artifact=artifact,
        best_by=best_by,
        aliases=aliases or [],
    )
    out: dict[str, Any] = cli.request("POST", "/v1/models", json=body.model_dump(mode="json"))
    return out


def versions(cli: client.Client) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = cli.request("GET", "/v1/models")
    return out


def show(cli: client.Client, ref: str) -> dict[str, Any]:
    """``{"versions": [...], "resolved": {...}}`` for NAME, NAME@ALIAS or NAME@vN."""
    out: dict[str, Any] = cli.request("GET", f"/v1/models/{ref}")
    return out


def set_alias(cli: client.Client, name: str, version: int, alias: str) -> dict[str, Any]:
    body = {"alias": alias, "version": version}
    out: dict[str, Any] = cli.request("POST", f"/v1/models/{name}/aliases", json=body)
    return out

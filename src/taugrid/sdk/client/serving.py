"""SDK side of ``tau serve``: deployments over the hub's ``/v1/serve`` API.

Owns the request bodies (``payloads.DeployRequest``) built from a prepared serving
tau.yaml (``sdk.client.submit.prepare``: validated locally, code zipped) and which config a
deploy uses by default: ``serve.yaml`` next to the code if there is one, else
``tau.yaml`` (a training tau.yaml cannot also be a rayservice). The payload models
and the tau.yaml loader are imported by the calls that build a body, so listing and
reading deployments (``tau serve list | status``) does not import them.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from taugrid.sdk.client import client

__all__ = [
    "default_config",
    "delete",
    "deploy",
    "deployment",
    "deployments",
    "logs",
    "scale",
    "update",
]

SERVE_CONFIG = "serve.yaml"


def default_config(config: str | None) -> str | None:
    """``config`` if given, else ``./serve.yaml`` when it exists (else tau.yaml's rules)."""
    if config is not None:
        return config
    return SERVE_CONFIG if Path(SERVE_CONFIG).is_file() else None


def _body(
    name: str,
    source_run: str,
    config: str | None,
    checkpoint: str | None,
    artifact: str | None,
    workspace: str | None,
    model: str | None = None,
    regions: list[str] | None = None,
) -> dict[str, Any]:
    from taugrid import payloads as wire
    from taugrid.sdk.client import submit

    prepared = submit.prepare(None, default_config(config))
    req = wire.DeployRequest(
        name=name,
        source_run=source_run,
        model=model,
        checkpoint=checkpoint,
        artifact=artifact,
        regions=regions or [],
        submit=wire.SubmitRequest(
            tau_yaml=prepared.text,
            filename=str(prepared.path),
            workspace=workspace,
            code_zip_b64=base64.b64encode(prepared.code_zip).decode(),
        ),
    )
    return req.model_dump(mode="json")


def deploy(
    cli: client.Client,
    name: str,
    source_run: str,
    *,
    config: str | None = None,
    checkpoint: str | None = None,
    artifact: str | None = None,
    workspace: str | None = None,
    model: str | None = None,
    regions: list[str] | None = None,
) -> dict[str, Any]:
    """Deploy ``source_run``'s model (or registered ``model``, NAME@ALIAS) as ``name``;
    with ``regions``, a serving run in each, behind the hub's one endpoint."""
    body = _body(name, source_run, config, checkpoint, artifact, workspace, model, regions)
    return _post(cli, "/v1/serve", body)


def update(
    cli: client.Client,
    name: str,
    source_run: str,
    *,
    config: str | None = None,
    checkpoint: str | None = None,
    artifact: str | None = None,
    workspace: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Serve another run/checkpoint under ``name`` (a rolling replacement)."""
    body = _body(name, source_run, config, checkpoint, artifact, workspace, model)
    return _post(cli, f"/v1/serve/{name}/update", body)


def _post(cli: client.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = cli.request("POST", path, json=body)
    return out


def scale(cli: client.Client, name: str, replicas: int) -> dict[str, Any]:
    out: dict[str, Any] = cli.request(
        "POST", f"/v1/serve/{name}/scale", json={"replicas": replicas}
    )
    return out


def deployments(cli: client.Client) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = cli.request("GET", "/v1/serve")
    return out


def deployment(cli: client.Client, name: str) -> dict[str, Any]:
    out: dict[str, Any] = cli.request("GET", f"/v1/serve/{name}")
    return out


def delete(cli: client.Client, name: str) -> dict[str, Any]:
    out: dict[str, Any] = cli.request("DELETE", f"/v1/serve/{name}")
    return out


def logs(cli: client.Client, name: str, tail: int | None = None) -> dict[str, Any]:
    """The serving run's driver log (deploys, failures, takeovers), plus which run."""
    run_id = deployment(cli, name)["run_id"]
    return {"run": run_id, **cli.logs(run_id, tail=tail)}

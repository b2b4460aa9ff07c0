"""Sweep calls of the hub client: submit, list, status (the leaderboard), cancel.

A sweep is submitted like a run: the tau.yaml (with its ``sweep`` section) checked here
first, then sent with the zipped working directory (``sdk.client.submit.prepare``).
"""

from __future__ import annotations

from typing import Any

from taugrid import errors
from taugrid.sdk.client import client

__all__ = ["cancel", "listing", "status", "submit_sweep"]

Doc = dict[str, Any]


def submit_sweep(
    c: client.Client,
    target: str | None,
    config: str | None = None,
    workspace: str | None = None,
    *,
    dry_run: bool = False,
) -> Doc:
    """Check and send a sweep; the hub's row (``dry_run``: its trials' parameters)."""
    import base64

    from taugrid.sdk.client import submit

    p = submit.prepare(target, config)
    if p.config.sweep is None:
        raise errors.UserError(
            f"{p.path} has no sweep section",
            "add one (docs/sweeps.md), or submit it as a single run: tau run submit",
        )
    body: Doc = {
        "tau_yaml": p.text,
        "filename": str(p.path),
        "workspace": workspace,
        "code_zip_b64": base64.b64encode(p.code_zip).decode(),
        "dry_run": dry_run,
        "source": p.source,
    }
    out: Doc = c.request("POST", "/v1/sweeps", json=body)
    return out


def listing(c: client.Client, workspace: str | None = None) -> list[Doc]:
    params = {"workspace": workspace} if workspace else None
    out: list[Doc] = c.request("GET", "/v1/sweeps", params=params)
    return out


def status(c: client.Client, ref: str) -> Doc:
    """The sweep and its trials, best first."""
    out: Doc = c.request("GET", f"/v1/sweeps/{ref}")
    return out


def cancel(c: client.Client, ref: str) -> Doc:
    out: Doc = c.request("POST", f"/v1/sweeps/{ref}/cancel")
    return out

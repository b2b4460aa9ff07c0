"""HTTP routes of sweeps (``/v1/sweeps``): submit, list, the leaderboard, cancel.

A sweep is submitted like a run (``SubmitRequest``: its tau.yaml, with a ``sweep``
section, and the zipped working directory); its members see it, as they see its trial
runs (``/v1/runs``). ``hub.runs.sweeps`` does the work.
"""

from __future__ import annotations

from typing import Any

import fastapi

from taugrid import payloads as wire
from taugrid.hub.api.auth import Auth, workspaces_of
from taugrid.hub.core import context
from taugrid.hub.data import data_ops
from taugrid.hub.runs import runs, sweeps
from taugrid.scheduling import sweeps as core

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/v1", tags=["sweeps"])
_PREVIEW = 20  # trials a dry run lists


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


@router.post("/sweeps", status_code=201)
def submit_sweep(request: fastapi.Request, body: wire.SubmitRequest, p: Auth) -> dict[str, Any]:
    """A new sweep (``dry_run``: its trials' parameters, nothing stored)."""
    hub = _hub(request)
    body = runs.default_workspace(body, workspaces_of(p))
    spec, sweep = sweeps.preview(hub, body)
    if not p.can_see(spec.workspace):
        raise fastapi.HTTPException(403, f"you are not a member of workspace {spec.workspace}")
    data_ops.check_inputs(hub, spec.workspace, [i.dataset for i in spec.inputs])
    if body.dry_run:
        first = [core.trial_params(sweep, i) for i in range(min(sweep.budget(), _PREVIEW))]
        return {"dry_run": True, "budget": sweep.budget(), "trials": first}
    row = sweeps.submit(hub, body, p.name)
    request.app.state.scheduler.wake()
    return row


@router.get("/sweeps")
def list_sweeps(
    request: fastapi.Request, p: Auth, workspace: str | None = None
) -> list[dict[str, Any]]:
    allowed = workspaces_of(p)
    if allowed is not None and workspace and workspace not in allowed:
        raise fastapi.HTTPException(403, f"you are not a member of workspace {workspace}")
    return _hub(request).sweeps.listing([workspace] if workspace else allowed)


@router.get("/sweeps/{ref}")
def get_sweep(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    """The sweep and its leaderboard (best trial first)."""
    hub = _hub(request)
    return sweeps.detail(hub, sweeps.find(hub, ref, workspaces_of(p)))


@router.post("/sweeps/{ref}/cancel")
def cancel_sweep(request: fastapi.Request, ref: str, p: Auth) -> dict[str, Any]:
    """No new trial; every unfinished one is cancelled."""
    hub = _hub(request)
    sw = sweeps.cancel(hub, sweeps.find(hub, ref, workspaces_of(p)), p.name)
    return sweeps.detail(hub, sw)

"""Sweep pages: the sweeps list (``/ui/sweeps``) and a sweep's leaderboard
(``/ui/sweeps/{ref}``): every trial with its parameters, state, best value and why it was
stopped, best first, linking to the trial's run page. Server-rendered (no JavaScript);
sweeps of workspaces the token may not see are "not found", as in the API."""

from __future__ import annotations

import fastapi

from taugrid.portal import pages, render, session
from taugrid.sdk.client import sweeps

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/sweeps")
def sweeps_page(request: fastapi.Request) -> fastapi.Response:
    with session.api(request) as c:
        ctx = pages.context(request, c, "sweeps")
        rows = sweeps.listing(c)
    return render.html("sweeps.html", **ctx, sweeps=rows)


@router.get("/sweeps/{ref}")
def sweep_page(request: fastapi.Request, ref: str) -> fastapi.Response:
    with session.api(request) as c:
        ctx = pages.context(request, c, "sweeps")
        sw = sweeps.status(c, ref)
    return render.html("sweep.html", **ctx, sw=sw)

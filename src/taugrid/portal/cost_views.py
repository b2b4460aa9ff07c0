"""The cost page (``/ui/cost``): cost per workspace and per team with the month to date.

Everyone signed in: a researcher sees the workspaces its token may see (and their teams'
share), an admin all of them — the hub decides (``GET /v1/cost``, ``hub.tenancy.cost``).
"""

from __future__ import annotations

import fastapi

from taugrid.portal import pages, render, session
from taugrid.sdk.client import usage

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/cost")
def cost_page(request: fastapi.Request) -> fastapi.Response:
    with session.api(request) as c:
        ctx = pages.context(request, c, "cost")
        doc = usage.cost_summary(c)
    return render.html("cost.html", **ctx, doc=doc)

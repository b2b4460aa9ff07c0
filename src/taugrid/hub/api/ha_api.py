"""HTTP side of hub replicas: ``GET /v1/admin/hub`` and the 503s of a replica in trouble.

- ``GET /v1/admin/hub`` (admin): the replicas, the leader and its lease, the database
  and its schema revision (``hub.core.replica.Replica.status``; ``tau admin hub status``).
- A replica whose database is unreachable answers **503** with what is wrong, for
  writes at once (``Replica.write_refusal``: no heartbeat reached the database for a
  lease period) and for any request whose database call fails (a connection error from
  the driver), never a 500 or a hang. Clients with several hub URLs take the next one
  on a 503 (``sdk.client.client``, ``agent.hubclient``).
- A replica older than the database's schema answers 503 to every ``/v1`` request but
  ``/v1/admin/hub``, saying why (``Replica.schema_error``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import fastapi
import sqlalchemy as sa
from fastapi import responses

from taugrid.hub.api.auth import Admin
from taugrid.hub.core import replica

__all__ = ["install", "router", "unavailable"]

router = fastapi.APIRouter(prefix="/v1", tags=["hub"])

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HINT = "retry, or point clients at another hub replica (a list of hub URLs fails over)"


def _replica(request: fastapi.Request) -> replica.Replica:
    rep: replica.Replica = request.app.state.replica
    return rep


@router.get("/admin/hub")
def hub_status(request: fastapi.Request, _: Admin) -> dict[str, Any]:
    return _replica(request).status()


def unavailable(detail: str, hint: str = _HINT) -> responses.JSONResponse:
    """The 503 every refusal of this module answers."""
    return responses.JSONResponse({"detail": detail, "hint": hint}, status_code=503)


def install(app: fastapi.FastAPI) -> None:
    """Add the router, the refusal middleware and the lost-database handler."""
    app.include_router(router)

    @app.middleware("http")
    async def _refuse(
        request: fastapi.Request,
        call_next: Callable[[fastapi.Request], Awaitable[fastapi.Response]],
    ) -> fastapi.Response:
        rep: replica.Replica | None = getattr(request.app.state, "replica", None)
        path = request.url.path
        if rep is not None and path.startswith("/v1/") and path != "/v1/admin/hub":
            if rep.schema_error is not None:
                return unavailable(rep.schema_error, "upgrade TauGrid on this replica")
            refusal = rep.write_refusal() if request.method in _WRITES else None
            if refusal is not None:
                return unavailable(refusal)
        return await call_next(request)

    async def _db_lost(_: fastapi.Request, exc: Exception) -> responses.JSONResponse:
        # The driver could not reach the database (connection refused, reset, timed out).
        cause = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:200]
        return unavailable(f"this hub replica cannot reach its database: {cause}")

    app.add_exception_handler(sa.exc.OperationalError, _db_lost)
    app.add_exception_handler(sa.exc.InterfaceError, _db_lost)

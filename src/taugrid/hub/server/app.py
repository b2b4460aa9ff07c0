"""The hub's ASGI application: routes, error handlers, and the scheduling loop's life.

``create_app(hub)`` is what both the daemon (uvicorn) and the tests use; the replica's
heartbeat (``hub.core.replica``: leadership on PostgreSQL) and the scheduler thread start
with the app and stop with it; the scheduler runs only while this replica leads. A
value the database refuses (``sqlalchemy.exc.DataError``) is the request's fault: 400,
never a 500.

``/docs`` is Swagger UI served from the ``swagger-ui-bundle`` package (no CDN: it works
offline); ``/healthz`` is liveness only and needs no token.

Extensions: after its own routes the app calls ``install(app)`` of each module named in
``TAU_HUB_EXTENSIONS`` (comma-separated; default ``taugrid.portal.mount``, the web portal
under ``/ui``). The hub never imports an upper layer: the portal registers itself at
start through this hook and talks to the hub only over its HTTP API (the SDK). A
missing extension module is logged and skipped; ``TAU_HUB_EXTENSIONS=""`` turns all off.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import fastapi
import fastapi.openapi.docs
import fastapi.staticfiles
import sqlalchemy as sa
import swagger_ui_bundle
from fastapi import responses

from taugrid import version
from taugrid.hub.api import (
    api,
    auth,
    data_api,
    dev_api,
    ha_api,
    nodes_api,
    registry_api,
    secrets_api,
    serving_api,
    sweeps_api,
    tenancy_api,
)
from taugrid.hub.core import context, replica
from taugrid.hub.runs import results, tracking
from taugrid.hub.server import leader_loop, scheduler

__all__ = ["DEFAULT_EXTENSIONS", "KEEP_ALIVE_S", "create_app", "install_extensions"]

DEFAULT_EXTENSIONS = "taugrid.portal.mount"

KEEP_ALIVE_S = 75
"""How long the server keeps an idle connection (uvicorn's default is 5 s). Longer than
httpx's client-side expiry (5 s), so a client always drops an idle connection first:
with equal times, a request sent just as the server closes the connection fails with
"Server disconnected without sending a response" (seen in the soak under load)."""
_log = logging.getLogger(__name__)


def create_app(hub: context.Hub) -> fastapi.FastAPI:
    """A FastAPI app serving ``hub``; its scheduler runs while the app is up."""

    @contextlib.asynccontextmanager
    async def lifespan(app: fastapi.FastAPI) -> AsyncIterator[None]:
        rep = replica.Replica(hub, hub.config.advertise_url)
        app.state.replica = rep
        rep.start()
        hub.is_leader = rep.is_leader
        hub.leases.start()
        sched = scheduler.Scheduler(hub)
        app.state.scheduler = sched
        sched.start()
        loops = [
            leader_loop.LeaderLoop(hub, "results", results.retry_pending, results.RETRY_S),
            leader_loop.LeaderLoop(hub, "tracking", tracking.mirror_pending, tracking.EVERY_S),
        ]
        for loop in loops:
            loop.start()
        try:
            yield
        finally:
            for loop in loops:
                loop.stop()
            sched.stop()
            hub.leases.stop()
            rep.stop()

    app = fastapi.FastAPI(
        title="TauGrid hub", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.hub = hub
    _install_docs(app)
    app.include_router(api.router)
    app.include_router(tenancy_api.router)
    app.include_router(nodes_api.router)
    app.include_router(serving_api.router)
    app.include_router(serving_api.endpoints)
    app.include_router(dev_api.router)
    app.include_router(dev_api.door)
    app.include_router(registry_api.router)
    app.include_router(secrets_api.router)
    app.include_router(sweeps_api.router)
    data_api.install(app, hub)
    api.install_error_handlers(app)
    ha_api.install(app)

    @app.exception_handler(sa.exc.DataError)
    async def _unstorable(_: fastapi.Request, exc: sa.exc.DataError) -> responses.JSONResponse:
        # The database refused a value the request carried (PostgreSQL: a NUL character
        # in text, a number out of a column's range): the caller's fault, not the hub's.
        detail = (
            "a value in the request cannot be stored (a NUL character or a number out of range)"
        )
        hint = "remove control characters and keep numbers within 32-bit range"
        return responses.JSONResponse({"detail": detail, "hint": hint}, status_code=400)

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {
            "ok": True,
            "time": time.time(),
            "version": version.package_version(),
            "api_level": version.API_LEVEL,
        }

    @app.get(
        "/metrics", include_in_schema=False, dependencies=[fastapi.Depends(auth.require_metrics)]
    )
    def prometheus() -> fastapi.Response:
        return fastapi.Response(hub.metrics.render(), media_type="text/plain; version=0.0.4")

    install_extensions(app)
    return app


_DOCS_ASSETS = "/docs/assets"


def _install_docs(app: fastapi.FastAPI) -> None:
    """Swagger UI at ``/docs`` with its JS/CSS from the installed package, not a CDN."""
    app.mount(
        _DOCS_ASSETS,
        fastapi.staticfiles.StaticFiles(directory=swagger_ui_bundle.swagger_ui_path),
        name="docs-assets",
    )

    @app.get("/docs", include_in_schema=False)
    def docs() -> responses.HTMLResponse:
        return fastapi.openapi.docs.get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="TauGrid hub - API",
            swagger_js_url=f"{_DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{_DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{_DOCS_ASSETS}/favicon-32x32.png",
        )


def install_extensions(app: fastapi.FastAPI, names: str | None = None) -> list[str]:
    """Call ``install(app)`` of each extension module; returns the names installed."""
    spec = os.environ.get("TAU_HUB_EXTENSIONS", DEFAULT_EXTENSIONS) if names is None else names
    done = []
    for name in (n.strip() for n in spec.split(",")):
        if not name:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            _log.warning("hub extension %s not installed (%s); skipped", name, exc)
            continue
        module.install(app)
        done.append(name)
    return done

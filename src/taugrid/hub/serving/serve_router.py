"""The hub's endpoint of a deployment: ``/v1/endpoints/<workspace>/<name>/<path>``, one
URL that forwards each request to the nearest healthy region serving the deployment.

- **Healthy regions** are ``serving.region_views``'s: the region's serving run is
  Ready or Degraded on Ray Serve and its agent holds its lease (a region past its
  lease is ``unknown``: no traffic goes there). Read from the store at most every
  ``ROUTES_TTL_S`` per deployment.
- **Nearest** is the smallest round trip of a TCP connect from the hub to the region's
  Serve endpoint, measured at most every ``RTT_EVERY_S`` (``measure`` is the seam a
  test may wrap to add link delay).
- **Failover**: a region that refuses the connection (or does not accept it within
  ``CONNECT_S``) is skipped for ``DOWN_S`` and the request goes to the next region.
  A request already sent is never sent again (it may have run): a region that then
  stays silent past ``READ_S`` gives 504, a dropped connection (the region died, the
  deployment was deleted under it) 503.
- **Delete**: ``forget`` drops the deployment's cached regions, so from the delete on
  every request is answered 503 by the hub; those already at Ray Serve finish there.
- No healthy region: 503 at once, saying which regions there are and why each is out.
"""

from __future__ import annotations

import socket
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import fastapi
import httpx
from starlette import concurrency

from taugrid.hub.core import context
from taugrid.hub.serving import serving

__all__ = ["Router", "tcp_rtt"]

CONNECT_S = 1.0
READ_S = 30.0
ROUTES_TTL_S = 1.0
RTT_EVERY_S = 5.0
DOWN_S = 5.0
_DROP = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}
_DROP_IN = _DROP | {"authorization"}


def tcp_rtt(url: str, timeout_s: float = 0.5) -> float | None:
    """Milliseconds to open a TCP connection to ``url``'s host and port; None if refused."""
    u = urllib.parse.urlsplit(url)
    t0 = time.perf_counter()
    try:
        with socket.create_connection((u.hostname or "", u.port or 80), timeout=timeout_s):
            pass
    except OSError:
        return None
    return (time.perf_counter() - t0) * 1000.0


class Router:
    """Routes of every deployment the hub has forwarded to; one per hub app."""

    def __init__(self, hub: context.Hub, measure: Callable[[str], float | None] = tcp_rtt) -> None:
        self.hub = hub
        self.measure = measure
        self._views: dict[tuple[str, str], tuple[float, list[dict[str, Any]]]] = {}
        self._rtt: dict[str, tuple[float, float]] = {}  # endpoint → (ms, measured at)
        self._down: dict[str, float] = {}  # endpoint → skipped until
        self._client: httpx.AsyncClient | None = None

    def regions(
        self, workspace: str, name: str, workspaces: list[str] | None
    ) -> list[dict[str, Any]]:
        """Every region of the deployment, nearest healthy first, with ``rtt_ms``."""
        if workspaces is not None and workspace not in workspaces:
            raise fastapi.HTTPException(404, f"no deployment {workspace}/{name} of yours")
        now = time.time()
        at, views = self._views.get((workspace, name), (0.0, []))
        if now - at > ROUTES_TTL_S:
            views = serving.region_views(self.hub, serving.find(self.hub, name, [workspace]))
            self._views[(workspace, name)] = (now, views)
        out = [dict(v) for v in views]
        for v in out:
            v["rtt_ms"] = self._rtt_of(v["endpoint"], now) if v["healthy"] else None
            if v["healthy"] and v["rtt_ms"] is None:
                v["healthy"], v["reason"] = False, "its endpoint refuses connections"
        return sorted(out, key=lambda v: (not v["healthy"], v["rtt_ms"] or 0.0))

    def forget(self, workspace: str, name: str) -> None:
        """Read the deployment's regions from the store on the next request."""
        self._views.pop((workspace, name), None)

    def _rtt_of(self, endpoint: str, now: float) -> float | None:
        if self._down.get(endpoint, 0.0) > now:
            return None
        ms, at = self._rtt.get(endpoint, (0.0, 0.0))
        if now - at > RTT_EVERY_S or endpoint in self._down:
            got = self.measure(endpoint)
            if got is None:
                self._down[endpoint] = now + DOWN_S
                self._rtt.pop(endpoint, None)
                return None
            self._down.pop(endpoint, None)
            ms = got if at == 0.0 else 0.5 * ms + 0.5 * got
            self._rtt[endpoint] = (ms, now)
        return round(ms, 3)

    async def forward(
        self,
        request: fastapi.Request,
        workspace: str,
        name: str,
        path: str,
        workspaces: list[str] | None,
    ) -> fastapi.Response:
        regions = await concurrency.run_in_threadpool(self.regions, workspace, name, workspaces)
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_IN}
        query = f"?{request.url.query}" if request.url.query else ""
        for region in (r for r in regions if r["healthy"]):
            url = region["endpoint"].rstrip("/") + (f"/{path}" if path else "") + query
            try:
                r = await self._http().request(request.method, url, content=body, headers=headers)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                self._down[region["endpoint"]] = time.time() + DOWN_S
                continue
            except httpx.TimeoutException:
                return _error(504, f"region {region['region']} did not answer within {READ_S} s")
            except httpx.HTTPError as exc:
                return _error(503, f"region {region['region']} dropped the request: {exc!r}")
            out = {k: v for k, v in r.headers.items() if k.lower() not in _DROP}
            out["x-tau-region"] = str(region["region"])
            return fastapi.Response(r.content, r.status_code, headers=out)
        why = "; ".join(f"{r['region']}: {r['phase']} {r['reason']}".strip() for r in regions)
        return _error(503, f"deployment {workspace}/{name} has no healthy region ({why or 'none'})")

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(READ_S, connect=CONNECT_S)
            limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
        return self._client


def _error(code: int, detail: str) -> fastapi.Response:
    return fastapi.responses.JSONResponse({"detail": detail}, status_code=code)

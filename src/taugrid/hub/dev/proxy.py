"""The hub's door to interactive sessions: ``/v1/dev/<workspace>/<name>/...`` forwarded,
HTTP and websocket, to the session's JupyterLab (``hub.dev.sessions.target``).

Who may pass: the hub's own auth, a member of the workspace (or an admin), by

- ``Authorization: Bearer <token>`` (the CLI: ``tau dev exec``, ``shell``), or
- the ``tau_dev`` cookie (a browser): ``tau dev open`` asks the hub for a **ticket**
  (``ticket``: random, for one session, single use, valid ``TICKET_S``) and prints the
  session's URL with ``?tau_ticket=...``; the hub redeems it (``redeem``), sets the cookie
  (HttpOnly, SameSite=Strict, path: the session's path; the caller's token stamped with
  its sign-in time, ``private.session_cookie``, valid ``COOKIE_S``) and redirects to the
  same URL without the ticket. No token is ever in a URL; the ticket is worth nothing
  once used or expired. A cookie-borne request that changes something (not GET/HEAD) must
  come from the hub's own origin (``Origin``), as the portal's POSTs must.

What passes: the hub drops the caller's ``Authorization`` and cookie of its own and adds
``Authorization: token <jupyter token>``, so the user never sees Jupyter's token, and
Jupyter, seeing a token, needs no XSRF cookie of its own. Jupyter listens on its Ray
node's loopback address only; the hub is the one way in.

Tickets live in this process's memory: a hub of several replicas needs the ticket
redeemed by the replica that made it (a sticky load balancer), which is not built yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import urllib.parse

import fastapi
import httpx
from starlette import concurrency

from taugrid import private
from taugrid.hub.core import context
from taugrid.hub.dev import sessions

__all__ = ["COOKIE", "COOKIE_S", "TICKET_PARAM", "TICKET_S", "Proxy"]

COOKIE = "tau_dev"
COOKIE_S = 12 * 3600.0
TICKET_PARAM = "tau_ticket"
TICKET_S = 120.0
TARGET_TTL_S = 1.0
CONNECT_S = 2.0
READ_S = 60.0
_DROP = {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade"}
_DROP_IN = _DROP | {"authorization", "cookie", "origin"}


class Proxy:
    """Tickets and routes of every session the hub forwards to; one per hub app."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub
        self._tickets: dict[str, tuple[str, str, str, float]] = {}
        self._targets: dict[tuple[str, str], tuple[float, tuple[str, str] | str]] = {}
        self._client: httpx.AsyncClient | None = None

    # -- tickets ------------------------------------------------------------------
    def ticket(self, token: str, workspace: str, name: str) -> str:
        """A single-use ticket that signs a browser in to one session."""
        now = time.time()
        self._tickets = {k: v for k, v in self._tickets.items() if v[3] > now}
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = (token, workspace, name, now + TICKET_S)
        return ticket

    def redeem(self, ticket: str, workspace: str, name: str) -> str | None:
        """The token a ticket was made for (once), if it is this session's and fresh."""
        got = self._tickets.pop(ticket, None)
        if got is None or got[3] < time.time() or got[1:3] != (workspace, name):
            return None
        return got[0]

    # -- routing ------------------------------------------------------------------
    def target(self, workspace: str, name: str) -> tuple[str, str] | str:
        """``(endpoint, jupyter token)``, or why the session cannot be reached."""
        now = time.time()
        at, got = self._targets.get((workspace, name), (0.0, ""))
        if now - at > TARGET_TTL_S:
            got = sessions.target(self.hub, workspace, name)
            self._targets[(workspace, name)] = (now, got)
        return got

    def forget(self, workspace: str, name: str) -> None:
        self._targets.pop((workspace, name), None)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(READ_S, connect=CONNECT_S)
            self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        return self._client

    async def forward(
        self, request: fastapi.Request, workspace: str, name: str, path: str
    ) -> fastapi.Response:
        got = await concurrency.run_in_threadpool(self.target, workspace, name)
        if isinstance(got, str):
            return _error(409, f"{got}; start it with: tau dev up {name}")
        endpoint, token = got
        url = _url(endpoint, workspace, name, path, request.url.query)
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROP_IN]
        headers.append(("authorization", f"token {token}"))
        jar = _without_ours(request.headers.get("cookie", ""))
        if jar:
            headers.append(("cookie", jar))
        try:
            r = await self._http().request(
                request.method, url, content=await request.body(), headers=headers
            )
        except httpx.ConnectError:
            self.forget(workspace, name)
            return _error(502, f"session {workspace}/{name} does not answer (it may be stopping)")
        except httpx.TimeoutException:
            return _error(504, f"session {workspace}/{name} did not answer within {READ_S:g} s")
        out = fastapi.Response(r.content, r.status_code)
        for k, v in r.headers.multi_items():
            if k.lower() not in _DROP and k.lower() != "content-encoding":
                out.headers.append(k, v)
        return out

    async def websocket(self, ws: fastapi.WebSocket, workspace: str, name: str, path: str) -> None:
        """Pump frames both ways between the caller and Jupyter until either closes."""
        import websockets
        import websockets.asyncio.client as wsc
        import websockets.exceptions as wse

        got = await concurrency.run_in_threadpool(self.target, workspace, name)
        if isinstance(got, str):
            await ws.close(1011, got[:120])
            return
        endpoint, token = got
        url = _url(endpoint, workspace, name, path, ws.url.query).replace("http://", "ws://", 1)
        protocols = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",")]
        offered = [websockets.Subprotocol(p) for p in protocols if p]
        try:
            upstream = await wsc.connect(
                url,
                additional_headers={"Authorization": f"token {token}"},
                subprotocols=offered or None,
                open_timeout=CONNECT_S * 5,
                max_size=None,
                compression=None,
            )
        except (OSError, wse.WebSocketException, TimeoutError) as exc:
            await ws.close(1011, f"session {workspace}/{name}: {type(exc).__name__}"[:120])
            return
        await ws.accept(subprotocol=upstream.subprotocol)

        async def down() -> None:
            with contextlib.suppress(wse.ConnectionClosed):
                async for msg in upstream:
                    if isinstance(msg, bytes):
                        await ws.send_bytes(msg)
                    else:
                        await ws.send_text(msg)

        async def up() -> None:
            while True:
                msg = await ws.receive()
                if msg["type"] == "websocket.disconnect":
                    return
                with contextlib.suppress(wse.ConnectionClosed):
                    if msg.get("bytes") is not None:
                        await upstream.send(msg["bytes"])
                    elif msg.get("text") is not None:
                        await upstream.send(msg["text"])

        tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await upstream.close()
            with contextlib.suppress(RuntimeError):
                await ws.close()


def _url(endpoint: str, workspace: str, name: str, path: str, query: str) -> str:
    quoted = urllib.parse.quote(path, safe="/:@!$&'()*+,;=-._~")
    out = endpoint.rstrip("/") + sessions.path_of(workspace, name) + quoted
    return f"{out}?{query}" if query else out


def _without_ours(cookie: str) -> str:
    """The request's cookies less the hub's session cookie (Jupyter's ``_xsrf`` stays)."""
    parts = [c.strip() for c in cookie.split(";") if c.strip()]
    return "; ".join(c for c in parts if not c.startswith(f"{COOKIE}="))


def cookie_value(token: str) -> str:
    return private.session_cookie(token)


def cookie_token(raw: str) -> str | None:
    return private.cookie_token(raw, COOKIE_S)


def _error(code: int, detail: str) -> fastapi.Response:
    return fastapi.responses.JSONResponse({"detail": detail}, status_code=code)

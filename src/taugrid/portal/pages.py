"""Shared pieces of portal pages: who is signed in, the page context, SSE framing.

``context`` asks the hub who the session's token belongs to (``/v1/whoami``) on every
page, so a revoked token ends the session at the next page load or refresh.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio.to_thread
import fastapi
from fastapi import responses

from taugrid.portal import session
from taugrid.sdk.client import client, tenancy

__all__ = ["STREAM_LIFETIME_S", "context", "sse", "stream"]

# A stream ends after this long and the browser reconnects (resuming from its last event
# id): a hub shutting down gracefully never waits longer than this for open pages.
STREAM_LIFETIME_S = 12.0


def context(request: fastapi.Request, c: client.Client, active: str) -> dict[str, Any]:
    me = tenancy.whoami(c)
    return {
        "me": me,
        "is_admin": me["role"] == "admin",
        "csrf": session.csrf_token(session.token_of(request)),
        "active": active,
    }


def sse(event: str, data: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n"


def stream(
    request: fastapi.Request,
    poll: Callable[[client.Client, dict[str, Any]], list[str]],
    state: dict[str, Any],
    every_s: float = 1.0,
) -> responses.StreamingResponse:
    """Server-sent events: ``poll(client, state)`` each ``every_s`` returns frames to send.

    A refused token ends the stream with a ``logout`` event; the hub being briefly
    unreachable is retried. Each stream lasts at most ``STREAM_LIFETIME_S``; the
    browser's EventSource reconnects by itself (and the page then refreshes, so it
    catches up after a hub restart).
    """
    session.token_of(request)

    async def frames() -> AsyncIterator[str]:
        yield "retry: 1500\n\n"
        until = time.monotonic() + STREAM_LIFETIME_S
        while time.monotonic() < until and not await request.is_disconnected():
            try:
                out = await anyio.to_thread.run_sync(_poll_once, request, poll, state)
            except session.LoggedOut:
                yield sse("logout", {})
                return
            except (client.HubUnreachable, client.ApiError):
                out = [": hub busy\n\n"]
            for frame in out:
                yield frame
            await asyncio.sleep(every_s)
        yield sse("bye", {})  # a planned end: the browser reconnects without a refresh

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return responses.StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


def _poll_once(
    request: fastapi.Request,
    poll: Callable[[client.Client, dict[str, Any]], list[str]],
    state: dict[str, Any],
) -> list[str]:
    with session.api(request) as c:
        return poll(c, state)

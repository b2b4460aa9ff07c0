"""Portal sessions: the login cookie, CSRF checks and the per-request SDK client.

The session cookie (``tau_session``, HttpOnly, SameSite=Strict, path ``/ui``) holds the
user's hub token, so a token revoked in the hub fails the next page at once (the page
sends the user back to the login form). The cookie is stamped with its sign-in time
(``ISSUED.MAC.TOKEN``, the MAC keyed by the token) and expires after ``SESSION_S``
(``TAU_PORTAL_SESSION_S``, default 12 h): an expired or altered stamp is signed out.
A token never appears in a URL. Every POST carries a CSRF token derived from the
session (HMAC of the token) that a foreign site cannot read, and a POST whose
``Origin`` is not this server is refused. The login form
itself uses a double-submit cookie (``tau_login_csrf``).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import threading
import urllib.parse
from collections.abc import Iterator

import fastapi
import httpx

from taugrid import private
from taugrid.sdk.client import client

__all__ = [
    "COOKIE",
    "LOGIN_COOKIE",
    "SESSION_S",
    "LoggedOut",
    "Refused",
    "api",
    "check_csrf",
    "cookie_value",
    "csrf_token",
    "form",
    "token_of",
]

COOKIE = "tau_session"
LOGIN_COOKIE = "tau_login_csrf"
SESSION_S = float(os.environ.get("TAU_PORTAL_SESSION_S") or 12 * 3600)
_POOL = httpx.HTTPTransport(retries=0)
# Pages call the hub's API in the hub's own thread pool; bound how many do at once so
# portal pages can never take every worker thread the API calls they make need.
_SLOTS = threading.BoundedSemaphore(16)


class LoggedOut(Exception):
    """No session, or the hub refused its token (revoked): back to the login form."""


class Refused(Exception):
    """A POST without a valid CSRF token or from another origin."""


def cookie_value(token: str, issued: float | None = None) -> str:
    """The session cookie of ``token`` signed in at ``issued`` (now)."""
    return private.session_cookie(token, issued)


def token_of(request: fastapi.Request) -> str:
    """The session's hub token; ``LoggedOut`` without one, or when it expired."""
    token = private.cookie_token(request.cookies.get(COOKIE, ""), SESSION_S)
    if token is None:
        raise LoggedOut()
    return token


def csrf_token(token: str) -> str:
    """The CSRF token of a session: only someone holding the session token can make it."""
    return hmac.new(token.encode(), b"taugrid-portal-csrf", hashlib.sha256).hexdigest()[:40]


def hub_url(request: fastapi.Request) -> str:
    """The hub's own API, reached on the address this request came in on."""
    host, port = request.scope.get("server") or ("127.0.0.1", 8787)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in str(host) else f"http://{host}:{port}"


@contextlib.contextmanager
def api(request: fastapi.Request) -> Iterator[client.Client]:
    """An SDK client acting with the session's token (raises ``LoggedOut`` on 401)."""
    c = client.Client(client.HubConfig(hub_url(request), token_of(request), "portal"), 30, _POOL)
    with _SLOTS:
        try:
            yield c
        except client.ApiError as exc:
            if exc.status == 401:
                raise LoggedOut() from exc
            raise


async def form(request: fastapi.Request) -> dict[str, str]:
    """The fields of an urlencoded form body (last value wins)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[-1] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}


def _same_origin(request: fastapi.Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None  # browsers send Origin on POST; "null" is an opaque origin
    host = request.headers.get("host", "")
    return urllib.parse.urlsplit(origin).netloc == host


def check_csrf(request: fastapi.Request, fields: dict[str, str], expected: str) -> None:
    """Refuse a POST from another origin or without the expected CSRF token."""
    given = fields.get("csrf", "")
    if not _same_origin(request) or not given or not hmac.compare_digest(given, expected):
        raise Refused()


def new_login_csrf() -> str:
    return secrets.token_urlsafe(24)

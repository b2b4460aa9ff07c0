"""A list of hub URLs and failing over between them (the SDK's and the agents' clients).

A hub address may be several replicas' URLs, comma-separated
(``TAU_HUB_URL=http://hub-a:8787,http://hub-b:8787``, a context's hub URL, the agent's
``--hub``). ``Failover`` sends each request to the URL that answered last and moves on
to the next one when the request certainly did nothing there:

- the connection could not be made (refused, connect timeout, DNS), any method;
- the replica answered **503** (it refuses: lost its database, or is older than the
  schema; nothing was stored), any method;
- any other transport failure (reset, read timeout) only for reads (GET/HEAD): a write
  may have been stored before its reply was lost, so it is not sent twice; the caller
  gets the error and decides.

When every URL failed the last response (a 503) or error is the caller's to report.
Outside the layers (like ``payloads``) because the SDK and the agent both use it.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

__all__ = ["Failover", "split"]

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def split(urls: str) -> list[str]:
    """``"http://a, http://b/"`` → ``["http://a", "http://b"]`` (empty items dropped)."""
    return [u.strip().rstrip("/") for u in urls.split(",") if u.strip()]


class Failover:
    """Sends requests to one of ``urls``, failing over as the module docstring says."""

    def __init__(self, urls: str) -> None:
        self.urls = split(urls) or [urls]
        self._current = 0
        self._lock = threading.Lock()

    @property
    def current(self) -> str:
        """The URL requests go to first (the one that answered last)."""
        return self.urls[self._current]

    def send(self, http: httpx.Client, method: str, path: str, **kw: Any) -> httpx.Response:
        """The first usable response; raises the last ``httpx.HTTPError`` if none."""
        start = self._current
        last: httpx.Response | httpx.HTTPError | None = None
        for i in range(len(self.urls)):
            k = (start + i) % len(self.urls)
            try:
                r = http.request(method, self.urls[k] + path, **kw)
            except _NOTHING_SENT as exc:
                last = exc
                continue
            except httpx.TransportError as exc:
                if method.upper() not in _SAFE:
                    raise
                last = exc
                continue
            if r.status_code == 503 and len(self.urls) > 1:
                last = r
                continue
            with self._lock:
                self._current = k
            return r
        if isinstance(last, httpx.Response):
            return last
        assert last is not None
        raise last

"""HTTP access to a Ray dashboard: the Jobs REST API and the state API, with timeouts.

Owns the transport of ``RayBackend``'s read paths. Everything here is plain HTTP
(httpx), so an agent that only watches a cluster never imports Ray nor becomes a
Ray driver. Transport failures map onto ``taugrid.backends.errors``: connection
errors and timeouts → ``RayUnavailable`` (retryable); 404 on a job → ``JobNotFound``;
any other non-2xx → ``RayRequestFailed``.

Vocabulary: *address* is the dashboard URL, ``http://IP:PORT``; the state API lists
rows of one *resource* (``nodes``, ``actors``, ``tasks``, ``placement_groups``)
filtered by ``(key, "=", value)`` triples.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from taugrid.backends import errors

__all__ = ["DashboardClient", "auth_headers", "normalize_address"]

_STATE_LIMIT = 10_000


def normalize_address(address: str) -> str:
    """``IP:PORT`` or ``http://IP:PORT/`` → ``http://IP:PORT``."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = "http://" + address
    return address


def auth_headers() -> dict[str, str]:
    """The bearer header of Ray token auth when this process runs in token mode.

    Same sources as Ray's own clients: ``RAY_AUTH_MODE=token`` and the token in
    ``RAY_AUTH_TOKEN`` or the file ``RAY_AUTH_TOKEN_PATH``; ``{}`` otherwise.
    """
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return {}
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not token and path:
        token = Path(path).read_text().strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


class DashboardClient:
    """A small JSON client for one Ray dashboard."""

    def __init__(self, address: str, *, timeout_s: float = 10.0) -> None:
        self.address = normalize_address(address)
        self._timeout_s = timeout_s
        self._http = httpx.Client(base_url=self.address, timeout=timeout_s, headers=auth_headers())

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def request(self, method: str, path: str, *, job_id: str | None = None, **kwargs: Any) -> Any:
        """Send one request and return its decoded JSON body (errors mapped)."""
        try:
            resp = self._http.request(method, path, **kwargs)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise errors.RayUnavailable(
                f"Ray dashboard at {self.address} did not answer {method} {path}: {exc}"
            ) from exc
        if resp.status_code == 404 and job_id is not None:
            raise errors.JobNotFound(job_id, self.address)
        if resp.status_code in (502, 503, 504):
            raise errors.RayUnavailable(
                f"Ray dashboard at {self.address} is not ready ({resp.status_code})"
            )
        if resp.status_code >= 400:
            raise errors.RayRequestFailed(
                f"Ray dashboard {method} {path} failed with {resp.status_code}: {resp.text[:500]}"
            )
        try:
            return resp.json()
        except ValueError as exc:
            raise errors.RayRequestFailed(
                f"Ray dashboard {method} {path} answered non-JSON: {resp.text[:200]}"
            ) from exc

    def version(self) -> dict[str, Any]:
        """``/api/version``: proves the dashboard (and its job module) is up."""
        body: dict[str, Any] = self.request("GET", "/api/version")
        return body

    def job(self, job_id: str) -> dict[str, Any]:
        """The Jobs API's JobDetails of one submission id."""
        body: dict[str, Any] = self.request("GET", f"/api/jobs/{job_id}", job_id=job_id)
        return body

    def job_logs(self, job_id: str) -> str:
        """The job driver's whole log."""
        body = self.request("GET", f"/api/jobs/{job_id}/logs", job_id=job_id)
        return str(body.get("logs", ""))

    def stop_job(self, job_id: str) -> bool:
        """Ask Ray to stop a job; False when it was already terminal."""
        body = self.request("POST", f"/api/jobs/{job_id}/stop", job_id=job_id)
        return bool(body.get("stopped", False))

    def cluster_status(self) -> dict[str, Any]:
        """``/api/cluster_status``: the autoscaler's report (camelCased keys)."""
        body: dict[str, Any] = self.request("GET", "/api/cluster_status")
        data: dict[str, Any] = body.get("data", {})
        return data

    def list_state(
        self, resource: str, filters: list[tuple[str, str]] | None = None, *, detail: bool = False
    ) -> list[dict[str, Any]]:
        """Rows of one state-API resource, each filter an equality ``(key, value)``."""
        params: list[tuple[str, str | int]] = [
            ("limit", _STATE_LIMIT),
            ("timeout", max(int(self._timeout_s), 1)),
            ("detail", "1" if detail else "0"),
        ]
        for key, value in filters or []:
            params += [("filter_keys", key), ("filter_predicates", "="), ("filter_values", value)]
        body = self.request("GET", f"/api/v0/{resource}", params=params)
        if not body.get("result", False):
            raise errors.RayRequestFailed(
                f"Ray state API /api/v0/{resource} failed: {body.get('msg', body)}"
            )
        rows: list[dict[str, Any]] = body["data"]["result"]["result"]
        return rows

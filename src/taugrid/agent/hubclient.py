"""The agent's HTTP client to the hub: register, sync, fetch code, mark nodes. Agents dial out.

Errors: ``HubUnreachable`` (retryable: the agent keeps its attempts running and tries
again) and ``HubRefused`` (the hub answered 4xx: a configuration problem such as a
wrong token or cluster ID). ``url`` may list several hub replicas, comma-separated;
requests fail over between them (``taugrid.huburls``).
"""

from __future__ import annotations

from typing import Any

import httpx

from taugrid import errors, huburls
from taugrid import payloads as wire

__all__ = ["HubClient", "HubRefused", "HubUnreachable"]


class HubUnreachable(errors.SystemFault):
    def __init__(self, message: str) -> None:
        super().__init__(message, "the agent retries; check that the hub is up", retryable=True)


class HubRefused(errors.UserError):
    """The hub rejected the agent (bad token, unknown cluster)."""


class HubClient:
    def __init__(self, url: str, token: str, cluster_id: str, timeout_s: float = 10.0) -> None:
        self.cluster_id = cluster_id
        self._hubs = huburls.Failover(url)
        self._http = httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        try:
            r = self._hubs.send(self._http, "POST", path, json=body)
        except httpx.HTTPError as exc:
            raise HubUnreachable(f"hub at {self._hubs.current}: {exc}") from exc
        if r.status_code >= 500:
            raise HubUnreachable(f"hub answered {r.status_code}: {r.text[:200]}")
        if r.status_code >= 400:
            raise HubRefused(f"hub refused {path}: {r.status_code} {r.text[:300]}")
        return r.json()

    def register(self, region: str) -> None:
        body = wire.AgentRegister(cluster_id=self.cluster_id, region=region)
        self._post(f"/v1/agents/{self.cluster_id}/register", body.model_dump())

    def sync(self, req: wire.AgentSync) -> wire.AgentSyncReply:
        data = self._post(f"/v1/agents/{self.cluster_id}/sync", req.model_dump(mode="json"))
        return wire.AgentSyncReply.model_validate(data)

    def mark_node(self, node_id: str, kind: str, reason: str, source: str = "checker") -> None:
        """Mark a node of this cluster through the admin API (as ``source``)."""
        body = wire.NodeFault(
            cluster_id=self.cluster_id, node_id=node_id, kind=kind, reason=reason, source=source
        )
        self._post("/v1/admin/nodes/fault", body.model_dump())

    def clear_node(self, node_id: str, source: str = "checker") -> None:
        """Clear this agent's own (``source``) marks of a node."""
        body = wire.NodeFault(cluster_id=self.cluster_id, node_id=node_id, source=source)
        self._post("/v1/admin/nodes/clear", body.model_dump())

    def code(self, run_id: str) -> bytes:
        try:
            r = self._hubs.send(self._http, "GET", f"/v1/agents/{self.cluster_id}/code/{run_id}")
        except httpx.HTTPError as exc:
            raise HubUnreachable(f"hub at {self._hubs.current}: {exc}") from exc
        r.raise_for_status()
        return r.content

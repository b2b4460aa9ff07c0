"""HTTP routes of node health (``/v1/admin/nodes``): mark, clear, list, history.

Who may call what: an admin marks and clears any node (source ``admin``); an agent
token marks and clears nodes of its own cluster only, as ``checker`` or
``log_monitor``, and clears only its own source's marks (an admin's mark stays until
an admin clears it). Listing and history are for admins. The rules of marks live in
``hub.runs.nodehealth``.
"""

from __future__ import annotations

from typing import Any

import fastapi

from taugrid import payloads as wire
from taugrid.hub.api.auth import Admin, Auth, Principal
from taugrid.hub.core import context, pools
from taugrid.hub.runs import attempts, nodehealth, runs
from taugrid.lifecycle import states as st

__all__ = ["router"]

router = fastapi.APIRouter(prefix="/v1", tags=["nodes"])


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _source(p: Principal, body: wire.NodeFault) -> str:
    """The mark's source as the token allows: admins are ``admin``; agents their own."""
    if p.role == "admin":
        return "admin"
    if p.role == "agent" and p.scope.get("cluster") == body.cluster_id:
        if body.source == "admin":
            raise fastapi.HTTPException(403, "an agent marks as checker or log_monitor")
        return body.source
    raise fastapi.HTTPException(403, f"this token may not mark nodes of {body.cluster_id}")


@router.post("/admin/nodes/fault")
def mark_node(request: fastapi.Request, body: wire.NodeFault, p: Auth) -> dict[str, Any]:
    hub = _hub(request)
    source = _source(p, body)
    cluster = hub.clusters.get(body.cluster_id)
    if cluster is None:
        raise runs.NotFound(
            f"no cluster '{body.cluster_id}'", "list clusters with: tau cluster list"
        )
    nodes = {str(n.get("node_id")) for n in (cluster.get("report") or {}).get("nodes", [])}
    if body.node_id not in nodes:
        raise runs.NotFound(
            f"cluster '{body.cluster_id}' has no node '{body.node_id}'",
            "see node IDs with: tau admin node list",
        )
    row = nodehealth.mark(
        hub, body.cluster_id, body.node_id, body.kind, body.reason, source, p.name
    )
    if body.kind == st.RECLAIM_MARK:
        if row.get("new"):
            pools.count_reclaim(hub, body.cluster_id, body.node_id)
        attempts.reclaim(hub, body.cluster_id, body.node_id, body.reason or "spot reclaim")
    if source == "admin":
        hub.auth.audit(p.name, "node.fault", f"{body.cluster_id}/{body.node_id}", body.model_dump())
    return row


@router.post("/admin/nodes/clear")
def clear_node(request: fastapi.Request, body: wire.NodeFault, p: Auth) -> dict[str, Any]:
    hub = _hub(request)
    source = _source(p, body)
    n = nodehealth.clear(
        hub, body.cluster_id, body.node_id, None if source == "admin" else source, p.name
    )
    if source == "admin":
        hub.auth.audit(p.name, "node.clear", f"{body.cluster_id}/{body.node_id}", {})
    return {"cleared": n}


@router.get("/admin/nodes")
def list_nodes(request: fastapi.Request, p: Admin) -> list[dict[str, Any]]:
    return nodehealth.node_list(_hub(request))


@router.get("/admin/nodes/{node_id}/history")
def node_history(
    request: fastapi.Request, node_id: str, p: Admin, cluster: str = "local"
) -> list[dict[str, Any]]:
    return nodehealth.history(_hub(request), cluster, node_id)

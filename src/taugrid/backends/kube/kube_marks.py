"""The hub's node marks on a Kubernetes cluster: a marked node gets a condition and a
taint, as node-problem-detector and the DCGM exporter would give it, so kube-scheduler
keeps new pods off it; clearing the mark removes both.

    condition  TauGridNodeFault=True, reason MarkedFaulty, message "marked faulty: <kind>"
               (False, reason Cleared, once the mark is closed)
    taint      taugrid.io/unhealthy=<kind>:NoSchedule

It has the agent's cordon interface (``jobs``, ``cordon``, ``uncordon``; the Ray
backend's is ``backends.ray.ray_cordon.GpuCordon``). The taint on the Node is the state:
a restarted agent finds the nodes it marked by their taint. Running pods are not
evicted by the taint (NoSchedule); the agent stops attempts on marked nodes itself.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from taugrid import errors
from taugrid.backends.kube import kube_api

__all__ = ["CONDITION", "TAINT_KEY", "NodeMarks"]

CONDITION = "TauGridNodeFault"
TAINT_KEY = "taugrid.io/unhealthy"
_EFFECT = "NoSchedule"


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(node.get("spec", {}).get("taints") or [])


def _condition(node: dict[str, Any]) -> dict[str, Any]:
    conds = node.get("status", {}).get("conditions") or []
    return next((dict(c) for c in conds if c.get("type") == CONDITION), {})


def _kind(reason: str) -> str:
    """A taint value (label syntax) from ``marked faulty: <kind>``."""
    word = reason.rsplit(":", 1)[-1].strip() or "faulty"
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in word)[:63].strip("-_.")


class NodeMarks:
    """Marks of one cluster's Nodes, applied through its API server."""

    def __init__(self, api: kube_api.KubeApi) -> None:
        self.api = api
        self._marked: dict[str, str] | None = None

    @property
    def jobs(self) -> dict[str, str]:
        """Marked node → reason (read from the Nodes' taints the first time)."""
        if self._marked is None:
            try:
                nodes = self.api.list("Node")
            except errors.TauError:  # the API server is away: read them next time
                return {}
            self._marked = {
                n["metadata"]["name"]: str(_condition(n).get("message") or "marked")
                for n in nodes
                if any(t.get("key") == TAINT_KEY for t in _taints(n))
            }
        return self._marked

    def cordon(self, node: str, reason: str) -> None:
        """Taint ``node`` and set its condition (nothing when both are there already)."""
        obj = self.api.get("Node", node)
        if obj is None:
            return
        taint = {"key": TAINT_KEY, "value": _kind(reason), "effect": _EFFECT}
        if taint not in _taints(obj):
            kept = [t for t in _taints(obj) if t.get("key") != TAINT_KEY]
            self._set_taints(obj, [*kept, taint])
        cond = _condition(obj)
        if cond.get("status") != "True" or cond.get("message") != reason:
            self._set_condition(node, "True", "MarkedFaulty", reason)
        self.jobs[node] = reason

    def uncordon(self, node: str) -> None:
        """Remove the taint and set the condition False."""
        obj = self.api.get("Node", node)
        if obj is not None:
            kept = [t for t in _taints(obj) if t.get("key") != TAINT_KEY]
            if kept != _taints(obj):
                self._set_taints(obj, kept)
            if _condition(obj).get("status") == "True":
                self._set_condition(node, "False", "Cleared", "the TauGrid mark was cleared")
        self.jobs.pop(node, None)

    def _set_taints(self, node: dict[str, Any], taints: list[dict[str, Any]]) -> None:
        # taints replace as a whole; resourceVersion makes a concurrent change a conflict
        # (refused; the agent applies the marks again on its next sync)
        meta = {"resourceVersion": node["metadata"]["resourceVersion"]}
        body = {"metadata": meta, "spec": {"taints": taints or None}}
        self.api.patch("Node", node["metadata"]["name"], body)

    def _set_condition(self, node: str, status: str, reason: str, message: str) -> None:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        cond = {
            "type": CONDITION,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        self.api.patch(
            "Node", node, {"status": {"conditions": [cond]}}, subresource="status", strategic=True
        )

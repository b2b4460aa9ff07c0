"""Node marks with their source, suspicion from failed attempts, and a node's history.

Owns the hub's side of health-driven recovery (docs/ARCHITECTURE.md, "Node health";
the *GPU healthy* phase):

- ``mark`` / ``clear``: the one path for marks, whoever sets them (``source``:
  ``admin`` through ``tau admin node``, ``checker`` from an agent's node health
  checker, ``log_monitor`` from suspicion below). Each is a node event (``tau admin
  node history``) and, for every run with an attempt on the node, a run event
  (``tau run history``). The agent cordons marked nodes and stops attempts on them;
  the run is then re-placed on healthy nodes and resumes from its checkpoint.
- ``suspect``: a failed attempt whose log or message points at a node (Xid, ECC, a
  lost GPU, an NCCL timeout: ``health.logscan``) makes each of its nodes *suspect*
  (no mark: it still runs work); a node suspected by ``QUARANTINE_AFTER`` different
  attempts since its last clear is quarantined (a ``quarantine`` mark) until cleared.
- ``stalled`` / ``stall_retry``: an attempt that stopped making progress (the agent's
  stall detector) warns on the run's Progressing phase; one stopped as ``stall`` is
  restarted from its last checkpoint, and a run without one fails with that reason.
"""

from __future__ import annotations

import time
from typing import Any

from taugrid.health import logscan
from taugrid.hub.core import context
from taugrid.hub.runs import runs
from taugrid.lifecycle import node_ids
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st

__all__ = [
    "QUARANTINE_AFTER",
    "clear",
    "history",
    "mark",
    "node_list",
    "stall_retry",
    "stalled",
    "suspect",
    "unknown",
]

QUARANTINE_AFTER = 2
"""Distinct attempts that must point at a node before it is quarantined."""


def mark(
    hub: context.Hub,
    cluster_id: str,
    node_id: str,
    kind: str,
    reason: str,
    source: str,
    by: str,
) -> dict[str, Any]:
    """Open a mark (idempotent per kind and source) and record it everywhere; ``new`` in
    the row says whether the node had no open mark of this kind before."""
    before = {(m["kind"], m["source"]) for m in _open(hub, cluster_id, node_id)}
    row = hub.clusters.mark_node(cluster_id, node_id, kind, reason or kind, source)
    if (kind, source) not in before:
        what = {"kind": kind, "source": source, "reason": reason, "by": by}
        _record(hub, "node_marked", cluster_id, node_id, what)
        hub.notify(cluster_id)  # its agent hears of the mark now, not at its next poll
    return {**row, "new": kind not in {k for k, _ in before}}


def clear(hub: context.Hub, cluster_id: str, node_id: str, source: str | None, by: str) -> int:
    """Clear the node's open marks (only ``source``'s when given)."""
    n = hub.clusters.clear_node(cluster_id, node_id, source)
    if n:
        _record(hub, "node_cleared", cluster_id, node_id, {"source": source or "all", "by": by})
        hub.notify(cluster_id)
    return n


def _open(hub: context.Hub, cluster_id: str, node_id: str) -> list[dict[str, Any]]:
    return [m for m in hub.clusters.open_marks(cluster_id) if m["node_id"] == node_id]


def _record(
    hub: context.Hub, kind: str, cluster_id: str, node_id: str, what: dict[str, Any]
) -> None:
    payload = {"cluster": cluster_id, "node": node_id, **what}
    hub.runs.add_event(None, kind, payload)
    for a in hub.runs.attempts_on_cluster(cluster_id):
        if node_id in (a["nodes"] or []) and a["state"] in {
            s.value for s in st.ACTIVE_ATTEMPT_STATES
        }:
            hub.runs.add_event(a["run_id"], kind, {**payload, "attempt": a["number"]})


def suspect(
    hub: context.Hub, a: dict[str, Any], message: str, kind: st.FailureKind | None
) -> st.FailureKind | None:
    """Suspect the attempt's nodes if its failure points at them; returns the kind the
    failure should have (``node_failure`` when the log blames the node)."""
    finding = logscan.first_node_fault(message)
    if finding is None or kind in (*st.HUB_STOPPED, st.FailureKind.TIMEOUT):
        return kind
    for node in a["nodes"] or []:
        what = {"attempt": a["number"], "token": a["token"], "run": a["run_id"]}
        what |= {"finding": finding.kind, "line": finding.line}
        _record(hub, "node_suspect", a["cluster_id"], node, what)
        hub.runs.add_event(
            a["run_id"], "node_suspect", {"cluster": a["cluster_id"], "node": node, **what}
        )
        tokens = _suspicions(hub, a["cluster_id"], node)
        if len(tokens) >= QUARANTINE_AFTER:
            why = f"suspected by {len(tokens)} attempts ({finding.kind}: {finding.line})"
            mark(hub, a["cluster_id"], node, "quarantine", why, "log_monitor", "log monitor")
    return st.FailureKind.NODE_FAILURE


def _suspicions(hub: context.Hub, cluster_id: str, node_id: str) -> set[int]:
    """Attempts that suspected the node since its last clear."""
    tokens: set[int] = set()
    for e in hub.runs.node_events():
        p = e["payload"]
        if p.get("cluster") != cluster_id or p.get("node") != node_id:
            continue
        if e["kind"] == "node_cleared":
            tokens.clear()
        elif e["kind"] == "node_suspect":
            tokens.add(int(p["token"]))
    return tokens


def unknown(hub: context.Hub, cluster_id: str, nodes: list[str]) -> str:
    """Why the health of ``nodes`` is unknown (their checker crashed), or ``""``."""
    rows = ((hub.clusters.get(cluster_id) or {}).get("report") or {}).get("nodes", [])
    out = [
        f"{node_ids.short(r['node_id'])}: {c['reason']}"
        for r in rows
        if r.get("node_id") in nodes and r.get("health_check") == "unknown"
        for c in r.get("conditions", [])
        if c.get("status") == "unknown"
    ]
    return "; ".join(out)


def history(hub: context.Hub, cluster_id: str, node_id: str) -> list[dict[str, Any]]:
    """Every event about the node, oldest first: marks, clears, suspicions."""
    return [
        {"ts": e["ts"], "event": e["kind"], **e["payload"]}
        for e in hub.runs.node_events()
        if e["payload"].get("cluster") == cluster_id and e["payload"].get("node") == node_id
    ]


def node_list(hub: context.Hub) -> list[dict[str, Any]]:
    """Every node the agents report, with its conditions and open marks (with source)."""
    marks = hub.clusters.open_marks()
    out = []
    for c in hub.clusters.all():
        for n in (c.get("report") or {}).get("nodes", []):
            mine = [m for m in marks if m["cluster_id"] == c["id"] and m["node_id"] == n["node_id"]]
            out.append(
                {
                    "cluster": c["id"],
                    "region": c["region"],
                    "node_id": n["node_id"],
                    "ip": n.get("ip"),
                    "alive": n.get("alive"),
                    "gpus_total": n.get("gpus_total", 0),
                    "health": _health(n.get("health_check", "unknown"), mine),
                    "checks": n.get("health_check", "unknown"),
                    "conditions": n.get("conditions", []),
                    "marks": [
                        {k: m[k] for k in ("kind", "source", "reason", "marked_at")} for m in mine
                    ],
                    "checked_at": n.get("checked_at"),
                    "now": time.time(),
                }
            )
    return out


def _health(checks: str, marks: list[dict[str, Any]]) -> str:
    """A node's health in the node list: its checks' worst status, but never ``ok`` (nor
    ``warning``/``unknown``) while a mark is open — no new work goes there: ``faulty``,
    or ``cordoned`` when an admin's cordon is its only mark. ``failing`` stays."""
    if not marks or checks == "failing":
        return checks
    return "cordoned" if all(m["kind"] == "cordon" for m in marks) else "faulty"


def stalled(hub: context.Hub, run_id: str, attempt: int, why: str) -> None:
    """The agent saw no progress for ``warn_after`` intervals: a Progressing warning."""
    hub.runs.add_event(run_id, "stalled", {"attempt": attempt, "why": why})
    rec = ph.PhaseRecord(
        ph.Phase.PROGRESSING, ph.PhaseStatus.WARNING, "stall detector", why, time.time()
    )
    hub.runs.set_phase(run_id, rec)


def stall_retry(
    hub: context.Hub, run: dict[str, Any], retry_on: list[str], left: int, message: str
) -> tuple[list[str], int, str]:
    """``(retry_on, retries left, message)`` for a ``stall``: restart_after asked for a
    restart, which only a checkpoint makes possible (never from scratch, never forever)."""
    retry_on = [*retry_on, st.FailureKind.STALL.value]
    if runs.latest_checkpoint(hub, run) is None:
        return retry_on, 0, f"{message}\nno checkpoint to restart from: the run is failed"
    return retry_on, left, message

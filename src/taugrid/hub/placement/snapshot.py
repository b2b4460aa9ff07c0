"""The snapshot the hub's scheduling cycle decides on, built once per tick from the store.

Owns the translation of live state into the pure core's immutable views
(``scheduling.snapshot``): a run row becomes a ``PendingRun``; a cluster row (its agent's
last report, open node marks, data locality, platform.yaml's compliance and
interconnect) becomes a ``ClusterView`` with room already taken for attempts the report
may not show yet; team quotas and quota holders become ``QuotaView``/``AdmittedRun``.
Reads only; the scheduler (``hub.server.scheduler``), prewarming and data staging decide on it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from taugrid.hub.core import context
from taugrid.hub.placement import data_view
from taugrid.hub.runs import guests
from taugrid.lifecycle import states as st
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap
from taugrid.store import data as store_data

__all__ = ["LIVE_STATES", "build", "pending_view", "platform_fields", "probe"]

LIVE_STATES = ("ready", "degraded")
"""Cluster states that take new work (``unavailable``: its agent says it cannot run jobs)."""


def pending_view(run: dict[str, Any], hub: context.Hub | None = None) -> snap.PendingRun:
    """The run as the core sees it; with ``hub``, also its datasets and runtime key."""
    s = run["spec"]
    view = snap.PendingRun(
        run_id=run["id"],
        team=run["team"],
        priority=run["priority"],
        created_at=run["created_at"],
        workers=s["workers"],
        gpus_per_worker=s["gpus_per_worker"],
        cpus_per_worker=s["cpus_per_worker"],
        memory_per_worker=s["memory_per_worker_bytes"],
        gpu_model=s.get("gpu_model"),
        allowed_regions=tuple(s.get("allowed_regions", ())),
        admitted=run["state"] == st.RunState.ADMITTED.value,
        not_before=run["not_before"],
        objective=s.get("objective"),
        communication=s.get("communication"),
        compliance=tuple(s.get("compliance", ())),
        runtime_s=s.get("max_runtime_s"),
        relocation=_relocation(run.get("relocation")),
        capacity=run.get("capacity") or s.get("capacity", snap.ON_DEMAND),
        max_price=s.get("max_price"),
    )
    return data_view.with_needs(hub, run, view) if hub is not None else view


@dataclasses.dataclass(frozen=True)
class _Reads:
    """What every cluster's view needs from the store, read once per snapshot (a query
    per cluster had made a tick's cost grow with the fleet)."""

    marks: dict[str, set[str]]
    complete: dict[str, Any]
    attempts: dict[str, list[data_view.Held]]
    lent: dict[str, list[guests.Held]]

    @classmethod
    def of(cls, hub: context.Hub, live: list[data_view.Held] | None = None) -> _Reads:
        marks: dict[str, set[str]] = {}
        for m in hub.clusters.open_marks():
            marks.setdefault(m["cluster_id"], set()).add(m["node_id"])
        attempts: dict[str, list[data_view.Held]] = {}
        for a, run in hub.runs.unreleased_with_runs() if live is None else live:
            attempts.setdefault(a["cluster_id"], []).append((a, run))  # by token
        complete = store_data.DataStore(hub.engine).complete_regions()
        return cls(marks, complete, attempts, guests.held_by_cluster(hub))


def _cluster_view(
    hub: context.Hub, row: dict[str, Any], now: float, reads: _Reads
) -> snap.ClusterView:
    ready = row["state"] in LIVE_STATES and row["lease_expires"] > now
    attempts = reads.attempts.get(row["id"], [])
    view = snap.cluster_from_report(
        row["id"],
        row["region"],
        ready,
        row["report"],
        faulty=reads.marks.get(row["id"], set()),
        **data_view.cluster_fields(row, now, reads.complete, attempts),
        **platform_fields(hub, row),
    )
    view = _reserve_unseen(attempts, view, now)
    return _reserve_guests(reads.lent.get(row["id"], []), view)


def _relocation(doc: dict[str, Any] | None) -> snap.Relocation | None:
    if not doc:
        return None
    return snap.Relocation(tuple(doc.get("away_from", ())), float(doc.get("cpus", 0.0)))


def platform_fields(hub: context.Hub, row: dict[str, Any]) -> dict[str, Any]:
    """What platform.yaml declares of a cluster: its region's compliance, its interconnect,
    whether its backend hands out whole GPUs only (Kubernetes)."""
    region = next((r for r in hub.platform.regions if r.name == row["region"]), None)
    spec = next((c for c in region.clusters if c.name == row["id"]), None) if region else None
    return {
        "compliance": tuple(region.compliance) if region else (),
        "interconnect_gbps": spec.interconnect_gbps if spec else 0.0,
        "whole_gpus": spec is not None and spec.backend == "kubernetes",
    }


def _reserve_unseen(
    attempts: list[data_view.Held], view: snap.ClusterView, now: float
) -> snap.ClusterView:
    """Take room for attempts the agent's report may not show yet.

    The hub's ledger (the GPUs of the cluster's unreleased attempts) is a lower bound on
    the GPUs in use: while the report shows fewer in use — an attempt assigned after it
    was taken, or Ray's view lagging a job — the newest attempts are reserved until the
    ledger is covered. An attempt the report already counts is not reserved again: the
    agent reports at once when an attempt starts or ends, so freed GPUs are placed
    again without waiting for the next periodic report.
    """
    held = []
    for a, run in attempts:
        bound = tuple((a["placement"] or {}).get("nodes") or ())
        p = pending_view(run)  # a span's head holds only its own share here
        p = dataclasses.replace(p, workers=guests.head_workers(a["placement"], p.workers))
        held.append((-(a["started_at"] or now), -a["token"], p, bound))
    ledger = sum(p.workers * p.gpus_per_worker for _s, _t, p, _b in held)
    deficit, unseen = ledger - _gpus_used(view), []
    for newest in sorted(held, key=lambda h: h[:2]):
        if deficit <= 0:
            break
        unseen.append(newest)
        deficit -= newest[2].workers * newest[2].gpus_per_worker
    # On the nodes the cycle bound them to; attempts from before node binding first fit,
    # in the order they were placed (oldest token first), as the cycle that placed them.
    for _s, _t, p, bound in sorted(unseen, key=lambda h: -h[1]):
        view = cycle.take(p, view, bound) if bound else cycle.reserve(p, view)
    return view


def _reserve_guests(lent: list[guests.Held], view: snap.ClusterView) -> snap.ClusterView:
    """Take room for the worker groups this cluster lends to spans headed elsewhere: their
    nodes join the head's Ray cluster, so this cluster's report never shows them busy."""
    for _a, run, group in lent:
        p = dataclasses.replace(pending_view(run), workers=int(group["workers"]))
        bound = tuple(group.get("nodes") or ())
        view = cycle.take(p, view, bound) if bound else cycle.reserve(p, view)
    return view


def _gpus_used(view: snap.ClusterView) -> float:
    return sum(n.gpus_total - n.gpus_free for n in view.nodes if n.alive)


def build(
    hub: context.Hub,
    now: float,
    clusters: list[dict[str, Any]] | None = None,
    live: list[data_view.Held] | None = None,
) -> snap.Snapshot:
    """Clusters, quotas (with cohorts and limits) and quota holders, as of ``now``
    (``clusters``: the cluster rows, ``live``: the unreleased attempts with their runs,
    when the caller read them this tick)."""
    usage = hub.runs.quota_usage()
    quotas = tuple(
        snap.QuotaView(
            t.name,
            q.gpu_model,
            q.nominal,
            usage.get((t.name, q.gpu_model), 0),
            cohort=t.cohort,
            borrowing_limit=q.borrowing_limit,
            lending_limit=q.lending_limit,
            strategy=t.queueing_strategy,
        )
        for t in hub.platform.teams
        for q in t.quotas
    )
    admitted = tuple(
        snap.AdmittedRun(
            r["id"], r["team"], r["gpu_model"] or "", r["gpus"], r["priority"], r["created_at"]
        )
        for r in hub.runs.holding_quota()
        if r["gpus"]
    )
    reads = _Reads.of(hub, live)
    rows = hub.clusters.all() if clusters is None else clusters
    views = tuple(_cluster_view(hub, c, now, reads) for c in rows)
    return snap.Snapshot(now=now, clusters=views, quotas=quotas, admitted=admitted)


def probe(
    hub: context.Hub, run: dict[str, Any], policy: cycle.Policy
) -> tuple[cycle.Decision, snap.PendingRun, snap.Snapshot]:
    """Where the core would place ``run`` now, as if it were waiting and admitted: the
    decision, the run's view and the snapshot it was decided on (explain-placement, a
    relocation)."""
    now_view = build(hub, time.time())
    (view,) = data_view.near_data([pending_view(run, hub)], now_view)
    waiting = dataclasses.replace(view, admitted=True, not_before=0.0)
    (decision,) = cycle.schedule(now_view, [waiting], policy)
    return decision, view, now_view

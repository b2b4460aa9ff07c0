"""What platform.yaml says of a cluster's node pools: prices per capacity, which reported
nodes are spot, and the spot pools' reclaim rates.

The one place the hub reads ``node_pools`` for pricing: the agents' reports are priced
here before they are stored (so the scheduling core's ``ClusterView`` gets its on-demand
and spot prices, GPU speed and reclaim rate, and each node whether it is spot, by its
``taugrid.io/pool`` label), and ``hub.tenancy.cost`` prices attempts with ``price_of``.

A spot pool's reclaim rate is what the hub observed, smoothed by platform.yaml's estimate:
``(reclaims + estimate x PRIOR_NODE_HOURS) / (node-hours seen + PRIOR_NODE_HOURS)``. The
estimate weighs as much as ``PRIOR_NODE_HOURS`` of observation, so a new pool is priced by
it and a pool seen for weeks by what it did. Node-hours are the pool's alive nodes summed
over the reports (``observe``); reclaims are the ``reclaim`` marks opened on its nodes
(``count_reclaim``).

A run's ``resilience.max_restarts`` caps the restarts after reclaims (``past_restarts``):
the next reclaim sends a capacity ``any`` run on demand (``runs.capacity``, which the
scheduler's view of the run prefers to its spec) and fails a capacity ``spot`` run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from taugrid.lifecycle import states as st
from taugrid.platform import models as pm
from taugrid.spec import models as sm

if TYPE_CHECKING:
    from taugrid.hub.core import context

__all__ = [
    "PRIOR_NODE_HOURS",
    "count_reclaim",
    "gpu_pools",
    "observe",
    "past_restarts",
    "price_of",
    "price_report",
]

PRIOR_NODE_HOURS = 24.0
"""How much observation platform.yaml's ``reclaims_per_hour`` is worth, in node-hours."""
_GAP_S = 120.0
"""Longest gap between two reports counted as seen (a longer one: the hub heard nothing)."""


def gpu_pools(plat: pm.Platform, cluster_id: str) -> list[pm.NodePool]:
    """The pools with GPUs of ``cluster_id`` (none when it is not in platform.yaml)."""
    return [
        p
        for r in plat.regions
        for c in r.clusters
        if c.name == cluster_id
        for p in c.node_pools
        if p.gpus_per_node
    ]


def price_of(
    plat: pm.Platform,
    cluster_id: str,
    gpu_model: str | None,
    capacity: str = sm.Capacity.ON_DEMAND.value,
) -> float | None:
    """$/GPU-hour of ``cluster_id``'s cheapest pool of ``gpu_model`` (any model when None)
    and ``capacity`` (None: no such pool in platform.yaml)."""
    mine = [
        p
        for p in gpu_pools(plat, cluster_id)
        if (gpu_model is None or p.gpu_model == gpu_model) and p.capacity.value == capacity
    ]
    return min((p.cost_per_gpu_hour for p in mine), default=None)


def price_report(
    plat: pm.Platform,
    cluster_id: str,
    report: dict[str, Any],
    seen: dict[str, tuple[float, int]] | None = None,
) -> None:
    """Add what platform.yaml says to an agent's state report (a ``StateReport`` as JSON):
    the cheapest on-demand and spot $/GPU-hour, the slowest GPU model's speed, ``spot``
    on each node of a spot pool, and the spot pools' reclaim rate (weighted by nodes;
    ``seen``: pool → (node-seconds, reclaims) observed, in ``reclaims_observed``)."""
    pools = gpu_pools(plat, cluster_id)
    spot = [p for p in pools if p.capacity is sm.Capacity.SPOT]
    on_demand = [p.cost_per_gpu_hour for p in pools if p.capacity is not sm.Capacity.SPOT]
    speed = {g.name: g.speed for g in plat.gpu_types}
    spot_price = min((p.cost_per_gpu_hour for p in spot), default=None)
    report["cost_per_gpu_hour"] = min(on_demand, default=spot_price or 0.0)
    report["spot_cost_per_gpu_hour"] = spot_price
    report["gpu_speed"] = min((speed.get(p.gpu_model or "", 1.0) for p in pools), default=1.0)
    seen = seen or {}
    nodes = sum(p.nodes for p in spot)
    rates = {p.name: _rate(p, *seen.get(p.name, (0.0, 0))) for p in spot}
    report["reclaims_per_hour"] = (
        sum(rates[p.name] * p.nodes for p in spot) / nodes if nodes else 0.0
    )
    report["reclaims_observed"] = {
        name: {"node_hours": s / 3600, "reclaims": n} for name, (s, n) in seen.items()
    }
    spot_names = {p.name for p in spot}
    for node in report.get("nodes") or []:
        node["spot"] = node.get("pool") in spot_names


def _rate(pool: pm.NodePool, node_seconds: float, reclaims: int) -> float:
    prior = pool.reclaims_per_hour * PRIOR_NODE_HOURS
    return (reclaims + prior) / (node_seconds / 3600 + PRIOR_NODE_HOURS)


def observe(hub: context.Hub, cluster_id: str, report: dict[str, Any]) -> None:
    """Count the report's alive spot nodes towards their pools' node-hours, then price it."""
    spot = {p.name for p in gpu_pools(hub.platform, cluster_id) if p.capacity is sm.Capacity.SPOT}
    if spot:
        alive = dict.fromkeys(spot, 0)
        for node in report.get("nodes") or []:
            if node.get("pool") in spot and node.get("alive", True):
                alive[node["pool"]] += 1
        hub.clusters.observe_pools(cluster_id, alive, time.time(), _GAP_S)
    seen = hub.clusters.pool_stats(cluster_id) if spot else {}
    price_report(hub.platform, cluster_id, report, seen)


def count_reclaim(hub: context.Hub, cluster_id: str, node_id: str) -> None:
    """A reclaim mark opened on ``node_id``: one more reclaim of its spot pool."""
    row = hub.clusters.get(cluster_id) or {}
    nodes = (row.get("report") or {}).get("nodes") or []
    pool = next((n.get("pool") for n in nodes if n.get("node_id") == node_id), None)
    spot = {p.name for p in gpu_pools(hub.platform, cluster_id) if p.capacity is sm.Capacity.SPOT}
    if pool in spot:
        hub.clusters.count_reclaim(cluster_id, str(pool), time.time())


def past_restarts(
    hub: context.Hub, run: dict[str, Any], left: int, message: str
) -> tuple[int, str]:
    """``(retries left, message)`` after a reclaim: within ``resilience.max_restarts`` the
    run restarts; past it an ``any`` run restarts on demand and a ``spot`` run fails."""
    limit = run["spec"].get("max_restarts")
    reclaims = sum(
        a["failure_kind"] == st.FailureKind.RECLAIM.value
        for a in hub.runs.attempts_for_run(run["id"])
    )
    if limit is None or reclaims <= limit:
        return left, message
    said = f"reclaimed {reclaims} times, more than resilience.max_restarts ({limit})"
    if run["spec"].get("capacity") == sm.Capacity.ANY.value:
        hub.runs.update_run(run["id"], capacity=sm.Capacity.ON_DEMAND.value)
        hub.runs.add_event(run["id"], "spot_given_up", {"text": f"{said}: on demand from now"})
        return left, message
    return 0, (
        f"{message}\n{said}: the run is failed; set resilience.capacity: any to finish on "
        "demand, or raise max_restarts"
    )

"""What platform.yaml says of a cluster's node pools: prices per capacity, which reported
nodes are spot, and the spot pools' reclaim rates.

The one place the hub reads ``node_pools`` for pricing: the agents' reports are priced
here before they are stored (so the scheduling core's ``ClusterView`` gets its on-demand
and spot prices, GPU speed and reclaim rate, and each node whether it is spot, by its
``taugrid.io/pool`` label), and ``hub.cost`` prices attempts with ``price_of``. A spot
pool's reclaim rate is the one platform.yaml estimates (``reclaims_per_hour``).
"""

from __future__ import annotations

from typing import Any

from taugrid.platform import models as pm
from taugrid.spec import models as sm

__all__ = ["gpu_pools", "price_of", "price_report"]


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


def price_report(plat: pm.Platform, cluster_id: str, report: dict[str, Any]) -> None:
    """Add what platform.yaml says to an agent's state report (a ``StateReport`` as JSON):
    the cheapest on-demand and spot $/GPU-hour, the slowest GPU model's speed, the spot
    pools' reclaim rate (weighted by nodes), and ``spot`` on each node of a spot pool."""
    pools = gpu_pools(plat, cluster_id)
    spot = [p for p in pools if p.capacity is sm.Capacity.SPOT]
    on_demand = [p.cost_per_gpu_hour for p in pools if p.capacity is not sm.Capacity.SPOT]
    speed = {g.name: g.speed for g in plat.gpu_types}
    spot_price = min((p.cost_per_gpu_hour for p in spot), default=None)
    report["cost_per_gpu_hour"] = min(on_demand, default=spot_price or 0.0)
    report["spot_cost_per_gpu_hour"] = spot_price
    nodes = sum(p.nodes for p in spot)
    rate = sum(p.reclaims_per_hour * p.nodes for p in spot) / nodes if nodes else 0.0
    report["reclaims_per_hour"] = rate
    report["gpu_speed"] = min((speed.get(p.gpu_model or "", 1.0) for p in pools), default=1.0)
    spot_names = {p.name for p in spot}
    for node in report.get("nodes") or []:
        node["spot"] = node.get("pool") in spot_names

"""Baseline multi-region placement policies, expressed as plugin sets for ``cycle.schedule``.

The multi-region simulator (``sim.mr_sim``) compares TauGrid's ``cycle.default_policy()``
with what other systems do, each run through the same cycle (same admission, same
filters for readiness/region/fit, same reserve), differing only in plugins:

- ``first-to-admit`` (MultiKueue-like): the first cluster in a fixed order with free
  capacity now; data is ignored (``OrderScore``).
- ``cheapest`` (SkyPilot-like): the cluster with the lowest estimated dollar cost,
  SkyPilot-optimizer style: GPU price x (runtime + transfer time) + egress, with the
  runtime fixed at SkyPilot's 1-hour default (runs carry no estimate) and every
  transfer timed at a fixed 10 Gbit/s, not the measured links (``SkyCostScore``).
- ``static-weights`` (the seed's formula): ``0.5 data + 0.3 idle GPU + 0.2 cost`` with
  a *binary* data score (100 where all inputs are already in the region, else 0) and no
  move-vs-wait filter (``LocalityScore``).

Pure: functions of ``(run, cluster)`` views only.
"""

from __future__ import annotations

import dataclasses

from taugrid.scheduling import cycle, plugins
from taugrid.scheduling import snapshot as snap

__all__ = [
    "BASELINES",
    "FIXED_BPS",
    "SKY_RUNTIME_S",
    "LocalityScore",
    "OrderScore",
    "SkyCostScore",
    "first_to_admit",
    "make_policy",
    "sky_cost",
    "static_weights",
]

FIXED_BPS = 10e9 / 8
"""SkyPilot's egress-time model: every transfer at 10 Gbit/s."""
SKY_RUNTIME_S = 3600.0
"""SkyPilot's optimizer assumes one hour when a task gives no runtime estimate."""

BASELINES = ("first-to-admit", "cheapest", "static-weights")


def _filters() -> tuple[plugins.FilterPlugin, ...]:
    return (plugins.ReadyFilter(), plugins.RegionFilter(), plugins.FitFilter())


@dataclasses.dataclass(frozen=True)
class OrderScore:
    """Earlier clusters in ``order`` score higher (100 for the first); unlisted score 0."""

    order: tuple[str, ...]
    name: str = "order"

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        if cluster.cluster_id not in self.order:
            return 0.0
        return 100.0 * (1.0 - self.order.index(cluster.cluster_id) / len(self.order))


def sky_cost(run: snap.PendingRun, cluster: snap.ClusterView) -> float:
    """Dollars SkyPilot's optimizer would estimate for ``run`` on ``cluster``.

    Each dataset not in the region comes from its cheapest-egress replica; its transfer
    time at ``FIXED_BPS`` is billed as GPU time on top of ``SKY_RUNTIME_S``.
    """
    moved, egress = 0.0, 0.0
    for need in run.datasets:
        if cluster.region in need.regions or not need.regions:
            continue
        per_gb = min(
            (link.egress_cost_per_gb if link else 0.0)
            for link in (cluster.link_from(src) for src in need.regions)
        )
        moved += need.size_bytes
        egress += need.size_bytes / 1e9 * per_gb
    hours = (SKY_RUNTIME_S + moved / FIXED_BPS) / 3600
    return run.total_gpus * cluster.price(run) * hours + egress


@dataclasses.dataclass(frozen=True)
class SkyCostScore:
    """``100 * ref / (ref + estimated dollars)``: the cheapest cluster scores highest."""

    name: str = "sky_cost"
    ref_dollars: float = 10.0

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        return 100.0 * self.ref_dollars / (self.ref_dollars + sky_cost(run, cluster))


@dataclasses.dataclass(frozen=True)
class LocalityScore:
    """The seed's data affinity: 100 where every input already has a replica, else 0."""

    name: str = "data"

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        return 100.0 if all(cluster.region in n.regions for n in run.datasets) else 0.0


def first_to_admit(order: tuple[str, ...]) -> cycle.Policy:
    """MultiKueue-like: the first cluster of ``order`` that fits now."""
    return cycle.Policy(_filters(), (OrderScore(order),), {"order": 1.0})


def cheapest() -> cycle.Policy:
    """SkyPilot-like: the cluster with the lowest estimated cost that fits now."""
    return cycle.Policy(_filters(), (SkyCostScore(),), {"sky_cost": 1.0})


def static_weights() -> cycle.Policy:
    """The seed's ``0.5 data + 0.3 idle GPU + 0.2 cost`` with binary data locality."""
    return cycle.Policy(
        _filters(),
        (LocalityScore(), plugins.IdleGpuScore(), plugins.CostScore()),
        {"data": 0.5, "idle_gpu": 0.3, "cost": 0.2},
    )


def make_policy(name: str, order: tuple[str, ...] = ()) -> cycle.Policy:
    """A baseline by name, or ``"TauGrid"`` for ``cycle.default_policy()``.

    ``order``: the cluster order of ``first-to-admit``.
    """
    if name == "first-to-admit":
        return first_to_admit(order)
    if name == "cheapest":
        return cheapest()
    if name == "static-weights":
        return static_weights()
    if name == "TauGrid":
        return cycle.default_policy()
    known = ", ".join((*BASELINES, "TauGrid"))
    raise ValueError(f"unknown multi-region policy {name!r}; choose one of: {known}")

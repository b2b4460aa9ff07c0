"""Placement plugins: small filters and scorers over (run, cluster), kube-scheduler style.

Extension points (each a ``Protocol``):
- ``FilterPlugin.filter(run, cluster) -> Status``: ``Code.SUCCESS`` keeps the cluster;
  ``UNSCHEDULABLE`` drops it for now (may fit later); ``UNSCHEDULABLE_AND_UNRESOLVABLE``
  drops it for good (e.g. region not allowed). ``Status.reason`` is shown to users.
- ``ScorePlugin.score(run, cluster) -> float`` in [0, 100]; scores are clamped, then
  weighted by ``Policy.weights`` (normalised to sum to 1).

Built-ins here: cluster readiness, region allow-list, compliance domains, GPU shares
(a worker asking a share of one GPU only where GPUs are not handed out whole), capacity
(a spot run only where a spot pool is within its price), relocation
(a moved run never back to a cluster it left, and only where its asked-for CPUs are
free), fit (every
worker fits on one usable node of the requested model), free-capacity score (free GPUs
x speed), cost score (spot priced after its expected reclaims), and
the interconnect score of ``sync`` runs.

A run is always placed whole on one cluster (no plugin splits it), so a ``sync`` run
never spans clusters or regions; ``async``/``none`` runs carry no interconnect term and
so may go to slower-linked, cheaper or more distant capacity.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Protocol

from taugrid.scheduling import snapshot as snap

__all__ = [
    "CapacityFilter",
    "Code",
    "ComplianceFilter",
    "CostScore",
    "FilterPlugin",
    "FitFilter",
    "GpuShareFilter",
    "IdleGpuScore",
    "InterconnectScore",
    "ReadyFilter",
    "RegionFilter",
    "RelocationFilter",
    "ScorePlugin",
    "Status",
    "fits",
]


class Code(enum.Enum):
    """Result codes of a filter (kube-scheduler framework codes)."""

    SUCCESS = "success"
    UNSCHEDULABLE = "unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "unresolvable"


@dataclasses.dataclass(frozen=True)
class Status:
    """A filter verdict with a human reason."""

    code: Code
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS


OK = Status(Code.SUCCESS)


class FilterPlugin(Protocol):
    @property
    def name(self) -> str: ...

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status: ...


class ScorePlugin(Protocol):
    @property
    def name(self) -> str: ...

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float: ...


def fits(run: snap.PendingRun, cluster: snap.ClusterView, *, use_free: bool = True) -> bool:
    """Whether ``run.workers`` identical workers fit on the cluster's usable nodes.

    ``use_free=False``: on total GPU capacity (could it ever fit). Counted from the
    view's memoised slot counts (``ClusterView.slots``).
    """
    return cluster.slots(run.shape, use_free=use_free) >= run.workers


@dataclasses.dataclass(frozen=True)
class ReadyFilter:
    name: str = "ready"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        if cluster.ready:
            return OK
        return Status(Code.UNSCHEDULABLE, "cluster lost contact (Unknown); nothing new goes there")


@dataclasses.dataclass(frozen=True)
class RegionFilter:
    name: str = "region"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        if not run.allowed_regions or cluster.region in run.allowed_regions:
            return OK
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"region {cluster.region} not in allowed_regions {list(run.allowed_regions)}",
        )


@dataclasses.dataclass(frozen=True)
class ComplianceFilter:
    """Only regions that meet every compliance domain the run requires (e.g. gdpr)."""

    name: str = "compliance"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        lacking = [d for d in run.compliance if d not in cluster.compliance]
        if not lacking:
            return OK
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"region {cluster.region} does not meet compliance {lacking} "
            f"(it meets {list(cluster.compliance)})",
        )


@dataclasses.dataclass(frozen=True)
class GpuShareFilter:
    """A worker asking a share of one GPU goes only where GPUs can be shared (Ray)."""

    name: str = "gpu-share"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        if not (0 < run.gpus_per_worker < 1 and cluster.whole_gpus):
            return OK
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            f"cluster {cluster.cluster_id} hands out whole GPUs only (Kubernetes); "
            f"a worker asking {run.gpus_per_worker:g} GPU runs in Ray clusters",
        )


@dataclasses.dataclass(frozen=True)
class RelocationFilter:
    """A run the hub moved never goes back to a cluster it left, and goes only where
    the free CPUs it asked for (beyond its workers') are there now."""

    name: str = "relocation"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        moved = run.relocation
        if moved is None:
            return OK
        if cluster.cluster_id in moved.away_from:
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"cluster {cluster.cluster_id} could not meet the run's goal (it asked to move)",
            )
        need = moved.cpus + run.workers * run.cpus_per_worker
        free = sum(n.cpus_free for n in cluster.nodes if n.usable)
        if free >= need:
            return OK
        return Status(
            Code.UNSCHEDULABLE,
            f"the run was moved to get {need:g} free CPUs; {free:g} are free here",
        )


@dataclasses.dataclass(frozen=True)
class FitFilter:
    name: str = "fit"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        if fits(run, cluster):
            return OK
        total, free = cluster.gpus(run.gpu_model if run.gpus_per_worker else None)
        what = f"{run.workers}x{run.gpus_per_worker} GPU ({run.gpu_model or 'any model'})"
        if total < run.total_gpus or not fits(run, cluster, use_free=False):
            never = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            return Status(never, f"{what} never fits: {total:g} usable GPUs")
        return Status(Code.UNSCHEDULABLE, f"{what} does not fit now: {free:g}/{total:g} free")


@dataclasses.dataclass(frozen=True)
class IdleGpuScore:
    """Free work capacity, speed-aware: ``100 * W / (W + N)``, ``W`` = free GPUs (of the
    run's model) x the cluster's GPU speed, ``N`` = the GPUs the run asks (at least 1).

    Half score when the free capacity, in reference GPUs, just equals the request: four
    free GPUs at 2x outscore eight at 0.4x, and a big empty pool outscores a small one.
    """

    name: str = "idle_gpu"

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        _, free = cluster.gpus(run.gpu_model)
        work = max(0.0, free) * cluster.gpu_speed
        return 100.0 * work / (work + max(1, run.total_gpus))


@dataclasses.dataclass(frozen=True)
class CostScore:
    """Cheaper work scores higher: $/GPU-hour over the GPUs' speed (a GPU at 0.4 of the
    reference does 0.4 of its work per hour, so $0.7/h there costs $1.75 per reference
    GPU-hour); ``max_cost`` maps to 0."""

    name: str = "cost"
    max_cost: float = 10.0

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        per_work = cluster.price(run) / cluster.gpu_speed
        return max(0.0, 100.0 * (1.0 - per_work / self.max_cost))


@dataclasses.dataclass(frozen=True)
class CapacityFilter:
    """A spot run goes only to clusters with a spot pool at most its ``max_price``
    (its workers then take spot nodes only, an on-demand run's on-demand nodes only:
    ``snapshot.node_slots``)."""

    name: str = "capacity"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        if run.capacity != snap.SPOT:
            return OK
        price = cluster.spot_cost_per_gpu_hour
        if price is None:
            never = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            return Status(never, f"cluster {cluster.cluster_id} has no spot pool")
        if run.max_price is not None and price > run.max_price:
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"spot costs ${price:g}/GPU-hour here, above max_price ${run.max_price:g}",
            )
        return OK


@dataclasses.dataclass(frozen=True)
class InterconnectScore:
    """``sync`` runs of several workers prefer the fastest node-to-node interconnect:
    ``100 * gbps / (gbps + ref_gbps)`` (half score at ``ref_gbps``, 0 when undeclared).
    Every other run scores 100 everywhere, so the term never reorders clusters for it."""

    name: str = "interconnect"
    ref_gbps: float = 100.0

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        if run.communication != "sync" or run.workers < 2:
            return 100.0
        gbps = max(0.0, cluster.interconnect_gbps)
        return 100.0 * gbps / (gbps + self.ref_gbps)

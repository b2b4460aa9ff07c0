"""Placement plugins: small filters and scorers over (run, cluster), kube-scheduler style.

Extension points (each a ``Protocol``):
- ``FilterPlugin.filter(run, cluster) -> Status``: ``Code.SUCCESS`` keeps the cluster;
  ``UNSCHEDULABLE`` drops it for now (may fit later); ``UNSCHEDULABLE_AND_UNRESOLVABLE``
  drops it for good (e.g. region not allowed). ``Status.reason`` is shown to users.
- ``ScorePlugin.score(run, cluster) -> float`` in [0, 100]; scores are clamped, then
  weighted by ``Policy.weights`` (normalised to sum to 1).

Built-ins here: cluster readiness, region allow-list, fit (every worker fits on one
usable node of the requested model), idle-GPU score, cost score.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Protocol

from taugrid.scheduling import snapshot as snap

__all__ = [
    "Code",
    "CostScore",
    "FilterPlugin",
    "FitFilter",
    "IdleGpuScore",
    "ReadyFilter",
    "RegionFilter",
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


def fits(run: snap.PendingRun, nodes: tuple[snap.NodeView, ...], *, use_free: bool = True) -> bool:
    """First-fit of ``run.workers`` workers onto usable nodes (free or total capacity)."""
    room = [
        [n.gpus_free if use_free else n.gpus_total, n.cpus_free, n.memory_free]
        for n in nodes
        if n.usable
        and (run.gpu_model is None or run.gpus_per_worker == 0 or n.gpu_model == run.gpu_model)
    ]
    for _ in range(run.workers):
        slot = next(
            (
                r
                for r in room
                if r[0] >= run.gpus_per_worker
                and r[1] >= run.cpus_per_worker
                and r[2] >= run.memory_per_worker
            ),
            None,
        )
        if slot is None:
            return False
        slot[0] -= run.gpus_per_worker
        slot[1] -= run.cpus_per_worker
        slot[2] -= run.memory_per_worker
    return True


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
class FitFilter:
    name: str = "fit"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> Status:
        if fits(run, cluster.nodes):
            return OK
        total, free = cluster.gpus(run.gpu_model)
        what = f"{run.workers}x{run.gpus_per_worker} GPU ({run.gpu_model or 'any model'})"
        if not fits(run, cluster.nodes, use_free=False):
            return Status(Code.UNSCHEDULABLE, f"{what} never fits: {total:g} usable GPUs")
        return Status(Code.UNSCHEDULABLE, f"{what} does not fit now: {free:g}/{total:g} free")


@dataclasses.dataclass(frozen=True)
class IdleGpuScore:
    name: str = "idle_gpu"

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        total, free = cluster.gpus(run.gpu_model)
        return 100.0 * free / total if total else 0.0


@dataclasses.dataclass(frozen=True)
class CostScore:
    """Cheaper clusters score higher; ``max_cost`` maps to 0."""

    name: str = "cost"
    max_cost: float = 10.0

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        return max(0.0, 100.0 * (1.0 - cluster.cost_per_gpu_hour / self.max_cost))

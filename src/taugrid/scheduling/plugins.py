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


def _slots(have: tuple[float, float, float], need: tuple[float, float, float]) -> float:
    """How many identical workers of ``need`` fit into ``have`` (gpus, cpus, memory)."""
    counts = [h // n for h, n in zip(have, need, strict=True) if n > 0]
    if any(h < 0 for h, n in zip(have, need, strict=True) if n == 0):
        return 0
    return min(counts) if counts else float("inf")


def fits(run: snap.PendingRun, nodes: tuple[snap.NodeView, ...], *, use_free: bool = True) -> bool:
    """Whether ``run.workers`` identical workers fit on usable nodes (free or total capacity).

    Workers are identical, so first-fit places exactly as many as the sum of what each
    node holds on its own; counting per node avoids building per-node state.
    """
    need = (float(run.gpus_per_worker), run.cpus_per_worker, run.memory_per_worker)
    model = run.gpu_model if run.gpus_per_worker else None
    left: float = run.workers
    for n in nodes:
        if not (n.healthy and n.alive) or (model is not None and n.gpu_model != model):
            continue
        have = (n.gpus_free if use_free else n.gpus_total, n.cpus_free, n.memory_free)
        if have[0] < need[0] or have[1] < need[1] or have[2] < need[2]:
            continue  # the common case, decided without division
        left -= 1 if left == 1 else _slots(have, need)
        if left <= 0:
            return True
    return False


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
        total, free = cluster.gpus(run.gpu_model if run.gpus_per_worker else None)
        # Cheap bound first: too few free GPUs in the whole cluster means no fit.
        if free >= run.total_gpus and fits(run, cluster.nodes):
            return OK
        what = f"{run.workers}x{run.gpus_per_worker} GPU ({run.gpu_model or 'any model'})"
        if total < run.total_gpus or not fits(run, cluster.nodes, use_free=False):
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

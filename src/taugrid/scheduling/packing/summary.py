"""Fast region/cluster-level plugins for ``cycle.schedule``: per-cluster summaries, memoised.

``plugins.FitFilter`` and ``plugins.IdleGpuScore`` walk every node of every cluster for
every run; with 100 clusters x 100 nodes that is ~20 ms per decision. These drop-in
plugins answer from a summary of the cluster computed once per ``ClusterView`` object
(views are immutable; ``cycle.reserve`` makes a new one when it places a run, so a
summary can never go stale):

- ``SummaryFitFilter`` (name ``fit``): a run fits iff ``sum over usable nodes of the
  model of min(gpus_free // g, cpus_free // c, memory_free // m) >= workers`` — for
  identical workers this is exactly what ``plugins.fits`` (first fit) decides.
- ``SummaryIdleGpuScore`` (name ``idle_gpu``): same score as ``plugins.IdleGpuScore``.

``fast_policy()`` is ``cycle.default_policy()`` with these two swapped in and the scorers
that weigh 0 left out (they change no total, only what explain-placement shows); the
chosen clusters are identical (tests check it), only faster. The memo is keyed by object
identity, holds a reference to the view it describes and is bounded.
"""

from __future__ import annotations

import dataclasses
import math

from taugrid.scheduling import cycle, plugins
from taugrid.scheduling import snapshot as snap

__all__ = ["SummaryFitFilter", "SummaryIdleGpuScore", "fast_policy"]

_MAX_MEMO = 8192
_Shape = tuple[str | None, int, float, float]


@dataclasses.dataclass
class _Summary:
    view: snap.ClusterView
    gpus: dict[str | None, tuple[float, float]]
    slots: dict[tuple[object, ...], int]


_memo: dict[int, _Summary] = {}


def _summary(cluster: snap.ClusterView) -> _Summary:
    entry = _memo.get(id(cluster))
    if entry is None or entry.view is not cluster:
        if len(_memo) >= _MAX_MEMO:
            _memo.clear()
        entry = _Summary(cluster, {}, {})
        _memo[id(cluster)] = entry
    return entry


def _gpus(cluster: snap.ClusterView, model: str | None) -> tuple[float, float]:
    entry = _summary(cluster)
    if model not in entry.gpus:
        entry.gpus[model] = cluster.gpus(model)
    return entry.gpus[model]


def _per_node(free: float, need: float) -> float:
    return math.inf if need <= 0 else math.floor(free / need)


def slots(run: snap.PendingRun, cluster: snap.ClusterView, *, use_free: bool = True) -> float:
    """How many workers of ``run`` fit on the cluster's usable nodes (first-fit count)."""
    shape: _Shape = (run.gpu_model, run.gpus_per_worker, run.cpus_per_worker, run.memory_per_worker)
    entry = _summary(cluster)
    key: tuple[object, ...] = shape if use_free else (*shape, "capacity")
    if key not in entry.slots:
        total = 0.0
        for n in cluster.nodes:
            if not n.usable or (
                run.gpu_model is not None and run.gpus_per_worker and n.gpu_model != run.gpu_model
            ):
                continue
            gpu = n.gpus_free if use_free else n.gpus_total
            total += min(
                _per_node(gpu, run.gpus_per_worker),
                _per_node(n.cpus_free, run.cpus_per_worker),
                _per_node(n.memory_free, run.memory_per_worker),
            )
        entry.slots[key] = int(min(total, 1 << 30))
    return entry.slots[key]


@dataclasses.dataclass(frozen=True)
class SummaryFitFilter:
    name: str = "fit"

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> plugins.Status:
        if slots(run, cluster) >= run.workers:
            return plugins.OK
        total, free = _gpus(cluster, run.gpu_model)
        what = f"{run.workers}x{run.gpus_per_worker} GPU ({run.gpu_model or 'any model'})"
        if slots(run, cluster, use_free=False) < run.workers:
            return plugins.Status(
                plugins.Code.UNSCHEDULABLE, f"{what} never fits: {total:g} usable GPUs"
            )
        return plugins.Status(
            plugins.Code.UNSCHEDULABLE, f"{what} does not fit now: {free:g}/{total:g} free"
        )


@dataclasses.dataclass(frozen=True)
class SummaryIdleGpuScore:
    name: str = "idle_gpu"

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        total, free = _gpus(cluster, run.gpu_model)
        return 100.0 * free / total if total else 0.0


def fast_policy() -> cycle.Policy:
    """``cycle.default_policy()`` with memoised fit/idle-GPU plugins; unweighted scorers out."""
    base = cycle.default_policy()
    filters: list[plugins.FilterPlugin] = [
        SummaryFitFilter() if f.name == "fit" else f for f in base.filters
    ]
    used = {n for w in (base.weights, *base.presets.values(), *base.modes.values()) for n in w}
    scorers: list[plugins.ScorePlugin] = [
        SummaryIdleGpuScore() if s.name == "idle_gpu" else s for s in base.scorers if s.name in used
    ]
    return dataclasses.replace(base, filters=tuple(filters), scorers=tuple(scorers))

"""Sizing a pipeline from measured stage rates (pure: no I/O, no clock, no Ray).

Vocabulary:
- A stage's **cost model** is ``seconds per batch = fixed_s + per_item_s * batch``,
  fitted from timed batches (``fit``). Its **rate per replica** at batch size ``b`` is
  ``b / (fixed_s + per_item_s * b)`` items/s.
- **Selectivity** is items out / items in of a stage (a filter keeps < 1); the demand on
  stage ``k`` is the target times the selectivity of every stage before it.
- A stage's **capacity** is ``replicas * rate / pass_ratio``: the input rate (items/s
  entering the pipeline) it can keep up with. The **bottleneck** is the stage of least
  capacity; the expected throughput is that capacity (at least the target when
  the target is reachable: replica counts round up).

``recommend`` picks, per stage, the smallest batch size within its bounds that reaches
95% of the best rate in the bounds (bigger batches only add latency and memory past
that), then the fewest replicas within bounds whose capacity covers the target. When a
stage at its most replicas still falls short, the target is unreachable and
``Recommendation.limit`` says which stage limits it and by how much.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from taugrid.spec import units

__all__ = [
    "CostModel",
    "Limit",
    "Recommendation",
    "StageChoice",
    "StageProfile",
    "fit",
    "recommend",
]

_GOOD_ENOUGH = 0.95
_SLACK = 1e-3
"""Relative shortfall still counted as meeting a demand (keeps estimates that converge
on a whole number of replicas from rounding up)."""


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Seconds one replica spends on a batch: ``fixed_s + per_item_s * batch``."""

    fixed_s: float
    per_item_s: float

    def seconds(self, batch: int) -> float:
        """Seconds per batch of ``batch`` items (never below a microsecond)."""
        return max(self.fixed_s + self.per_item_s * batch, 1e-6)

    def rate(self, batch: int) -> float:
        """Items per second of one replica at batch size ``batch``."""
        return batch / self.seconds(batch)


def fit(samples: Sequence[tuple[int, float]]) -> CostModel:
    """Least-squares ``CostModel`` of ``(batch size, seconds)`` samples (clamped ≥ 0).

    One batch size only: everything is per-item cost (no fixed part can be told apart).
    """
    if not samples:
        raise ValueError("fit needs at least one timed batch")
    xs = [float(b) for b, _ in samples]
    ys = [s for _, s in samples]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    if var == 0:
        return CostModel(0.0, max(mean_y / mean_x, 0.0))
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var
    slope = max(slope, 0.0)
    fixed = max(mean_y - slope * mean_x, 0.0)
    if slope == 0.0 and fixed == 0.0:
        slope = 1e-6
    return CostModel(fixed, slope)


@dataclasses.dataclass(frozen=True)
class StageProfile:
    """What sizing knows of one stage: bounds, resources, cost and selectivity."""

    name: str
    cost: CostModel
    selectivity: float = 1.0
    batch_min: int = 1
    batch_max: int = 64
    replicas_min: int = 1
    replicas_max: int = 8
    gpus: float = 0.0
    cpus: float = 1.0

    def best_batch(self) -> int:
        """Smallest batch size in bounds within 95% of the best rate in bounds."""
        best = max(self.cost.rate(b) for b in (self.batch_min, self.batch_max))
        low, high = self.batch_min, self.batch_max
        while low < high:  # rate grows with the batch size: bisect for the knee
            mid = (low + high) // 2
            if self.cost.rate(mid) >= _GOOD_ENOUGH * best:
                high = mid
            else:
                low = mid + 1
        return low


@dataclasses.dataclass(frozen=True)
class StageChoice:
    """The configuration chosen for one stage and what it gives."""

    name: str
    replicas: int
    batch_size: int
    rate_per_replica: float
    demand: float
    capacity: float
    gpus: float
    cpus: float


@dataclasses.dataclass(frozen=True)
class Limit:
    """Why a target is unreachable: the stage at its most replicas and its ceiling."""

    stage: str
    max_replicas: int
    ceiling: float
    target: float
    gpu_budget: float | None = None  # set when the run's GPUs, not the stage's bounds, cap it
    cpu_budget: float | None = None  # set when the cluster's CPUs cap it

    @property
    def shortfall(self) -> float:
        """Fraction of the target the ceiling misses (0.4: 40% short)."""
        return 1.0 - self.ceiling / self.target

    def describe(self) -> str:
        """One line for people."""
        where = f"at its most replicas ({self.max_replicas})"
        for whose, budget, unit in (
            ("the cluster's", self.cpu_budget, "CPUs"),
            ("the run's", self.gpu_budget, "GPUs"),
        ):
            if budget is not None:
                replicas = units.plural(self.max_replicas, "replica")
                where = f"with {replicas}, all {whose} {budget:g} {unit} allow"
                break
        return (
            f"stage {self.stage} limits the pipeline to {self.ceiling:.1f} items/s {where}: "
            f"{self.shortfall:.0%} short of the target {self.target:g} items/s"
        )


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """A configuration for every stage, its bottleneck and expected throughput."""

    target: float
    stages: tuple[StageChoice, ...]
    bottleneck: str
    expected_throughput: float
    limit: Limit | None

    @property
    def reachable(self) -> bool:
        """True when every stage can keep up with the target within its bounds."""
        return self.limit is None

    @property
    def gpus(self) -> float:
        """GPUs the whole configuration takes."""
        return sum(s.replicas * s.gpus for s in self.stages)

    @property
    def cpus(self) -> float:
        """CPUs the whole configuration takes."""
        return sum(s.replicas * s.cpus for s in self.stages)


def _choose(profile: StageProfile, demand: float, pass_ratio: float) -> StageChoice:
    batch = profile.best_batch()
    rate = profile.cost.rate(batch)
    wanted = math.ceil(demand / rate - _SLACK) if demand > 0 else profile.replicas_min
    replicas = min(max(wanted, profile.replicas_min), profile.replicas_max)
    capacity = replicas * rate / pass_ratio if pass_ratio > 0 else math.inf
    return StageChoice(
        profile.name, replicas, batch, rate, demand, capacity, profile.gpus, profile.cpus
    )


def recommend(
    profiles: Sequence[StageProfile],
    target: float,
    gpu_budget: float | None = None,
    cpu_budget: float | None = None,
) -> Recommendation:
    """Replicas and batch size per stage for ``target`` items/s (module docstring).

    ``gpu_budget``: the GPUs the run holds; ``cpu_budget``: the CPUs its cluster can give
    the stage pools. A configuration that needs more gives up replicas (of stages using
    that resource) one at a time, each time the one that lowers the bottleneck least.
    """
    rec = _unbounded(profiles, target)
    for budget, per_replica, kind in (
        (gpu_budget, _gpus, "gpus"),
        (cpu_budget, _cpus, "cpus"),
    ):
        if budget is not None:
            rec = _within(rec, profiles, budget, per_replica, kind)
    return rec


def _one_fewer(c: StageChoice) -> StageChoice:
    per = c.capacity / c.replicas
    return dataclasses.replace(c, replicas=c.replicas - 1, capacity=per * (c.replicas - 1))


def _after_giving_back(stages: Sequence[StageChoice], k: int) -> tuple[float, float]:
    """(the pipeline's bottleneck, stage ``k``'s capacity) once ``k`` gives a replica
    back: the replica to give back is the one that costs the pipeline least."""
    smaller = _one_fewer(stages[k]).capacity
    others = [c.capacity for i, c in enumerate(stages) if i != k]
    return min([smaller, *others]), smaller


def _gpus(c: StageChoice) -> float:
    return c.gpus


def _cpus(c: StageChoice) -> float:
    return c.cpus


def _within(
    rec: Recommendation,
    profiles: Sequence[StageProfile],
    budget: float,
    per_replica: Callable[[StageChoice], float],
    kind: str,
) -> Recommendation:
    """``rec`` with replicas given back until it takes at most ``budget`` of the resource
    ``per_replica`` counts (unchanged when it already fits)."""
    if sum(c.replicas * per_replica(c) for c in rec.stages) <= budget + 1e-9:
        return rec
    mins = {p.name: p.replicas_min for p in profiles}
    stages = list(rec.stages)
    while sum(c.replicas * per_replica(c) for c in stages) > budget + 1e-9:
        shrinkable = [
            i for i, c in enumerate(stages) if per_replica(c) > 0 and c.replicas > mins[c.name]
        ]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda k: _after_giving_back(stages, k))
        stages[i] = _one_fewer(stages[i])
    neck = min(stages, key=lambda c: c.capacity)
    limit = rec.limit
    if neck.capacity < rec.target * (1 - _SLACK) and (
        limit is None or neck.capacity < limit.ceiling
    ):
        budgets = {"gpu_budget": budget} if kind == "gpus" else {"cpu_budget": budget}
        limit = Limit(neck.name, neck.replicas, neck.capacity, rec.target, **budgets)
    return Recommendation(rec.target, tuple(stages), neck.name, neck.capacity, limit)


def _unbounded(profiles: Sequence[StageProfile], target: float) -> Recommendation:
    if not profiles:
        raise ValueError("a pipeline has at least one stage")
    choices: list[StageChoice] = []
    limit: Limit | None = None
    pass_ratio = 1.0
    for profile in profiles:
        choice = _choose(profile, target * pass_ratio, pass_ratio)
        choices.append(choice)
        if choice.capacity < target * (1 - _SLACK):
            ceiling = profile.replicas_max * choice.rate_per_replica / pass_ratio
            if limit is None or ceiling < limit.ceiling:
                limit = Limit(profile.name, profile.replicas_max, ceiling, target)
        pass_ratio *= profile.selectivity
    neck = min(choices, key=lambda c: c.capacity)
    return Recommendation(target, tuple(choices), neck.name, neck.capacity, limit)

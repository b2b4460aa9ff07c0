"""Queue-order policies: which waiting or running jobs hold the GPUs next.

A policy ranks the *active* jobs (waiting or running) of one GPU pool; lower rank
goes first, ties break on submission time then job index. ``select`` then walks the
jobs in that order and gives each one its GPUs if they are free (later, smaller jobs
may still go when an earlier one does not fit — BestEffortFIFO, as ``cycle.py`` admits).
A *preemptive* policy ranks running jobs with waiting ones and a running job that
loses its place is suspended (it keeps its progress); a non-preemptive one only
orders the waiting jobs for the GPUs left free.

Policies (``make_policy`` names):
- ``FIFO``: submission order.
- ``SJF``: shortest job first by the true duration — an *oracle*, non-preemptive.
- ``SRTF``: shortest remaining time first — an *oracle*, preemptive.
- ``2D-LAS``: Tiresias-style discretised two-dimensional least attained service: the
  queue of a job is set by its attained GPU-seconds (GPUs x seconds run) against
  ``thresholds``; FIFO inside a queue; preemptive; no oracle.
- ``TauGrid``: no oracle; learns from history. ``DurationHistory`` keeps the durations of
  the last 100 finished jobs per group (virtual cluster, GPU count) and estimates a
  job's remaining time from the jobs of its group that ran at least as long as it has:
  ``quantile_q(D | D > attained) - attained`` (falling back to the recent jobs of the
  same GPU count, then of all jobs, then to the attained time itself — "as long
  again", which demotes a job that outlives its estimate like LAS). Rank =
  GPUs^1.35 x that estimate: GPU-time still to serve, smallest first, big jobs a little
  further back (they hold many GPUs at once). The exponent and the quantile are
  ``TauGridKnobs``: the defaults were tuned on the whole Philly trace; its benchmark
  also chooses them on the trace's first half alone and judges them on the second.
  A low quantile (q = 0.15) is optimistic — a job is ranked by how soon it *could*
  finish — which keeps short jobs fast like LAS while ranking jobs of groups that
  lately ran long behind fresh jobs of short-running groups. Preemption guard: a job
  that (re)started less than ``min_run_s`` (default 1 h) ago ranks first, so it
  keeps its GPUs: ranks move at every arrival and, unguarded, TauGrid suspended
  Philly jobs ~10 times each (787k preemptions for 82k jobs), each one a restart
  and lost work on a real cluster.

Pure: arrays in, arrays out; no clock (``now`` is an argument), no randomness.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Hashable
from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "MIN_RUN_S",
    "QUEUE_POLICIES",
    "ActiveJobs",
    "DurationHistory",
    "Fifo",
    "LeastAttained2D",
    "QueuePolicy",
    "ShortestJobFirst",
    "ShortestRemainingFirst",
    "TauGridKnobs",
    "TauGridQueue",
    "group_index",
    "make_policy",
    "order",
    "select",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
QUEUE_POLICIES = ("FIFO", "SJF", "SRTF", "2D-LAS", "TauGrid")


@dataclasses.dataclass(frozen=True)
class ActiveJobs:
    """The active jobs at one instant, as parallel arrays.

    ``executed``: seconds run so far; ``duration``: true run time (NaN when unknown —
    only oracle policies read it); ``group``: index into ``groups`` of the history;
    ``family``: index into its ``families`` (wider groups the estimate falls back to).
    ``since``: seconds each running job has run since it last (re)started (None: not
    tracked; a preemption guard then protects nobody).
    """

    index: IntArray
    submit: FloatArray
    gpus: IntArray
    executed: FloatArray
    duration: FloatArray
    group: IntArray
    running: BoolArray
    family: IntArray
    since: FloatArray | None = None

    def guarded(self, min_run_s: float) -> BoolArray:
        """Running jobs that (re)started less than ``min_run_s`` ago: not to be preempted."""
        if self.since is None or min_run_s <= 0:
            return np.zeros(len(self.index), dtype=bool)
        return np.asarray(self.running & (self.since < min_run_s), dtype=bool)

    @property
    def attained(self) -> FloatArray:
        """GPU-seconds of service received."""
        return self.gpus * self.executed


class QueuePolicy(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def preemptive(self) -> bool: ...

    def rank(self, jobs: ActiveJobs, now: float) -> FloatArray: ...


@dataclasses.dataclass(frozen=True)
class Fifo:
    name: str = "FIFO"
    preemptive: bool = False

    def rank(self, jobs: ActiveJobs, now: float) -> FloatArray:
        return jobs.submit.copy()


@dataclasses.dataclass(frozen=True)
class ShortestJobFirst:
    name: str = "SJF"
    preemptive: bool = False

    def rank(self, jobs: ActiveJobs, now: float) -> FloatArray:
        return jobs.duration.copy()


@dataclasses.dataclass(frozen=True)
class ShortestRemainingFirst:
    name: str = "SRTF"
    preemptive: bool = True

    def rank(self, jobs: ActiveJobs, now: float) -> FloatArray:
        return np.asarray(jobs.duration - jobs.executed, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class LeastAttained2D:
    """Discretised 2D-LAS; ``thresholds`` in GPU-seconds, ascending."""

    thresholds: tuple[float, ...] = (3_600.0, 36_000.0)
    name: str = "2D-LAS"
    preemptive: bool = True

    def rank(self, jobs: ActiveJobs, now: float) -> FloatArray:
        queue = np.searchsorted(np.array(self.thresholds), jobs.attained, side="right")
        # queue first; FIFO inside a queue (submission times are < 1e12 s)
        return np.asarray(queue * 1e12 + jobs.submit, dtype=np.float64)

    def next_change(self, jobs: ActiveJobs) -> float:
        """Seconds until the first running job crosses a threshold (inf if none)."""
        if not jobs.running.any():
            return float("inf")
        attained = jobs.attained[jobs.running]
        gpus = jobs.gpus[jobs.running]
        bounds = np.array((*self.thresholds, float("inf")))
        nxt = bounds[np.searchsorted(bounds[:-1], attained, side="right")]
        return float(((nxt - attained) / gpus).min())


class DurationHistory:
    """Durations of recently finished jobs per group, and conditional quantiles of them.

    Rows: one per group, one per family (a wider group: the estimate falls back to it),
    one for all jobs. Each row keeps the last ``window`` durations recorded into it
    (None: all of them) — recent jobs of a group predict its next ones far better than
    its whole past does. ``table[row, b]`` is the ``quantile`` of ``D | D > edges[b]``
    over that row (NaN without ``min_samples`` such jobs); rows changed since the last
    rebuild are rebuilt after every ``refresh`` records.
    """

    def __init__(
        self,
        groups: int,
        families: int = 0,
        *,
        quantile: float = 0.15,
        min_samples: int = 20,
        refresh: int = 1,
        window: int | None = 100,
    ) -> None:
        if not 0.0 <= quantile < 1.0:
            raise ValueError("quantile must be in [0, 1)")
        self.edges = np.concatenate([[0.0], np.geomspace(10.0, 1e7, 60)])
        self.quantile = quantile
        self.min_samples = min_samples
        self.refresh = refresh
        self.groups = groups
        self.window = window
        rows = groups + families + 1  # groups, then families, then all jobs
        self._by_group: list[list[float]] = [[] for _ in range(rows)]
        self._order: list[collections.deque[float]] = [collections.deque() for _ in range(rows)]
        self._dirty: set[int] = set()
        self._pending = 0
        self.table = np.full((rows, len(self.edges)), np.nan)

    def record(self, group: int, duration: float, family: int | None = None) -> None:
        rows = [group, len(self._by_group) - 1]
        if family is not None:
            rows.append(self.groups + family)
        for row in rows:
            bisect.insort(self._by_group[row], duration)
            self._order[row].append(duration)
            if self.window is not None and len(self._order[row]) > self.window:
                old = self._order[row].popleft()
                del self._by_group[row][bisect.bisect_left(self._by_group[row], old)]
            self._dirty.add(row)
        self._pending += 1
        if self._pending >= self.refresh:
            self.rebuild()

    def rebuild(self) -> None:
        self._pending = 0
        for g in self._dirty:
            durations = self._by_group[g]
            if len(durations) < self.min_samples:
                continue
            arr = np.asarray(durations)
            first = np.searchsorted(arr, self.edges, side="right")
            count = len(arr) - first
            mid = np.minimum(first + (count * self.quantile).astype(np.int64), len(arr) - 1)
            self.table[g] = np.where(count >= self.min_samples, arr[mid], np.nan)
        self._dirty.clear()

    def _lookup(self, group: IntArray, family: IntArray | None, b: IntArray) -> FloatArray:
        est = self.table[group, b]
        if family is not None:
            est = np.where(np.isnan(est), self.table[self.groups + family, b], est)
        return np.asarray(np.where(np.isnan(est), self.table[-1, b], est), dtype=np.float64)

    def remaining(
        self, group: IntArray, executed: FloatArray, family: IntArray | None = None
    ) -> FloatArray:
        """Estimated seconds left: own group, else family, else all jobs, else ``executed``.

        Conditioned on the bin edge at or below ``executed``; a job that has already run
        past that estimate is conditioned on the next edge up instead (``D > edge``
        above what it ran), never sent to the 'as long again' fallback for it.
        """
        b = np.searchsorted(self.edges, executed, side="right") - 1
        left = self._lookup(group, family, b) - executed
        fallback = np.maximum(executed, 60.0)
        return np.asarray(np.where(np.isnan(left) | (left <= 0), fallback, left), dtype=np.float64)


MIN_RUN_S = 3600.0
"""TauGrid's preemption guard: a job that (re)started less than this ago keeps its GPUs."""


@dataclasses.dataclass(frozen=True)
class TauGridKnobs:
    """TauGrid's two tuned numbers (the GPU exponent of the rank and the percentile) and
    its preemption guard (``min_run_s``; 0: none)."""

    gpu_power: float = 1.35
    quantile: float = 0.15
    min_run_s: float = MIN_RUN_S


@dataclasses.dataclass
class TauGridQueue:
    """Learned expected remaining GPU-time, smallest first (see module docstring)."""

    history: DurationHistory
    name: str = "TauGrid"
    preemptive: bool = True
    gpu_power: float = 1.35
    min_run_s: float = 0.0

    def rank(self, jobs: ActiveJobs, now: float) -> FloatArray:
        left = self.history.remaining(jobs.group, jobs.executed, jobs.family)
        rank = jobs.gpus.astype(np.float64) ** self.gpu_power * left
        return np.asarray(np.where(jobs.guarded(self.min_run_s), -np.inf, rank))


def make_policy(
    name: str, *, groups: int = 0, families: int = 0, knobs: TauGridKnobs = TauGridKnobs()
) -> QueuePolicy:
    """A policy by name; ``groups`` and ``families`` size TauGrid's history."""
    if name == "FIFO":
        return Fifo()
    if name == "SJF":
        return ShortestJobFirst()
    if name == "SRTF":
        return ShortestRemainingFirst()
    if name == "2D-LAS":
        return LeastAttained2D()
    if name == "TauGrid":
        history = DurationHistory(groups, families, quantile=knobs.quantile)
        return TauGridQueue(history, gpu_power=knobs.gpu_power, min_run_s=knobs.min_run_s)
    raise ValueError(f"unknown queue policy {name!r}; choose one of {', '.join(QUEUE_POLICIES)}")


def order(policy: QueuePolicy, jobs: ActiveJobs, now: float) -> IntArray:
    """Positions into ``jobs`` in service order (rank, then submission, then index)."""
    return np.lexsort((jobs.index, jobs.submit, policy.rank(jobs, now))).astype(np.int64)


def select(gpus_in_order: IntArray, capacity: int) -> BoolArray:
    """Greedy in order, skipping jobs that do not fit: which jobs get GPUs."""
    chosen = np.zeros(len(gpus_in_order), dtype=bool)
    prefix = np.cumsum(gpus_in_order)
    head = int(np.searchsorted(prefix, capacity, side="right"))
    chosen[:head] = True
    free = capacity - (int(prefix[head - 1]) if head else 0)
    i = head
    smallest = int(gpus_in_order[head:].min()) if head < len(gpus_in_order) else 0
    while free >= smallest > 0 and i < len(gpus_in_order):
        rest = gpus_in_order[i:]
        fits = np.flatnonzero(rest <= free)
        if len(fits) == 0:
            break
        j = i + int(fits[0])
        chosen[j] = True
        free -= int(gpus_in_order[j])
        i = j + 1
    return chosen


def group_index(keys: list[Hashable]) -> tuple[IntArray, int]:
    """Dense group ids for arbitrary keys (first-seen order) and the number of groups."""
    ids: dict[Hashable, int] = {}
    out = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
    return out, len(ids)

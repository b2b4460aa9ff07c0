"""Event-driven replay of the Microsoft Philly trace through ``scheduling.queueing``.

Model: one pool of ``capacity`` GPUs (whole GPUs, any job fits anywhere — no topology),
jobs arrive at their submission times and run for their trace duration once they hold
``gpus`` GPUs. Events: arrivals, completions and policy ticks (2D-LAS threshold
crossings; TauGrid re-ranks every ``tick`` seconds). At every event the queue policy
orders the active jobs and ``queueing.select`` hands out the GPUs. Nothing sleeps: the
clock jumps from event to event; the same input gives the same result.

Preemption (``RestartCost``, the same for every preemptive policy): a suspended job
rolls back to its last checkpoint (one every ``checkpoint_s`` of progress: the work
since is lost) and, when it runs again, first spends ``restart_s`` restarting (no
progress). ``RestartCost.free()`` (both 0) is the old model: it keeps its progress.

Metrics: job completion time (JCT = finish - submit), queueing delay (JCT - duration:
all time not running, including suspensions), GPU utilisation (GPU-seconds served /
capacity x span from first submission to last completion).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt

from taugrid.scheduling import queueing
from taugrid.sim import traces

__all__ = ["RESTART", "QueueResult", "RestartCost", "simulate", "size_cluster", "window"]


@dataclasses.dataclass(frozen=True)
class RestartCost:
    """What one preemption costs the preempted job (see the module docstring)."""

    restart_s: float = 60.0
    checkpoint_s: float = 600.0

    @classmethod
    def free(cls) -> RestartCost:
        return cls(0.0, 0.0)

    def kept(self, progress: float) -> float:
        """Progress left after rolling back to the last checkpoint."""
        if self.checkpoint_s <= 0:
            return progress
        return math.floor(progress / self.checkpoint_s + 1e-9) * self.checkpoint_s


RESTART = RestartCost()
"""Default: 60 s to restart, a checkpoint every 10 min of progress (5 min lost on average)."""


def _group(j: traces.PhillyJob) -> tuple[str, int]:
    """A job's history group: its virtual cluster and GPU count."""
    return (j.vc, j.gpus)


def _family(j: traces.PhillyJob) -> int:
    """The wider group a history estimate falls back to: the GPU count."""
    return j.gpus


@dataclasses.dataclass(frozen=True)
class QueueResult:
    policy: str
    jobs: int
    capacity: int
    avg_jct: float
    p50_jct: float
    p99_jct: float
    avg_queueing: float
    utilisation: float
    preemptions: int
    lost_gpu_hours: float = 0.0
    """GPU-hours spent restarting or redoing work lost to preemptions."""


def window(jobs: list[traces.PhillyJob], start: int, count: int | None) -> list[traces.PhillyJob]:
    """A contiguous window (submission order) with times shifted to start at 0."""
    picked = jobs[start : None if count is None else start + count]
    if not picked:
        raise ValueError("empty window of the Philly trace")
    t0 = picked[0].submit
    return [dataclasses.replace(j, job_id=i, submit=j.submit - t0) for i, j in enumerate(picked)]


def size_cluster(jobs: list[traces.PhillyJob], load: float = 0.9, node_gpus: int = 8) -> int:
    """GPUs such that the offered load (GPU-seconds / span) is ``load``; whole nodes."""
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs) or 1.0
    demand = sum(j.gpus * j.duration for j in jobs) / span
    gpus = max(demand / load, max(j.gpus for j in jobs))
    return int(math.ceil(gpus / node_gpus) * node_gpus)


class _Run:
    """Mutable per-job arrays of one simulation."""

    def __init__(
        self, jobs: list[traces.PhillyJob], policy: queueing.QueuePolicy, cost: RestartCost
    ) -> None:
        self.policy, self.cost = policy, cost
        self.submit = np.array([j.submit for j in jobs])
        self.duration = np.array([j.duration for j in jobs])
        self.gpus = np.array([j.gpus for j in jobs], dtype=np.int64)
        self.group, _ = queueing.group_index([_group(j) for j in jobs])
        self.family, _ = queueing.group_index([_family(j) for j in jobs])
        self.executed = np.zeros(len(jobs))
        self.overhead = np.zeros(len(jobs))  # restart seconds to run before progress resumes
        self.lost = 0.0
        self.run_start = np.full(len(jobs), np.nan)
        self.finish = np.full(len(jobs), np.nan)
        self.active: list[int] = []
        self.running: set[int] = set()
        self.preemptions = 0
        self.oracle = policy.name in ("SJF", "SRTF")

    def view(self, now: float) -> queueing.ActiveJobs:
        idx = np.array(self.active, dtype=np.int64)
        start = self.run_start[idx]
        running = ~np.isnan(start)
        since = np.where(running, now - np.nan_to_num(start), 0.0)
        executed = self.executed[idx] + np.maximum(0.0, since - self.overhead[idx])
        duration = self.duration[idx] if self.oracle else np.full(len(idx), np.nan)
        return queueing.ActiveJobs(
            idx,
            self.submit[idx],
            self.gpus[idx],
            executed,
            duration,
            self.group[idx],
            running,
            self.family[idx],
            since,
        )

    def next_completion(self) -> float:
        if not self.running:
            return math.inf
        ids = np.fromiter(self.running, dtype=np.int64)
        return float(self._ends(ids).min())

    def _ends(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return np.asarray(
            self.run_start[ids] + self.overhead[ids] + self.duration[ids] - self.executed[ids]
        )

    def suspend(self, j: int, now: float) -> None:
        """Preempt job ``j``: pay down its restart, roll back to its checkpoint, re-arm."""
        ran = now - self.run_start[j]
        paid = min(ran, self.overhead[j])
        progress = self.executed[j] + ran - paid
        kept = self.cost.kept(progress)
        self.lost += self.gpus[j] * (progress - kept + paid)
        self.executed[j] = kept
        self.overhead[j] = self.overhead[j] - paid + self.cost.restart_s
        self.run_start[j] = np.nan
        self.preemptions += 1

    def complete(self, now: float) -> None:
        ids = np.fromiter(self.running, dtype=np.int64)
        ends = self._ends(ids)
        done = ids[ends <= now + 1e-6]
        history = getattr(self.policy, "history", None)
        for j in done.tolist():
            self.finish[j] = now
            self.lost += self.gpus[j] * self.overhead[j]  # its last restart, paid in full
            self.running.discard(j)
            if isinstance(history, queueing.DurationHistory):
                history.record(int(self.group[j]), float(self.duration[j]), int(self.family[j]))
        if len(done):
            gone = set(done.tolist())
            self.active = [j for j in self.active if j not in gone]

    def schedule(self, now: float, capacity: int) -> None:
        if not self.active:
            return
        jobs = self.view(now)
        if self.policy.preemptive:
            pos = queueing.order(self.policy, jobs, now)
            keep = set(jobs.index[pos][queueing.select(jobs.gpus[pos], capacity)].tolist())
        else:
            waiting = np.flatnonzero(~jobs.running)
            sub = dataclasses.replace(
                jobs, **{f.name: getattr(jobs, f.name)[waiting] for f in dataclasses.fields(jobs)}
            )
            free = capacity - int(jobs.gpus[jobs.running].sum())
            pos = queueing.order(self.policy, sub, now)
            keep = set(self.running) | set(
                sub.index[pos][queueing.select(sub.gpus[pos], free)].tolist()
            )
        for j in self.running - keep:
            self.suspend(j, now)
        for j in keep - self.running:
            self.run_start[j] = now
        self.running = keep

    def next_tick(self, now: float, tick: float) -> float:
        if isinstance(self.policy, queueing.LeastAttained2D) and self.running:
            return now + max(self.policy.next_change(self.view(now)), 1e-3)
        if isinstance(self.policy, queueing.TauGridQueue):
            return now + tick
        return math.inf


def simulate(
    jobs: list[traces.PhillyJob],
    policy_name: str,
    capacity: int,
    *,
    tick: float = 600.0,
    knobs: queueing.TauGridKnobs = queueing.TauGridKnobs(),
    cost: RestartCost = RESTART,
) -> QueueResult:
    """Replay ``jobs`` (sorted by submission) under one policy on ``capacity`` GPUs,
    each preemption charged ``cost``."""
    if max(j.gpus for j in jobs) > capacity:
        raise ValueError(f"a job asks for more than the {capacity} GPUs of the cluster")
    _, groups = queueing.group_index([_group(j) for j in jobs])
    _, families = queueing.group_index([_family(j) for j in jobs])
    policy = queueing.make_policy(policy_name, groups=groups, families=families, knobs=knobs)
    run = _Run(jobs, policy, cost)
    now, nxt, n = 0.0, 0, len(jobs)
    tick_at = math.inf
    while nxt < n or run.running or run.active:
        arrival = run.submit[nxt] if nxt < n else math.inf
        now = min(arrival, run.next_completion(), tick_at)
        if now == math.inf:
            raise RuntimeError("jobs are waiting but nothing can ever run")
        run.complete(now)
        while nxt < n and run.submit[nxt] <= now:
            run.active.append(nxt)
            nxt += 1
        run.schedule(now, capacity)
        tick_at = run.next_tick(now, tick)
    return _result(run, policy_name, capacity)


def _result(run: _Run, policy: str, capacity: int) -> QueueResult:
    jct = run.finish - run.submit
    span = float(np.nanmax(run.finish) - run.submit.min()) or 1.0
    return QueueResult(
        policy=policy,
        jobs=len(jct),
        capacity=capacity,
        avg_jct=float(jct.mean()),
        p50_jct=float(np.percentile(jct, 50)),
        p99_jct=float(np.percentile(jct, 99)),
        avg_queueing=float((jct - run.duration).mean()),
        utilisation=float((run.gpus * run.duration).sum() / (capacity * span)),
        preemptions=run.preemptions,
        lost_gpu_hours=run.lost / 3600,
    )

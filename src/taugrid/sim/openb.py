"""The FGD "inflation" experiment on Alibaba openb, replayed through ``scheduling.packing``.

Protocol (shared/traces/README.md, as in Weng et al. ATC'23):
1. all nodes, every GPU 1000 milli free;
2. shuffle the task list with the seed, then append tasks resampled with replacement
   until the requested GPU-milli would pass ``inflation`` (130 %) of cluster capacity;
3. place tasks one by one with the packer, no deletions; a task that fits nowhere is
   skipped (it still counts as arrived);
4. metric: allocated GPU-milli / capacity at the moment the *arrived* GPU-milli first
   reaches ``stop`` (100 %) of capacity.

The typical workload of FGD/TauGrid is the original (un-inflated) task list, as in the
reference simulator. One ``numpy.random.Generator`` per run, seeded with the seed,
draws the shuffle, the resampling, Random's scores and (with ``tie_break="random"``)
the packer's tie-breaks, so a run is a pure function of (workload, policy, seed,
tie-break). Ties break on the lowest node index by default: the published FGD numbers
are only reproduced that way (with kube-scheduler's random tie-break FGD spreads 1-GPU
tasks and strands 8-GPU ones: about 90.9 % instead of 95.2 % on seed 42).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from taugrid.scheduling.packing import fgd, packer
from taugrid.scheduling.packing import state as st
from taugrid.sim import traces

__all__ = ["InflationResult", "inflate", "run_inflation"]


@dataclasses.dataclass(frozen=True)
class InflationResult:
    """Outcome of one run; ``curve`` holds (arrived %, allocated %) after each GPU task."""

    policy: str
    seed: int
    allocated_pct: float
    arrived_pct: float
    placed: int
    failed: int
    failed_gpu_milli: int
    curve: tuple[tuple[float, float], ...]


def inflate(
    tasks: list[st.Task], capacity: int, seed: int, inflation: float = 1.3
) -> tuple[list[st.Task], np.random.Generator]:
    """Steps 1-2: the shuffled, resampled arrival sequence and the generator it used."""
    rng = np.random.default_rng(seed)
    order = [tasks[i] for i in rng.permutation(len(tasks))]
    total = sum(t.gpu_total for t in order)
    target = inflation * capacity
    while total < target:
        extra = tasks[int(rng.integers(len(tasks)))]
        if total + extra.gpu_total > target:
            break
        order.append(extra)
        total += extra.gpu_total
    return order, rng


def run_inflation(
    nodes: traces.OpenbNodes,
    tasks: list[st.Task],
    policy: str,
    seed: int,
    *,
    stop: float = 1.0,
    inflation: float = 1.3,
    tie_break: str = "first",
) -> InflationResult:
    """Steps 1-4 for one policy and seed; stops once arrived demand reaches ``stop``."""
    state = nodes.state()
    capacity = state.gpu_capacity
    sequence, rng = inflate(tasks, capacity, seed, inflation)
    typical = fgd.TypicalWorkload.from_tasks(tasks)
    every = fgd.TypicalWorkload.from_tasks(tasks, popularity=1.0, with_memory=True)
    scorer = packer.make_scorer(
        policy, seed=int(rng.integers(2**31)), typical=typical, every_shape=every
    )
    tie_rng = np.random.default_rng(int(rng.integers(2**31)))
    pack = packer.Packer(scorer, tie_break, tie_rng)
    arrived = placed = failed = failed_milli = 0
    curve: list[tuple[float, float]] = []
    for task in sequence:
        arrived += task.gpu_total
        if pack.place(task, state) is None:
            failed += 1
            failed_milli += task.gpu_total
        else:
            placed += 1
        if task.gpu_total:
            curve.append((100.0 * arrived / capacity, 100.0 * state.gpu_allocated / capacity))
        if arrived >= stop * capacity:
            break
    return InflationResult(
        policy=policy,
        seed=seed,
        allocated_pct=100.0 * state.gpu_allocated / capacity,
        arrived_pct=100.0 * arrived / capacity,
        placed=placed,
        failed=failed,
        failed_gpu_milli=failed_milli,
        curve=tuple(curve),
    )

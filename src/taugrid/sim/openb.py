"""The FGD "inflation" experiment on Alibaba openb, replayed through ``scheduling.packing``.

Protocol — what the reference simulator of Weng et al. (ATC'23,
hkust-adsl/kubernetes-scheduler-simulator) does; each step names where:
1. the cluster is the 1,213 GPU nodes (``traces.load_openb_nodes``; the reference's
   ``data/prepare_input.sh`` copies ``openb_node_list_gpu_node.yaml``), every GPU 1000
   milli free; CPU tasks therefore compete with GPU tasks for the GPU nodes' CPUs;
2. the nodes are put in a random order per seed (``syncClusterResourceList`` renames
   every node with a ``rand.Perm`` prefix), and equal best scores go to the first node
   in that order (``tie_break="first"``); ``node_order="file"`` keeps the file order;
3. shuffle the task list with the seed (``SortClusterPods``), then append tasks
   resampled with replacement until the requested GPU-milli would pass ``inflation``
   (130 %) of capacity (``tuneUpPods``);
4. place tasks one by one with the packer, no deletions; a task that fits nowhere is
   skipped (it still counts as arrived);
5. metric: the reference logs (arrived, allocated) after every task and reports, for
   arrived = 100 %, the mean allocation over the tasks whose arrived % *rounds* to 100
   (``experiments/analysis/merge_alloc_discrete*.py``); ``stop`` picks the percentage.

The typical workload of FGD/TauGrid is the original (un-inflated) task list, as in the
reference simulator. One ``numpy.random.Generator`` per run, seeded with the seed,
draws the shuffle, the resampling, the node order, Random's scores and (with
``tie_break="random"``) the packer's tie-breaks, so a run is a pure function of
(workload, policy, seed, tie-break, node order).
"""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np

from taugrid.scheduling.packing import fgd, packer
from taugrid.scheduling.packing import state as st
from taugrid.sim import traces

__all__ = ["NODE_ORDERS", "InflationResult", "inflate", "run_inflation"]

NODE_ORDERS = ("shuffled", "file")


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
    cpu_tasks: int  # CPU-only tasks that arrived
    cpu_failed: int  # of them, not placed
    curve: tuple[tuple[float, float], ...]


def inflate(
    tasks: list[st.Task], capacity: int, seed: int, inflation: float = 1.3
) -> tuple[list[st.Task], np.random.Generator]:
    """Step 3: the shuffled, resampled arrival sequence and the generator it used."""
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


def ordered_state(
    nodes: traces.OpenbNodes, rng: np.random.Generator, node_order: str
) -> st.ClusterState:
    """Step 2: a fresh state with the nodes in a per-seed random order (or file order)."""
    if node_order not in NODE_ORDERS:
        raise ValueError(f"node_order must be one of {NODE_ORDERS}, not {node_order!r}")
    idx = list(range(len(nodes.names)))
    if node_order == "shuffled":
        idx = [int(i) for i in rng.permutation(len(idx))]
    return st.ClusterState(
        [nodes.names[i] for i in idx],
        [nodes.cpu_milli[i] for i in idx],
        [nodes.memory_mib[i] for i in idx],
        [nodes.gpus[i] for i in idx],
        [nodes.models[i] for i in idx],
    )


def run_inflation(
    nodes: traces.OpenbNodes,
    tasks: list[st.Task],
    policy: str,
    seed: int,
    *,
    stop: float = 1.0,
    inflation: float = 1.3,
    tie_break: str = "first",
    node_order: str = "shuffled",
) -> InflationResult:
    """Steps 1-5 for one policy and seed, up to where arrived % no longer rounds to ``stop``.

    ``allocated_pct`` is the mean allocation over the tasks whose arrived % rounds to
    ``round(100 * stop)``; when no task lands there (tiny clusters, where one task is
    several % of capacity) it is the allocation when arrival first reaches ``stop``.
    """
    sequence, rng = inflate(tasks, nodes_capacity(nodes), seed, inflation)
    state = ordered_state(nodes, rng, node_order)
    capacity = state.gpu_capacity
    typical = fgd.TypicalWorkload.from_tasks(tasks)
    every = fgd.TypicalWorkload.from_tasks(tasks, popularity=1.0, with_memory=True)
    scorer = packer.make_scorer(
        policy, seed=int(rng.integers(2**31)), typical=typical, every_shape=every
    )
    tie_rng = np.random.default_rng(int(rng.integers(2**31)))
    pack = packer.Packer(scorer, tie_break, tie_rng)
    meter = _Meter(capacity, stop)
    for task in sequence:
        placement = pack.place(task, state)
        if meter.record(task, placement is not None, state.gpu_allocated):
            break
    return InflationResult(
        policy=policy,
        seed=seed,
        allocated_pct=meter.result(),
        arrived_pct=100.0 * meter.arrived / capacity,
        placed=meter.placed,
        failed=meter.failed,
        failed_gpu_milli=meter.failed_milli,
        cpu_tasks=meter.cpu_tasks,
        cpu_failed=meter.cpu_failed,
        curve=tuple(meter.curve),
    )


@dataclasses.dataclass
class _Meter:
    """Step 5: arrivals, outcomes and the allocation around the target arrived %."""

    capacity: int
    stop: float
    arrived: int = 0
    placed: int = 0
    failed: int = 0
    failed_milli: int = 0
    cpu_tasks: int = 0
    cpu_failed: int = 0
    at_stop: float | None = None
    window: list[float] = dataclasses.field(default_factory=list)
    curve: list[tuple[float, float]] = dataclasses.field(default_factory=list)

    def record(self, task: st.Task, ok: bool, allocated: int) -> bool:
        """Count one task; True once arrived % is past the window (stop replaying)."""
        self.arrived += task.gpu_total
        self.placed += ok
        self.failed += not ok
        self.failed_milli += 0 if ok else task.gpu_total
        if not task.gpu_total:
            self.cpu_tasks += 1
            self.cpu_failed += not ok
        arrived_pct = 100.0 * self.arrived / self.capacity
        allocated_pct = 100.0 * allocated / self.capacity
        if task.gpu_total:
            self.curve.append((arrived_pct, allocated_pct))
        if self.at_stop is None and self.arrived >= self.stop * self.capacity:
            self.at_stop = allocated_pct
        target = round(100 * self.stop)
        if round(arrived_pct) == target:  # half-to-even, like pandas' round
            self.window.append(allocated_pct)
        return arrived_pct > target + 0.5

    def result(self) -> float:
        if self.window:
            return statistics.fmean(self.window)
        return self.at_stop or 0.0


def nodes_capacity(nodes: traces.OpenbNodes) -> int:
    """Milli-GPU of all nodes (step 3's inflation target is relative to it)."""
    return sum(nodes.gpus) * st.MILLI

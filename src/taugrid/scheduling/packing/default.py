"""TauGrid's default node placement: a CPU hold, then FGD minus a reserve penalty,
refined by capacity.

**The CPU hold** (a filter, ``allowed``): a CPU-only task may take a GPU node's CPU only
down to what the node's free GPUs need, ``free GPUs * cpus_per_gpu`` (the workload's
CPU per GPU over its GPU shapes). GPUs are what the cluster is for; without the hold, CPU
tasks take the CPU of nodes whose GPUs are still free, and GPU tasks arriving later find
GPUs without the CPU to use them. A CPU-only task that no node allows is not placed
(it waits, or fails in the simulator), as Slurm's ``MaxCPUsPerNode`` keeps CPU jobs off
the cores a GPU node's GPUs need. GPU tasks are never held. It assumes GPU work keeps
coming (the simulator's arrival protocol); live, CPU-only runs are not bound by the
packer (``live.bind``) and the live workload prior asks no CPU, so the hold is inert there.

Score of a node for a task (higher is better), in FGD points, then milli-GPU:

1. **FGD score** (``fgd.FgdScore``): ``int(100·sigmoid(ΔF/1000))`` where ΔF is the drop of
   the node's expected fragmentation against the typical workload. Its coarse integer
   steps keep FGD's behaviour: decisions that fragment alike tie.
2. **Minus the reserve penalty** (``node_reserve``; ``RESERVE_POINTS`` FGD points per
   unit): a node's *reserve* is the load the whole workload would put on it if every
   shape spread its GPU demand evenly over the nodes able to host it at all (by
   capacity: CPU, memory, GPU count, GPU model), at 100 % arrived demand, as a fraction
   of the node's GPUs. Shapes with few homes concentrate their load there: tasks pinned
   to T4 load only the T4 nodes, 8-GPU tasks asking 120 CPUs only the 128-CPU nodes. A
   task pays its node's reserve minus the least reserve among the nodes able to host
   it: it takes the least-claimed kind of node it can use, and a task whose only home is
   the claimed kind pays nothing. Inert when every node is equally claimed (no shape is
   confined); CPU-only tasks pay nothing. **Off** (``multi_gpu_bound``) for a workload bound
   by multi-GPU tasks (``multi_gpu_share`` at least ``MULTI_GPU_SHARE``): FGD's own score
   already keeps whole nodes for them, and the reserve only overrides it. (A second gate,
   for CPU-bound workloads, went with the CPU hold, which does that job.)
3. **Capacity-aware fragmentation drop** (breaks the remaining ties): FGD asks "does one
   task of shape t still fit?"; this asks "how much of the node's free GPU can tasks of
   shape t still use?" — ``usable_t = min(⌊cpu/c_t⌋, ⌊mem/r_t⌋, GPU slots_t) · gpu_t``
   with GPU slots ``Σ_i ⌊free_i/m_t⌋`` for a sharing shape and ``⌊whole free GPUs/k_t⌋``
   for a k-GPU shape — and scores ``Σ_t w_t·(free - usable_t)`` before minus after. It
   sees CPU and memory stranding (a node whose CPU or memory runs out leaves its GPUs
   idle) that FGD's one-task, CPU-and-GPU-only test misses. ``w_t`` is shape t's share
   of the tasks (FGD's popularity ``p_t``), except in a multi-GPU-bound workload
   (``multi_gpu_bound``, where the reserve is off): there it is its share of the GPU
   *demand* (``p_t·g_t / Σ p·g``). An 8-GPU shape that is a fifth of the tasks is then
   two thirds of the demand, and the whole node it needs outweighs the GPUs a smaller
   task strands elsewhere. (By task count TauGrid trailed FGD on multigpu40; by demand
   everywhere it lost ground on the single-GPU and sharing lists, seeds 42-51.)
4. Remaining ties: the packer's tie-break (lowest node index by default).

The reserve and the capacity-aware level use *every* shape of the workload
(``every_shape``: popularity 100 %), not only the 95 % typical ones: rare confined
shapes are what a careless placement strands first.

A sharing task takes the GPU that is best by (1, 3). All levels depend only on the node's
own state and the task's shape, so scores are memoised per node version
(``cache.ScoreCache``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from taugrid.scheduling.packing import cache, fgd, plugins
from taugrid.scheduling.packing import state as st

__all__ = [
    "MULTI_GPU_SHARE",
    "RESERVE_POINTS",
    "TauGridScore",
    "cpus_per_gpu",
    "multi_gpu_bound",
    "multi_gpu_share",
    "node_reserve",
]

FloatArray = npt.NDArray[np.float64]
_FGD_STEP = 1e5  # one FGD point outweighs the capacity-aware level
#: FGD points a task pays per unit of reserve above the least it could have taken.
RESERVE_POINTS = 10.0
#: Reserve off from this share of the GPU demand in multi-GPU tasks (``multi_gpu_share``).
MULTI_GPU_SHARE = 0.35


def _gpu_demand(shape: fgd.Shape) -> int:
    return shape.gpu_milli * shape.num_gpu


def cpus_per_gpu(every_shape: fgd.TypicalWorkload) -> float:
    """Milli-CPU per GPU of the workload's GPU tasks (their demand-weighted mean)."""
    pairs = list(zip(every_shape.shapes, every_shape.probs, strict=True))
    gpus = sum(p * _gpu_demand(s) for s, p in pairs) / st.MILLI
    cpu = sum(p * s.cpu_milli for s, p in pairs if s.num_gpu)
    return cpu / gpus if gpus else 0.0


def multi_gpu_share(every_shape: fgd.TypicalWorkload) -> float:
    """The part of the workload's GPU demand in tasks asking more than one GPU."""
    pairs = list(zip(every_shape.shapes, every_shape.probs, strict=True))
    gpu = sum(p * _gpu_demand(s) for s, p in pairs)
    multi = sum(p * _gpu_demand(s) for s, p in pairs if s.num_gpu > 1)
    return multi / gpu if gpu else 0.0


def multi_gpu_bound(every_shape: fgd.TypicalWorkload) -> bool:
    """Whether the workload is multi-GPU-bound (level 2 off, level 3 by GPU demand)."""
    return multi_gpu_share(every_shape) >= MULTI_GPU_SHARE


def node_reserve(every_shape: fgd.TypicalWorkload, state: st.ClusterState) -> FloatArray:
    """Per node: the load every shape's evenly spread demand puts on it, over its GPUs.

    Shape s with probability p_s and GPU demand g_s contributes
    ``share_s · C / cap(able_s)`` to every node able to host it, where
    ``share_s = p_s·g_s / Σ p·g`` is its part of the workload's GPU demand, ``C`` the
    cluster's GPUs and ``cap(able_s)`` the GPUs of the nodes able to host it. A shape
    every node can host adds ``share_s`` everywhere; one with few homes adds much more
    there.
    """
    gpus = state.gpu_cnt.astype(np.float64) * st.MILLI
    demand = [
        (shape, p * shape.gpu_milli * shape.num_gpu)
        for shape, p in zip(every_shape.shapes, every_shape.probs, strict=True)
    ]
    total = sum(d for _, d in demand)
    reserve = np.zeros(len(state))
    for shape, d in demand:
        able = state.able(_as_task(shape))
        homes = gpus[able].sum()
        if d and homes:
            reserve[able] += d / total * gpus.sum() / homes
    return reserve


def _as_task(shape: fgd.Shape) -> st.Task:
    models = frozenset(shape.models)
    return st.Task(
        "shape", shape.cpu_milli, shape.memory_mib, shape.num_gpu, shape.gpu_milli, models
    )


class _Capacity:
    """Capacity-aware fragmentation of nodes, now and after a hypothetical placement."""

    def __init__(
        self, typical: fgd.TypicalWorkload, state: st.ClusterState, by_demand: bool
    ) -> None:
        gpu = [(s, p) for s, p in zip(typical.shapes, typical.probs, strict=True) if s.num_gpu]
        self.state = state
        if by_demand:  # share of the GPU demand, else of the tasks (FGD's popularity)
            demand = np.array([p * _gpu_demand(s) for s, p in gpu], dtype=np.float64)
            self.weight = demand / demand.sum() if demand.sum() else demand
        else:
            self.weight = np.array([p for _, p in gpu], dtype=np.float64)
        self.cpu = np.array([s.cpu_milli for s, _ in gpu], dtype=np.int64)
        self.mem = np.array([s.memory_mib for s, _ in gpu], dtype=np.int64)
        self.milli = np.array([s.gpu_milli for s, _ in gpu], dtype=np.int64)
        self.num = np.array([s.num_gpu for s, _ in gpu], dtype=np.int64)
        self.sharing = self.milli < st.MILLI
        self.access = np.array(
            [[not s.models or m in s.models for m in state.model_names] + [False] for s, _ in gpu],
            dtype=bool,
        ).reshape(len(gpu), len(state.model_names) + 1)
        self._now = np.zeros(len(state))  # fragmentation now, per node version (task-free)
        self._seen = np.full(len(state), -1, dtype=np.int64)

    def _frag(
        self,
        access: npt.NDArray[np.bool_],
        cpu: st.IntArray,
        mem: st.IntArray,
        total: st.IntArray,
        slots: st.IntArray,
    ) -> FloatArray:
        shape = (-1,) + (1,) * (cpu.ndim - 1)
        by_host = np.minimum(
            cpu // np.maximum(self.cpu.reshape(shape), 1),
            mem // np.maximum(self.mem.reshape(shape), 1),
        )
        tasks = np.minimum(by_host, slots)
        usable = np.where(access, tasks * (self.milli * self.num).reshape(shape), 0)
        lost = total - np.minimum(usable, total)
        return np.asarray((self.weight.reshape(shape) * lost).sum(axis=0), dtype=np.float64)

    def _slots(self, gpu_left: st.IntArray) -> tuple[st.IntArray, st.IntArray]:
        """GPU slots per (shape, node) and the whole free GPUs per node."""
        per_gpu = gpu_left[None, :, :] // self.milli[:, None, None]
        full = (gpu_left == st.MILLI).sum(axis=1)
        slots = np.where(
            self.sharing[:, None], per_gpu.sum(axis=2), full[None, :] // self.num[:, None]
        )
        return slots, full

    def _before(
        self, nodes: st.IntArray, access: npt.NDArray[np.bool_], slots: st.IntArray
    ) -> FloatArray:
        """Fragmentation of ``nodes`` now, recomputed only where a node changed."""
        stale = self._seen[nodes] != self.state.version[nodes]
        if stale.any():
            sub = nodes[stale]
            self._now[sub] = self._frag(
                access[:, stale],
                self.state.cpu_left[sub][None, :],
                self.state.mem_left[sub][None, :],
                self.state.gpu_left[sub].sum(axis=1)[None, :],
                slots[:, stale],
            )
            self._seen[sub] = self.state.version[sub]
        return self._now[nodes]

    def drop(self, task: st.Task, nodes: st.IntArray) -> FloatArray:
        """Fragmentation before minus after: (S,) for a CPU/whole-GPU task, (S, 8) sharing."""
        gl = self.state.gpu_left[nodes]
        cpu = self.state.cpu_left[nodes]
        mem = self.state.mem_left[nodes]
        total = gl.sum(axis=1)
        access = self.access[:, self.state.model[nodes]]
        slots, full = self._slots(gl)
        before = self._before(nodes, access, slots)
        if task.sharing:
            new = gl - task.gpu_milli
            lost = (
                gl[None] // self.milli[:, None, None]
                - np.maximum(new, 0)[None] // self.milli[:, None, None]
            )
            full3 = full[:, None] - (gl == st.MILLI)
            slots3 = np.where(
                self.sharing[:, None, None],
                slots[:, :, None] - lost,
                full3[None] // self.num[:, None, None],
            )
            cpu3 = (cpu - task.cpu_milli)[None, :, None]
            mem3 = (mem - task.memory_mib)[None, :, None]
            total3 = (total - task.gpu_milli)[None, :, None]
            after = self._frag(access[:, :, None], cpu3, mem3, total3, slots3)
            return np.where(gl >= task.gpu_milli, before[:, None] - after, -np.inf)
        if task.gpu_total:
            per_full = (st.MILLI // self.milli) * task.num_gpu
            slots = np.where(
                self.sharing[:, None],
                slots - per_full[:, None],
                (full - task.num_gpu)[None, :] // self.num[:, None],
            )
        cpu2, mem2 = (cpu - task.cpu_milli)[None, :], (mem - task.memory_mib)[None, :]
        after = self._frag(access, cpu2, mem2, (total - task.gpu_total)[None, :], slots)
        return before - after


class TauGridScore:
    """TauGrid's default node score (see the module docstring)."""

    name = "TauGrid"

    def __init__(
        self, typical: fgd.TypicalWorkload, every_shape: fgd.TypicalWorkload | None = None
    ) -> None:
        self.typical = typical
        self.every_shape = every_shape or typical
        self._fgd = fgd.FgdScore(typical)
        self._cache = cache.ScoreCache()
        self._capacity: _Capacity | None = None
        self._reserve: FloatArray = np.zeros(0)
        self._least: dict[tuple[object, ...], float] = {}
        self._cpus_per_gpu = cpus_per_gpu(self.every_shape)

    def _parts(self, state: st.ClusterState) -> _Capacity:
        if self._capacity is None or self._capacity.state is not state:
            bound = multi_gpu_bound(self.every_shape)
            self._capacity = _Capacity(self.every_shape, state, by_demand=bound)
            self._reserve = np.zeros(len(state)) if bound else node_reserve(self.every_shape, state)
            self._least = {}
        return self._capacity

    def allowed(
        self, task: st.Task, state: st.ClusterState, nodes: st.IntArray
    ) -> npt.NDArray[np.bool_]:
        """The CPU hold (module docstring): where a CPU-only task leaves the free GPUs
        their CPU. Every node for a GPU task."""
        if task.num_gpu:
            return np.ones(len(nodes), dtype=bool)
        free_gpus = state.gpu_left[nodes].sum(axis=1) / st.MILLI
        return np.asarray(
            state.cpu_left[nodes] - task.cpu_milli >= free_gpus * self._cpus_per_gpu, dtype=bool
        )

    def _penalty(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> FloatArray:
        """Level 2 in FGD points: reserve above the least the task could have taken."""
        if not task.num_gpu:
            return np.zeros(len(nodes))
        key = (*fgd.shape_key(task), task.memory_mib)
        if key not in self._least:
            self._least[key] = float(self._reserve[state.able(task)].min(initial=0.0))
        return RESERVE_POINTS * (self._reserve[nodes] - self._least[key])

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> plugins.Scores:
        capacity = self._parts(state)
        frag = self._fgd.fragmenter(state)

        def compute(sub: st.IntArray) -> plugins.Scores:
            before = frag.current(sub)
            drop = capacity.drop(task, sub)
            penalty = self._penalty(task, state, sub)
            if task.sharing:
                after = frag.after_gpu(task, sub)
                ok = np.isfinite(after)
                fgd_points = fgd.sigmoid_score(before[:, None] - np.where(ok, after, 0.0))
                points = fgd_points - penalty[:, None]
                per_gpu = np.where(ok, points * _FGD_STEP + np.where(ok, drop, 0.0), -np.inf)
                gpu = per_gpu.argmax(axis=1).astype(np.int64)
                value = per_gpu.max(axis=1)
            else:
                points = fgd.sigmoid_score(before - frag.after_node(task, sub)) - penalty
                value = points * _FGD_STEP + drop
                gpu = np.full(len(sub), -1, dtype=np.int64)
            return plugins.Scores(value, gpu)

        return self._cache.scores((*fgd.shape_key(task), task.memory_mib), state, nodes, compute)

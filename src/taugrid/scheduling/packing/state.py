"""Node-level working state for GPU packing: what every node of one cluster has left.

Vocabulary:
- *milli-GPU*: 1000 milli is one whole GPU. A **sharing task** asks for part of one GPU
  (``num_gpu == 1`` and ``gpu_milli < 1000``); a **whole-GPU task** asks for
  ``num_gpu`` GPUs of 1000 milli each, all on one node; a **CPU task** asks for none.
- ``gpu_left[n, i]``: milli free on GPU ``i`` of node ``n``; rows are padded with 0 up
  to ``MAX_GPUS`` so that padding never fits anything and never counts as free.

Invariants: ``0 <= gpu_left <= 1000`` and ``cpu_left``/``mem_left`` never go negative;
only ``ClusterState.apply`` mutates the arrays (after ``feasible`` said yes). The state is
the packer's mutable working copy, like ``cycle._Work``: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_GPUS",
    "MILLI",
    "ClusterState",
    "IntArray",
    "Placement",
    "Task",
    "exclusive_gpus",
]

MILLI = 1000
MAX_GPUS = 8
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
#: Affinity tags of GpuClustering: 0 = sharing task, k = whole-GPU task of k GPUs (k <= 8),
#: MAX_GPUS + 1 = larger whole-GPU tasks.
N_TAGS = MAX_GPUS + 2


@dataclasses.dataclass(frozen=True)
class Task:
    """What one task (pod / worker) asks for; ``models`` empty means any GPU model."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    models: frozenset[str] = frozenset()

    @property
    def gpu_total(self) -> int:
        """Milli-GPU asked for in all (500 for a half GPU, 2000 for two whole GPUs)."""
        return self.num_gpu * self.gpu_milli

    @property
    def sharing(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def tag(self) -> int:
        """GpuClustering affinity tag (see ``N_TAGS``); -1 for CPU tasks."""
        if self.gpu_total == 0:
            return -1
        return 0 if self.sharing else min(self.num_gpu, MAX_GPUS + 1)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a task went: node index and the GPU indices it took (empty for CPU tasks)."""

    node: int
    gpus: tuple[int, ...]


def exclusive_gpus(row: IntArray, count: int) -> tuple[int, ...]:
    """The first ``count`` fully free GPUs of a node, in index order (may be fewer)."""
    return tuple(int(i) for i in np.flatnonzero(row == MILLI)[:count])


class ClusterState:
    """Free CPU, memory and per-GPU milli of every node, plus what was placed where."""

    def __init__(
        self,
        names: list[str],
        cpu_milli: list[int],
        memory_mib: list[int],
        gpus: list[int],
        models: list[str],
    ) -> None:
        n = len(names)
        if not all(len(x) == n for x in (cpu_milli, memory_mib, gpus, models)):
            raise ValueError("node columns must have the same length")
        if any(g < 0 or g > MAX_GPUS for g in gpus):
            raise ValueError(f"a node has between 0 and {MAX_GPUS} GPUs")
        self.names = list(names)
        self.model_names = sorted({m for m, g in zip(models, gpus, strict=True) if g and m})
        code = {m: i for i, m in enumerate(self.model_names)}
        self.model: IntArray = np.array(
            [code[m] if g and m else -1 for m, g in zip(models, gpus, strict=True)], dtype=np.int64
        )
        self.cpu_cap: IntArray = np.array(cpu_milli, dtype=np.int64)
        self.mem_cap: IntArray = np.array(memory_mib, dtype=np.int64)
        self.gpu_cnt: IntArray = np.array(gpus, dtype=np.int64)
        self.cpu_left = self.cpu_cap.copy()
        self.mem_left = self.mem_cap.copy()
        slots = np.arange(MAX_GPUS)[None, :]
        self.gpu_left: IntArray = np.where(slots < self.gpu_cnt[:, None], MILLI, 0).astype(np.int64)
        self.tags: IntArray = np.zeros((n, N_TAGS), dtype=np.int64)
        #: Bumped on every change of a node: score caches key on it.
        self.version: IntArray = np.zeros(n, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_capacity(self) -> int:
        """Milli-GPU of the whole cluster."""
        return int(self.gpu_cnt.sum()) * MILLI

    @property
    def gpu_allocated(self) -> int:
        return self.gpu_capacity - int(self.gpu_left.sum())

    def model_mask(self, task: Task) -> BoolArray:
        """Nodes whose GPU model the task accepts (every GPU node when it names none)."""
        has_gpu: BoolArray = self.gpu_cnt > 0
        if not task.models:
            return has_gpu
        codes = [i for i, m in enumerate(self.model_names) if m in task.models]
        return has_gpu & np.isin(self.model, codes)

    def able(self, task: Task) -> BoolArray:
        """Nodes that could host the task when empty (by capacity, not by what is left)."""
        return (
            (self.cpu_cap >= task.cpu_milli)
            & (self.mem_cap >= task.memory_mib)
            & (self.gpu_cnt >= task.num_gpu)
            & self.model_mask(task)
        )

    def feasible(self, task: Task) -> IntArray:
        """Indices of nodes where the task fits now (filter phase), ascending."""
        ok = (self.cpu_left >= task.cpu_milli) & (self.mem_left >= task.memory_mib)
        if task.gpu_total:
            fitting = (self.gpu_left >= task.gpu_milli).sum(axis=1)
            ok &= self.model_mask(task) & (fitting >= task.num_gpu)
        return np.flatnonzero(ok).astype(np.int64)

    def apply(self, task: Task, placement: Placement) -> None:
        """Deduct the task from its node (reserve phase)."""
        n = placement.node
        if len(placement.gpus) != (task.num_gpu if task.gpu_total else 0):
            raise ValueError(f"{task.name}: {len(placement.gpus)} GPUs for {task.num_gpu}")
        for g in placement.gpus:
            if self.gpu_left[n, g] < task.gpu_milli:
                raise ValueError(f"{task.name}: GPU {g} of node {self.names[n]} is too full")
        if self.cpu_left[n] < task.cpu_milli or self.mem_left[n] < task.memory_mib:
            raise ValueError(f"{task.name}: node {self.names[n]} lacks CPU or memory")
        self.cpu_left[n] -= task.cpu_milli
        self.mem_left[n] -= task.memory_mib
        for g in placement.gpus:
            self.gpu_left[n, g] -= task.gpu_milli
        if task.tag >= 0:
            self.tags[n, task.tag] += 1
        self.version[n] += 1

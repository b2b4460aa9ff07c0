"""Node score plugins for GPU packing, and the baselines of the GPU-sharing literature.

Extension point (a ``Protocol``, kube-scheduler style): ``NodeScorer.score(task, state,
nodes) -> Scores`` scores every *feasible* node in ``nodes`` (the packer filtered them) —
higher is better — and may name, for a sharing task, which GPU of each node it would use
(``Scores.gpu``; -1 leaves the choice to the packer's best-fit rule). Scores are not
bounded here; the packer only compares them. A scorer that is also a ``NodeFilter``
(``allowed(task, state, nodes) -> mask``) narrows the feasible nodes first, as a
kube-scheduler filter plugin: a task none of them allows is not placed.

Baselines, as defined by the open-source simulator of Weng et al. (ATC'23), whose
integer truncations are kept on purpose so that ties behave like the published runs:
- ``RandomScore``: a uniformly random node, a random fitting GPU (seeded).
- ``DotProductScore`` (Tetris): prefer the smallest dot product of free and requested
  (CPU, GPU) vectors, both normalised by the largest node (128 CPUs, 8 GPUs).
- ``GpuClusteringScore``: keep tasks of the same GPU shape together.
- ``GpuPackingScore``: shared GPUs first, then used nodes, then idle nodes.
- ``BestFitScore``: least free (CPU, GPU) left after placement.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from taugrid.scheduling.packing import state as st

__all__ = [
    "MAX_SPEC_CPU",
    "MAX_SPEC_GPU",
    "BestFitScore",
    "DotProductScore",
    "GpuClusteringScore",
    "GpuPackingScore",
    "NodeFilter",
    "NodeScorer",
    "RandomScore",
    "Scores",
    "best_fit_gpu",
]

FloatArray = npt.NDArray[np.float64]
MAX_SPEC_CPU = 128_000  # milli-CPU of the largest node: the normaliser of both baselines
MAX_SPEC_GPU = 8_000  # milli-GPU of the largest node


@dataclasses.dataclass(frozen=True)
class Scores:
    """One score per candidate node and, for sharing tasks, the GPU it would take."""

    value: FloatArray
    gpu: st.IntArray


class NodeScorer(Protocol):
    @property
    def name(self) -> str: ...

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> Scores: ...


@runtime_checkable
class NodeFilter(Protocol):
    def allowed(
        self, task: st.Task, state: st.ClusterState, nodes: st.IntArray
    ) -> npt.NDArray[np.bool_]: ...


def _no_gpu(nodes: st.IntArray) -> st.IntArray:
    return np.full(len(nodes), -1, dtype=np.int64)


def best_fit_gpu(task: st.Task, gpu_left: st.IntArray) -> st.IntArray:
    """Per row: the fitting GPU with the least milli left (lowest index on ties)."""
    masked = np.where(gpu_left >= task.gpu_milli, gpu_left, st.MILLI + 1)
    best: st.IntArray = masked.argmin(axis=1).astype(np.int64)
    return best


@dataclasses.dataclass
class RandomScore:
    """Uniformly random feasible node and fitting GPU; deterministic per ``seed``."""

    seed: int
    name: str = "Random"

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> Scores:
        value = self._rng.random(len(nodes))
        if not task.sharing:
            return Scores(value, _no_gpu(nodes))
        keys = np.where(
            state.gpu_left[nodes] >= task.gpu_milli, self._rng.random((len(nodes), 8)), -1
        )
        return Scores(value, keys.argmax(axis=1).astype(np.int64))


@dataclasses.dataclass(frozen=True)
class DotProductScore:
    name: str = "DotProd"

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> Scores:
        free_cpu = state.cpu_left[nodes] / MAX_SPEC_CPU
        free_gpu = state.gpu_left[nodes].sum(axis=1) / MAX_SPEC_GPU
        dot = free_cpu * (task.cpu_milli / MAX_SPEC_CPU) + free_gpu * (
            task.gpu_total / MAX_SPEC_GPU
        )
        value = np.floor(100.0 * (1.0 - dot / 2.0))
        gpu = best_fit_gpu(task, state.gpu_left[nodes]) if task.sharing else _no_gpu(nodes)
        return Scores(value, gpu)


@dataclasses.dataclass(frozen=True)
class GpuClusteringScore:
    name: str = "GpuClustering"

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> Scores:
        if task.gpu_total == 0:
            return Scores(np.zeros(len(nodes)), _no_gpu(nodes))
        used = MAX_SPEC_GPU - state.gpu_left[nodes].sum(axis=1)
        base = (25 * used) // MAX_SPEC_GPU
        tags = state.tags[nodes]
        kinds = (tags > 0).sum(axis=1)
        same = tags[:, task.tag] > 0
        bonus = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        gpu = best_fit_gpu(task, state.gpu_left[nodes]) if task.sharing else _no_gpu(nodes)
        return Scores((base + bonus).astype(np.float64), gpu)


@dataclasses.dataclass(frozen=True)
class GpuPackingScore:
    name: str = "GpuPacking"

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> Scores:
        if task.gpu_total == 0:
            return Scores(np.zeros(len(nodes)), _no_gpu(nodes))
        left = state.gpu_left[nodes]
        full = (left == st.MILLI).sum(axis=1)
        idle_node = full == state.gpu_cnt[nodes]
        if task.sharing:
            gpu = best_fit_gpu(task, left)
            chosen = left[np.arange(len(nodes)), gpu]
            uses_full = chosen == st.MILLI
            shared = np.maximum(100 - ((chosen * 100) // st.MILLI) // 10, 50)
            value = np.where(uses_full, 49, shared)
        else:  # whole GPUs are always fully free ones
            gpu = _no_gpu(nodes)
            value = np.full(len(nodes), max(50 - task.num_gpu, 33))
        value = np.where(idle_node, np.maximum(33 - full, full), value)
        return Scores(value.astype(np.float64), gpu)


@dataclasses.dataclass(frozen=True)
class BestFitScore:
    name: str = "BestFit"

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> Scores:
        cpu_after = (state.cpu_left[nodes] - task.cpu_milli) / MAX_SPEC_CPU
        gpu_after = (state.gpu_left[nodes].sum(axis=1) - task.gpu_total) / MAX_SPEC_GPU
        value = np.floor(100.0 * (1.0 - 0.5 * cpu_after - 0.5 * gpu_after))
        gpu = best_fit_gpu(task, state.gpu_left[nodes]) if task.sharing else _no_gpu(nodes)
        return Scores(value, gpu)

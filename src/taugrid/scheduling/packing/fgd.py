"""Fragmentation Gradient Descent (FGD, Weng et al., USENIX ATC'23) and its measure.

Vocabulary (the paper's):
- **Typical workload**: the distribution of task shapes ``(cpu, gpu_milli, num_gpu,
  gpu models)`` of a workload — the most popular shapes that together make up 95 % of
  its tasks (CPU tasks included), with their frequencies renormalised to sum to 1.
- **Fragmentation of a node for one shape**: the node's free milli-GPU that tasks of
  that shape cannot use. If the shape fits on the node (model, CPU and enough GPUs with
  room), only the GPUs with less room than one of its GPUs are fragments; otherwise
  every free milli-GPU of the node is. CPU-only shapes count all free GPU as fragment.
- **Fragmentation of a node**: the expectation over the typical workload.

FGD places a task where it *increases* node fragmentation least (a gradient step):
score = ``int(100 * sigmoid((F_before - F_after) / 1000))`` as in the reference
simulator; a sharing task also takes the GPU with the best score on that node.

Everything is vectorised over (shape, node, GPU) with numpy; the per-GPU "what if"
states of a sharing task are derived incrementally from the node's counts rather than
recomputed.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from taugrid.scheduling.packing import cache, plugins
from taugrid.scheduling.packing import state as st

__all__ = [
    "FgdScore",
    "Shape",
    "TypicalWorkload",
    "node_fragmentation",
    "shape_key",
    "sigmoid_score",
]

FloatArray = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True, order=True)
class Shape:
    """A task shape of the typical workload (memory is not part of it, as in the paper)."""

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    models: tuple[str, ...] = ()
    memory_mib: int = 0  # 0 unless built ``with_memory`` (FGD's shapes have none)


@dataclasses.dataclass(frozen=True)
class TypicalWorkload:
    """Shapes and their probabilities (sum 1)."""

    shapes: tuple[Shape, ...]
    probs: tuple[float, ...]

    @classmethod
    def from_tasks(
        cls, tasks: Iterable[st.Task], popularity: float = 0.95, *, with_memory: bool = False
    ) -> TypicalWorkload:
        """The most popular shapes covering ``popularity`` of the tasks, renormalised."""
        counts = collections.Counter(
            Shape(
                t.cpu_milli,
                t.gpu_milli if t.num_gpu else 0,
                t.num_gpu,
                tuple(sorted(t.models)),
                t.memory_mib if with_memory else 0,
            )
            for t in tasks
        )
        if not counts:
            raise ValueError("a typical workload needs at least one task")
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        kept: list[tuple[Shape, int]] = []
        for shape, n in ranked:
            kept.append((shape, n))
            if sum(c for _, c in kept) >= popularity * total:
                break
        mass = sum(c for _, c in kept)
        return cls(tuple(s for s, _ in kept), tuple(c / mass for _, c in kept))


@dataclasses.dataclass(frozen=True)
class _Columns:
    """The typical workload as arrays, with model access resolved for one cluster."""

    cpu: st.IntArray  # (T,)
    milli: st.IntArray  # (T,)
    num: st.IntArray  # (T,)
    prob: FloatArray  # (T,)
    access: npt.NDArray[np.bool_]  # (T, models + 1); last column = CPU-only node


def _columns(typical: TypicalWorkload, state: st.ClusterState) -> _Columns:
    access = np.zeros((len(typical.shapes), len(state.model_names) + 1), dtype=bool)
    for i, s in enumerate(typical.shapes):
        for j, m in enumerate(state.model_names):
            access[i, j] = not s.models or m in s.models
    return _Columns(
        cpu=np.array([s.cpu_milli for s in typical.shapes], dtype=np.int64),
        milli=np.array([s.gpu_milli for s in typical.shapes], dtype=np.int64),
        num=np.array([s.num_gpu for s in typical.shapes], dtype=np.int64),
        prob=np.array(typical.probs, dtype=np.float64),
        access=access,
    )


def _frag(
    cols: _Columns,
    access: npt.NDArray[np.bool_],
    cpu: st.IntArray,
    total: st.IntArray,
    count: st.IntArray,
    part: st.IntArray,
) -> FloatArray:
    """Expected fragment milli per state; inputs broadcast to (T, ...) by the caller.

    ``count``: GPUs with room for one GPU of the shape; ``part``: milli on the others.
    """
    gpu_shape = (cols.milli > 0).reshape((-1,) + (1,) * (cpu.ndim - 1))
    need_cpu = cols.cpu.reshape(gpu_shape.shape)
    need_num = cols.num.reshape(gpu_shape.shape)
    fits = gpu_shape & access & (cpu >= need_cpu) & (count >= need_num)
    per_shape = np.where(fits, part, total)
    prob = cols.prob.reshape(gpu_shape.shape)
    return np.asarray((prob * per_shape).sum(axis=0), dtype=np.float64)


def _counts(cols: _Columns, gpu_left: st.IntArray) -> tuple[st.IntArray, st.IntArray]:
    """(count, part) per (shape, node) for GPU rows ``gpu_left`` of shape (S, 8)."""
    milli = cols.milli[:, None, None]
    room = gpu_left[None, :, :] >= milli
    count = room.sum(axis=2)
    part = np.where(room, 0, gpu_left[None, :, :]).sum(axis=2)
    return count, part


def node_fragmentation(
    typical: TypicalWorkload, state: st.ClusterState, nodes: st.IntArray | None = None
) -> FloatArray:
    """Expected fragment milli-GPU of each node (all nodes when ``nodes`` is None)."""
    idx = np.arange(len(state)) if nodes is None else nodes
    return _Fragmenter(typical, state).current(idx)


class _Fragmenter:
    """Fragmentation of nodes now and after a hypothetical placement."""

    def __init__(self, typical: TypicalWorkload, state: st.ClusterState) -> None:
        self.cols = _columns(typical, state)
        self.state = state

    def _access(self, nodes: st.IntArray) -> npt.NDArray[np.bool_]:
        return self.cols.access[:, self.state.model[nodes]]  # model -1 → last column

    def current(self, nodes: st.IntArray) -> FloatArray:
        gl = self.state.gpu_left[nodes]
        count, part = _counts(self.cols, gl)
        cpu = self.state.cpu_left[nodes][None, :]
        total = gl.sum(axis=1)[None, :]
        return _frag(self.cols, self._access(nodes), cpu, total, count, part)

    def after_node(self, task: st.Task, nodes: st.IntArray) -> FloatArray:
        """After a CPU or whole-GPU task (it takes fully free GPUs: ``part`` is unchanged)."""
        gl = self.state.gpu_left[nodes]
        count, part = _counts(self.cols, gl)
        if task.gpu_total:
            count = count - task.num_gpu
        cpu = (self.state.cpu_left[nodes] - task.cpu_milli)[None, :]
        total = (gl.sum(axis=1) - task.gpu_total)[None, :]
        return _frag(self.cols, self._access(nodes), cpu, total, count, part)

    def after_gpu(self, task: st.Task, nodes: st.IntArray) -> FloatArray:
        """(S, 8): after a sharing task on each GPU; -inf where the GPU lacks room."""
        gl = self.state.gpu_left[nodes]
        count, part = _counts(self.cols, gl)
        milli = self.cols.milli[:, None, None]
        old = gl[None, :, :]
        new = old - task.gpu_milli
        count3 = count[:, :, None] - (old >= milli) + (new >= milli)
        part3 = part[:, :, None] - np.where(old < milli, old, 0) + np.where(new < milli, new, 0)
        cpu = (self.state.cpu_left[nodes] - task.cpu_milli)[None, :, None]
        total = (gl.sum(axis=1) - task.gpu_milli)[None, :, None]
        access = self._access(nodes)[:, :, None]
        after = _frag(self.cols, access, cpu, total, count3, part3)
        return np.where(gl >= task.gpu_milli, after, -np.inf)


def sigmoid_score(delta: FloatArray) -> FloatArray:
    return np.floor(100.0 / (1.0 + np.exp(-delta / 1000.0)))


def shape_key(task: st.Task) -> tuple[int, int, int, frozenset[str]]:
    """What a node-local score of ``task`` depends on (memory is not part of it)."""
    return (task.cpu_milli, task.num_gpu, task.gpu_milli, task.models)


class FgdScore:
    """FGD node score against a typical workload (see module docstring)."""

    name = "FGD"

    def __init__(self, typical: TypicalWorkload) -> None:
        self.typical = typical
        self._cache = cache.ScoreCache()
        self._frag: _Fragmenter | None = None

    def fragmenter(self, state: st.ClusterState) -> _Fragmenter:
        if self._frag is None or self._frag.state is not state:
            self._frag = _Fragmenter(self.typical, state)
        return self._frag

    def score(self, task: st.Task, state: st.ClusterState, nodes: st.IntArray) -> plugins.Scores:
        frag = self.fragmenter(state)

        def compute(sub: st.IntArray) -> plugins.Scores:
            before = frag.current(sub)
            if not task.sharing:
                value = sigmoid_score(before - frag.after_node(task, sub))
                return plugins.Scores(value, np.full(len(sub), -1, dtype=np.int64))
            after = frag.after_gpu(task, sub)
            per_gpu = np.where(np.isfinite(after), sigmoid_score(before[:, None] - after), -1.0)
            gpu = per_gpu.argmax(axis=1).astype(np.int64)  # first best GPU, as the reference
            return plugins.Scores(per_gpu.max(axis=1), gpu)

        return self._cache.scores(shape_key(task), state, nodes, compute)

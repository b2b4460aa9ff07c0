"""The node packer: filter feasible nodes, score them with one plugin, pick, reserve.

Phases for one task (the node-level mirror of ``cycle.schedule``):
1. filter  — ``ClusterState.feasible``: CPU, memory, GPU model, GPUs with room; then
             the plugin's own ``allowed`` when it is a ``NodeFilter`` (TauGrid's CPU
             hold).
2. score   — the ``NodeScorer`` plugin scores each feasible node (higher is better).
3. pick    — the best score; ties break by ``tie_break``: ``"first"`` (lowest node
             index), ``"last"`` (highest) or ``"random"`` (uniform among the tied nodes
             with the seeded ``tie_rng``, as kube-scheduler's ``selectHost``).
4. reserve — the task's GPUs: the plugin's GPU for a sharing task, else best fit;
             the first fully free GPUs for a whole-GPU task. ``ClusterState.apply``.

Deterministic: same state, task, plugin and seed → same placement.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from taugrid.scheduling.packing import default, fgd, plugins
from taugrid.scheduling.packing import state as st

__all__ = ["POLICIES", "TIE_BREAKS", "Packer", "make_scorer"]

TIE_BREAKS = ("first", "last", "random")
#: Names accepted by ``make_scorer``, in the order benchmarks report them.
POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD", "TauGrid")


def make_scorer(
    name: str,
    *,
    seed: int = 0,
    typical: fgd.TypicalWorkload | None = None,
    every_shape: fgd.TypicalWorkload | None = None,
) -> plugins.NodeScorer:
    """Build a plugin by name; FGD and TauGrid need the typical workload.

    ``every_shape`` (TauGrid only): the workload's full shape distribution.
    """
    if name in ("FGD", "TauGrid") and typical is None:
        raise ValueError(f"{name} needs a typical workload (TypicalWorkload.from_tasks)")
    if name == "Random":
        return plugins.RandomScore(seed)
    if name == "DotProd":
        return plugins.DotProductScore()
    if name == "GpuClustering":
        return plugins.GpuClusteringScore()
    if name == "GpuPacking":
        return plugins.GpuPackingScore()
    if name == "BestFit":
        return plugins.BestFitScore()
    if name == "FGD" and typical is not None:
        return fgd.FgdScore(typical)
    if name == "TauGrid" and typical is not None:
        return default.TauGridScore(typical, every_shape)
    raise ValueError(f"unknown packing policy {name!r}; choose one of {', '.join(POLICIES)}")


@dataclasses.dataclass
class Packer:
    """Places tasks one at a time on a ``ClusterState`` with one score plugin."""

    scorer: plugins.NodeScorer
    tie_break: str = "first"
    tie_rng: np.random.Generator | None = None

    def __post_init__(self) -> None:
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, not {self.tie_break!r}")
        if self.tie_break == "random" and self.tie_rng is None:
            raise ValueError('tie_break="random" needs a seeded tie_rng')
        # Decided once: choose() runs for every task of a replay.
        self._filter = self.scorer if isinstance(self.scorer, plugins.NodeFilter) else None

    def choose(self, task: st.Task, state: st.ClusterState) -> st.Placement | None:
        """Phases 1-3 and the GPU choice; ``None`` when the task fits nowhere."""
        nodes = state.feasible(task)
        if self._filter is not None and len(nodes):
            nodes = nodes[self._filter.allowed(task, state, nodes)]
        if len(nodes) == 0:
            return None
        scores = self.scorer.score(task, state, nodes)
        best = np.flatnonzero(scores.value == scores.value.max())
        pick = int(self._tie(best))
        node = int(nodes[pick])
        if task.gpu_total == 0:
            return st.Placement(node, ())
        row = state.gpu_left[node]
        if not task.sharing:
            return st.Placement(node, st.exclusive_gpus(row, task.num_gpu))
        gpu = int(scores.gpu[pick])
        if gpu < 0:
            gpu = int(plugins.best_fit_gpu(task, row[None, :])[0])
        return st.Placement(node, (gpu,))

    def _tie(self, best: st.IntArray) -> int:
        if self.tie_break == "last":
            return int(best[-1])
        if self.tie_break == "random" and self.tie_rng is not None:
            return int(best[self.tie_rng.integers(len(best))])
        return int(best[0])

    def place(self, task: st.Task, state: st.ClusterState) -> st.Placement | None:
        """Choose and reserve (phase 4); ``None`` (state untouched) when nothing fits."""
        placement = self.choose(task, state)
        if placement is not None:
            state.apply(task, placement)
        return placement

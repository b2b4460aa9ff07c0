"""Node binding on the live path: a run's workers → nodes of its cluster, by the packer.

The cycle (``cycle.schedule``) picks a cluster; this module picks the node of every
worker on it with the same packer and score the openb simulator measures (TauGrid's
``default.TauGridScore``), so the hub binds workers where the benchmarked policy would,
and the agent pins them there.

Vocabulary and approximations (an agent report is coarser than the simulator's state):
- A node's capacity is what it reports *free* now (CPU and memory have no totals in a
  report); its GPUs are ``gpus_total`` devices, of which ``floor(gpus_free)`` are whole
  and free, the fraction of one more is free in part, and the rest are taken.
- Only the nodes where a worker fits now are scored. A node with more than
  ``state.MAX_GPUS`` GPUs makes ``bind`` return ``None``: the caller falls back to
  first fit, which is what the hub did before node binding.
- The typical workload (what FGD keeps room for) is a fixed prior per cluster
  (``workload_for``): whole-GPU tasks of 1, 2, 4, ... GPUs up to the cluster's largest
  node, equally likely. It does not depend on which runs happen to be pending in a
  tick, so a binding depends only on the cluster's state and the run — the hub and a
  simulator replaying the same reports bind alike, however runs are grouped in ticks.

Pure: no I/O, no clock; same inputs → same bindings.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from taugrid.scheduling import snapshot as snap
from taugrid.scheduling.packing import default, fgd, packer
from taugrid.scheduling.packing import state as st

__all__ = ["bind", "task_of", "workload_for"]

_MIB = 2**20


def task_of(run: snap.PendingRun) -> st.Task | None:
    """One worker of ``run`` as a packing task; ``None`` when it asks for no GPUs."""
    gpus = run.gpus_per_worker
    if gpus <= 0:
        return None
    whole = gpus >= 1
    if whole and gpus != int(gpus):
        return None  # more than one GPU, not whole: not a shape the packer knows
    models = frozenset({run.gpu_model}) if run.gpu_model else frozenset()
    return st.Task(
        name=run.run_id,
        cpu_milli=math.ceil(run.cpus_per_worker * 1000),
        memory_mib=math.ceil(run.memory_per_worker / _MIB),
        num_gpu=int(gpus) if whole else 1,
        gpu_milli=st.MILLI if whole else round(gpus * st.MILLI),
        models=models,
    )


@functools.cache
def workload_for(largest: int) -> fgd.TypicalWorkload:
    """Whole-GPU tasks of 1, 2, 4, ... GPUs (up to ``largest``), equally likely."""
    sizes = [1 << k for k in range(max(1, largest).bit_length()) if 1 << k <= largest] or [1]
    shapes = tuple(fgd.Shape(0, st.MILLI, n) for n in sizes)
    return fgd.TypicalWorkload(shapes, tuple(1.0 / len(shapes) for _ in shapes))


def _state(nodes: Sequence[snap.NodeView]) -> st.ClusterState | None:
    if any(n.gpus_total > st.MAX_GPUS or n.gpus_total != int(n.gpus_total) for n in nodes):
        return None
    state = st.ClusterState(
        [n.node_id for n in nodes],
        [math.floor(n.cpus_free * 1000) if n.usable else 0 for n in nodes],
        [math.floor(n.memory_free / _MIB) if n.usable else 0 for n in nodes],
        [int(n.gpus_total) for n in nodes],
        [n.gpu_model or "" for n in nodes],
    )
    for i, n in enumerate(nodes):
        free = max(0.0, min(n.gpus_free, n.gpus_total)) if n.usable else 0.0
        whole = math.floor(free)
        row = np.zeros(st.MAX_GPUS, dtype=np.int64)
        row[:whole] = st.MILLI
        if whole < int(n.gpus_total):
            row[whole] = round((free - whole) * st.MILLI)
        state.gpu_left[i] = row
    return state


def bind(run: snap.PendingRun, cluster: snap.ClusterView) -> tuple[str, ...] | None:
    """The node ID of each of ``run``'s workers on ``cluster``, chosen by the packer.

    ``None`` when the packer does not apply (no GPUs asked, a node shape it cannot
    model) or a worker fits nowhere: the caller then binds first fit.
    """
    task = task_of(run)
    # Only nodes that can take a worker now: the packer's choice is among them anyway,
    # and a 100-node cluster is then scored over a few candidates, not every node.
    fits = [n for n in cluster.nodes if snap.node_slots(n, run.shape) >= 1]
    state = _state(fits) if task is not None and fits else None
    if task is None or state is None:
        return None
    workload = workload_for(int(max(n.gpus_total for n in cluster.nodes)))
    chooser = packer.Packer(default.TauGridScore(workload))
    nodes = []
    for _ in range(run.workers):
        placed = chooser.place(task, state)
        if placed is None:
            return None
        nodes.append(state.names[placed.node])
    return tuple(nodes)

"""Memo of node scores that depend only on the node's own state and the task's shape.

A score such as FGD's is a function of (task shape, node state). ``ClusterState.version``
is bumped whenever a node changes, so a cached score stays valid while the node's
version is the one it was computed at. Between two tasks of the same shape only the
few nodes touched in between are rescored — this is what makes FGD affordable on a
small machine (1,500 nodes x 35 typical shapes x 8 GPUs per task otherwise).
The cache belongs to one ``ClusterState`` at a time and resets when given another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable

import numpy as np
import numpy.typing as npt

from taugrid.scheduling.packing import plugins
from taugrid.scheduling.packing import state as st

__all__ = ["ScoreCache"]


@dataclasses.dataclass
class _Entry:
    value: npt.NDArray[np.float64]
    gpu: st.IntArray
    seen: st.IntArray


class ScoreCache:
    """Per (shape key, node): the last score and the node version it belongs to."""

    def __init__(self) -> None:
        self._state: st.ClusterState | None = None
        self._entries: dict[Hashable, _Entry] = {}

    def scores(
        self,
        key: Hashable,
        state: st.ClusterState,
        nodes: st.IntArray,
        compute: Callable[[st.IntArray], plugins.Scores],
    ) -> plugins.Scores:
        """Scores of ``nodes``; ``compute`` runs only for nodes changed since last time."""
        if self._state is not state:
            self._state, self._entries = state, {}
        entry = self._entries.get(key)
        if entry is None:
            n = len(state)
            entry = _Entry(np.zeros(n), np.full(n, -1, np.int64), np.full(n, -1, np.int64))
            self._entries[key] = entry
        stale = nodes[entry.seen[nodes] != state.version[nodes]]
        if len(stale):
            fresh = compute(stale)
            entry.value[stale] = fresh.value
            entry.gpu[stale] = fresh.gpu
            entry.seen[stale] = state.version[stale]
        return plugins.Scores(entry.value[nodes], entry.gpu[nodes])

"""GPU utilisation per region over time, sampled from the agents' reports by the hub.

Owns the in-memory history behind ``GET /v1/admin/utilization`` (the portal's
utilisation chart). ``record(hub, region)`` is called when an agent's sync brings a full
report; it reads the last reports of that region's clusters and appends, when the
region has GPUs and its last sample is at least ``SAMPLE_S`` old, the utilisation as
``hub.metrics.metrics_state.gpu_utilization`` computes it (``source`` ``nvml``: measured on
the devices; ``allocation``: the share of GPUs
allocated, for emulated GPUs), weighted by GPU count like ``tau_region_gpu_utilization``.

Kept for ``KEEP_S`` (older samples drop off); not persisted: a restarted hub starts a
new history (Prometheus scraping ``/metrics`` keeps the long one).
"""

from __future__ import annotations

import collections
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from taugrid.hub.metrics import metrics_state

if TYPE_CHECKING:
    from taugrid.hub.core import context

__all__ = ["KEEP_S", "SAMPLE_S", "History", "of", "record"]

SAMPLE_S = 5.0
KEEP_S = 24 * 3600.0


class History:
    """Samples ``(ts, busy GPUs, total GPUs, utilisation, source)`` per region."""

    def __init__(self, hub: context.Hub, clock: Callable[[], float] = time.time) -> None:
        self.hub = hub
        self.clock = clock
        self._lock = threading.Lock()
        self._regions: dict[str, collections.deque[tuple[float, float, float, float, str]]] = {}

    def record(self, region: str) -> None:
        """Sample ``region`` from its clusters' last reports, unless it was sampled less
        than ``SAMPLE_S`` ago. Only that region's clusters are read: a fleet's reports
        arrive many a second, and reading every cluster for each cost O(clusters²)."""
        now = self.clock()
        with self._lock:
            if not self._due(region, now):
                return
        busy = total = weighted = 0.0
        source = ""
        for c in self.hub.clusters.in_region(region):
            r = c["report"] or {}
            b, free = float(r.get("gpu_busy", 0)), float(r.get("gpu_free", 0))
            if c["state"] != "ready" or b + free == 0:
                continue
            value, kind = metrics_state.gpu_utilization(r)
            busy, total, weighted = busy + b, total + b + free, weighted + value * (b + free)
            if kind == "allocation" or not source:
                source = kind  # one emulated cluster makes the region's figure allocation
        if not total:
            return
        with self._lock:
            if not self._due(region, now):
                return  # another report sampled it meanwhile
            q = self._regions.setdefault(region, collections.deque())
            q.append((now, busy, total, weighted / total, source))
            while q and q[0][0] < now - KEEP_S:
                q.popleft()

    def _due(self, region: str, now: float) -> bool:
        """No sample of ``region`` in the last ``SAMPLE_S`` (call with the lock held)."""
        q = self._regions.get(region)
        return not q or now - q[-1][0] >= SAMPLE_S

    def series(self) -> dict[str, Any]:
        """``{"sample_s", "regions": {region: [{ts, busy, total, utilization, source}]}}``."""
        with self._lock:
            regions = {
                name: [
                    {"ts": ts, "busy": b, "total": t, "utilization": u, "source": s}
                    for ts, b, t, u, s in q
                ]
                for name, q in sorted(self._regions.items())
            }
        return {"sample_s": SAMPLE_S, "keep_s": KEEP_S, "regions": regions}


_BY_HUB: weakref.WeakKeyDictionary[Any, History] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


def of(hub: context.Hub) -> History:
    """The history of ``hub`` (made on first use)."""
    with _GUARD:
        h = _BY_HUB.get(hub)
        if h is None:
            h = _BY_HUB[hub] = History(hub)
        return h


def record(hub: context.Hub, region: str) -> None:
    """Sample ``region``, whose agent just reported (at most once per ``SAMPLE_S``)."""
    of(hub).record(region)

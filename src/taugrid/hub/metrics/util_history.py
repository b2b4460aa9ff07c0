"""GPU utilisation per region over time, sampled from the agents' reports by the hub.

Owns the in-memory history behind ``GET /v1/admin/utilization`` (the portal's
utilisation chart). ``record(hub, region)`` is called when an agent's sync brings a full
report; every ``SAMPLE_S`` it reads the last reports of every cluster (a region's first
report: that region's at once) and appends, for each region with GPUs, the utilisation as
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
        self._seen: set[str] = set()
        self._fleet_at = 0.0

    def record(self, region: str) -> None:
        """Sample when due: every region from one read of the clusters every
        ``SAMPLE_S``, and a region never sampled at once, alone (its first point does
        not wait for the next round). A fleet's reports arrive hundreds a second: one
        read per report (or per region and ``SAMPLE_S``) was 13 % of a hub serving
        1,000 regions."""
        now = self.clock()
        with self._lock:
            first = region not in self._seen
            fleet = not first and now - self._fleet_at >= SAMPLE_S
            if first:
                self._seen.add(region)
            if fleet:
                self._fleet_at = now  # claimed: one reader per round
        if first:
            self._sample(now, {region: self.hub.clusters.in_region(region)})
        elif fleet:
            by_region: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
            for c in self.hub.clusters.all():
                by_region[str(c["region"])].append(c)
            self._sample(now, by_region)

    def _sample(self, now: float, by_region: dict[str, list[dict[str, Any]]]) -> None:
        """Append each region's utilisation from its clusters' last reports (a region
        without GPUs, or sampled less than ``SAMPLE_S`` ago, gets no point)."""
        for region, clusters in by_region.items():
            point = _utilisation(clusters)
            if point is None:
                continue
            with self._lock:
                if not self._due(region, now):
                    continue
                q = self._regions.setdefault(region, collections.deque())
                q.append((now, *point))
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


def _utilisation(clusters: list[dict[str, Any]]) -> tuple[float, float, float, str] | None:
    """(busy GPUs, total GPUs, utilisation, source) of ready clusters' reports, weighted
    by GPU count; None without GPUs."""
    busy = total = weighted = 0.0
    source = ""
    for c in clusters:
        r = c["report"] or {}
        b, free = float(r.get("gpu_busy", 0)), float(r.get("gpu_free", 0))
        if c["state"] != "ready" or b + free == 0:
            continue
        value, kind = metrics_state.gpu_utilization(r)
        busy, total, weighted = busy + b, total + b + free, weighted + value * (b + free)
        if kind == "allocation" or not source:
            source = kind  # one emulated cluster makes the region's figure allocation
    return (busy, total, weighted / total, source) if total else None


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

"""Prometheus metrics of the hub (``GET /metrics``, text exposition format).

Histograms are observed where the events happen (``observe_*``); gauges are computed
from the store at scrape time so they are never stale:
- ``tau_scheduling_latency_seconds``: submit → placed (first placement of an attempt)
- ``tau_startup_latency_seconds``: placed → running
- ``tau_runs``: runs by state
- ``tau_cluster_gpus`` / ``tau_cluster_gpu_utilization``: per cluster, from agent reports
- ``tau_attempt_failures_total``: failed attempts by failure kind
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import prometheus_client as prom

if TYPE_CHECKING:
    from taugrid.hub import context

__all__ = ["Metrics"]

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800)


class Metrics:
    """One registry per hub (tests run several hubs in one process)."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub
        self.registry = prom.CollectorRegistry()
        self.scheduling = prom.Histogram(
            "tau_scheduling_latency_seconds",
            "Submit to placed",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.startup = prom.Histogram(
            "tau_startup_latency_seconds",
            "Placed to running",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.failures = prom.Counter(
            "tau_attempt_failures", "Failed attempts", ["kind"], registry=self.registry
        )
        self.runs = prom.Gauge("tau_runs", "Runs by state", ["state"], registry=self.registry)
        self.gpus = prom.Gauge(
            "tau_cluster_gpus",
            "GPUs by cluster and use",
            ["cluster", "use"],
            registry=self.registry,
        )
        self.util = prom.Gauge(
            "tau_cluster_gpu_utilization", "Busy / total GPUs", ["cluster"], registry=self.registry
        )

    def render(self) -> bytes:
        self._refresh()
        return bytes(prom.generate_latest(self.registry))

    def _refresh(self) -> None:
        for state, n in self.hub.runs.count_by_state().items():
            self.runs.labels(state=state).set(n)
        for c in self.hub.clusters.all():
            r = c["report"]
            busy, free = float(r.get("gpu_busy", 0)), float(r.get("gpu_free", 0))
            self.gpus.labels(cluster=c["id"], use="busy").set(busy)
            self.gpus.labels(cluster=c["id"], use="free").set(free)
            self.util.labels(cluster=c["id"]).set(busy / (busy + free) if busy + free else 0.0)

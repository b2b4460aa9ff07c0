"""Prometheus metrics of the hub (``GET /metrics``, text exposition format).

Histograms are observed where the events happen (``observe_*``); gauges are computed
from the store at scrape time so they are never stale:
- ``tau_scheduling_latency_seconds``: submit → placed (first placement of an attempt)
- ``tau_startup_latency_seconds``: placed → running
- ``tau_runs``: runs by state
- ``tau_cluster_gpus`` / ``tau_cluster_gpu_utilization``: per cluster, from agent reports;
  ``tau_region_gpu_utilization``: the same summed over a region's clusters
- ``tau_attempt_failures_total``: failed attempts by failure kind
- ``tau_cross_region_operations_total`` / ``tau_cross_region_failure_ratio``: operations
  that cross regions, by ``kind`` — ``transfer`` (a dataset copied between regions) and
  ``failover`` (an attempt that continues a run in another region than its previous
  attempt) — and their outcome; the ratio is failed / ended over the last
  ``CROSS_REGION_WINDOW_S`` (cancelled or preempted attempts are not outcomes).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import prometheus_client as prom
from prometheus_client import core as prom_core
from prometheus_client import registry as prom_registry

from taugrid.lifecycle import states as st
from taugrid.store import data as store_data

if TYPE_CHECKING:
    from taugrid.hub import context

__all__ = ["CROSS_REGION_WINDOW_S", "Metrics", "cross_region_outcomes"]

CROSS_REGION_WINDOW_S = 3600.0
_OUTCOME = {
    "done": "ok",
    "failed": "failed",
    st.AttemptState.SUCCEEDED.value: "ok",
    st.AttemptState.FAILED.value: "failed",
}

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
        self.region_util = prom.Gauge(
            "tau_region_gpu_utilization", "Busy / total GPUs", ["region"], registry=self.registry
        )
        self.registry.register(_CrossRegion(hub))

    def render(self) -> bytes:
        self._refresh()
        return bytes(prom.generate_latest(self.registry))

    def _refresh(self) -> None:
        for state, n in self.hub.runs.count_by_state().items():
            self.runs.labels(state=state).set(n)
        regions: dict[str, tuple[float, float]] = {}
        for c in self.hub.clusters.all():
            r = c["report"]
            busy, free = float(r.get("gpu_busy", 0)), float(r.get("gpu_free", 0))
            self.gpus.labels(cluster=c["id"], use="busy").set(busy)
            self.gpus.labels(cluster=c["id"], use="free").set(free)
            self.util.labels(cluster=c["id"]).set(_ratio(busy, free))
            b, f = regions.get(c["region"], (0.0, 0.0))
            regions[c["region"]] = (b + busy, f + free)
        for region, (busy, free) in regions.items():
            self.region_util.labels(region=region).set(_ratio(busy, free))


def _ratio(busy: float, free: float) -> float:
    return busy / (busy + free) if busy + free else 0.0


def cross_region_outcomes(hub: context.Hub) -> list[tuple[str, str, float]]:
    """``(kind, "ok" | "failed", ended_at)`` of every ended cross-region operation."""
    region = {c["id"]: c["region"] for c in hub.clusters.all()}
    out = [
        ("transfer", _OUTCOME[x["state"]], float(x["ended_at"] or 0.0))
        for x in store_data.DataStore(hub.engine).transfers(("done", "failed"))
    ]
    for a in hub.runs.moved_attempts():
        crossed = region.get(a["cluster_id"]) != region.get(a["prev_cluster_id"])
        if crossed and a["state"] in _OUTCOME:
            out.append(("failover", _OUTCOME[a["state"]], float(a["ended_at"])))
    return out


class _CrossRegion(prom_registry.Collector):
    """Cross-region operations and their failure ratio, read from the store at scrape."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub

    def collect(self) -> Iterator[prom_core.Metric]:
        total = prom_core.CounterMetricFamily(
            "tau_cross_region_operations",
            "Ended operations that cross regions",
            labels=["kind", "result"],
        )
        ratio = prom_core.GaugeMetricFamily(
            "tau_cross_region_failure_ratio",
            f"Failed / ended cross-region operations, last {CROSS_REGION_WINDOW_S:.0f} s",
            labels=["kind"],
        )
        outcomes = cross_region_outcomes(self.hub)
        since = time.time() - CROSS_REGION_WINDOW_S
        for kind in ("transfer", "failover"):
            mine = [(res, at) for k, res, at in outcomes if k == kind]
            for res in ("ok", "failed"):
                total.add_metric([kind, res], sum(1 for r, _ in mine if r == res))
            recent = [r for r, at in mine if at >= since]
            ratio.add_metric([kind], recent.count("failed") / len(recent) if recent else 0.0)
        yield from (total, ratio)

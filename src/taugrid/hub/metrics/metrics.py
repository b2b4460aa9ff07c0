"""Prometheus metrics of the hub (``GET /metrics``, text exposition format).

Histograms are observed where the events happen; gauges are computed from the store at
scrape time so they are never stale (runs, clusters, GPUs, nodes: ``hub.metrics.metrics_state``;
links: ``hub.api.data_api``). Labels: ``run_id``/``workspace``/``region`` wherever a series
is about one. Alert rules and dashboards over these: ``taugrid.observability``.
- ``tau_scheduling_latency_seconds{workspace,region}``: submit → placed (a run's first
  placement; region = where it was placed)
- ``tau_scheduler_tick_seconds``: time of one scheduling cycle
- ``tau_startup_latency_seconds``: placed → running
- ``tau_attempt_failures_total``: failed attempts by failure kind
- ``tau_cross_region_operations_total`` / ``tau_cross_region_failure_ratio``: operations
  that cross regions, by ``kind`` — ``transfer`` (a dataset copied between regions) and
  ``failover`` (an attempt that continues a run in another region than its previous
  attempt) — and their outcome; the ratio is failed / ended over the last
  ``CROSS_REGION_WINDOW_S`` (cancelled or preempted attempts are not outcomes).
- cost per run, workspace (and month to date) and team: ``hub.metrics.metrics_cost``
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import prometheus_client as prom
from prometheus_client import core as prom_core
from prometheus_client import registry as prom_registry

from taugrid.hub.metrics import metrics_cost, metrics_state
from taugrid.lifecycle import states as st
from taugrid.store import data as store_data

if TYPE_CHECKING:
    from taugrid.hub.core import context

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
            "Submit to placed (a run's first placement; region: where it was placed)",
            ["workspace", "region"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.tick = prom.Histogram(
            "tau_scheduler_tick_seconds",
            "Time of one scheduling cycle",
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
        self.registry.register(_CrossRegion(hub))
        self.run_state = metrics_state.RunCollector(hub)
        self.registry.register(self.run_state)
        self.registry.register(metrics_state.ClusterCollector(hub))
        self.registry.register(metrics_cost.CostCollector(hub))

    def observe_scheduling(self, run: dict[str, Any], cluster_id: str) -> None:
        """A run's first placement, on ``cluster_id``, now."""
        cluster = self.hub.clusters.get(cluster_id)
        region = cluster["region"] if cluster else ""
        self.scheduling.labels(workspace=run["workspace"], region=region).observe(
            max(0.0, time.time() - float(run["created_at"]))
        )

    def render(self) -> bytes:
        return bytes(prom.generate_latest(self.registry))


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

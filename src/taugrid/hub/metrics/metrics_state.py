"""Scrape-time metrics of the hub's current state, read from the store on every scrape.

Collectors (never stale: a run or node that goes away drops its series):
- ``tau_runs{state,workspace}``: runs by state
- ``tau_run_info{run_id,workspace,region,team,state}`` (1), ``tau_run_gpus``,
  ``tau_run_attempts``, ``tau_run_last_step``: one series per run that has not ended
- ``tau_run_progress_age_seconds{run_id,workspace,region}``: for a running run, the time
  since its last sign of progress — the latest of its last metric, its last event and
  the start of its current attempt (a stalled run's age grows)
- ``tau_cluster_up{cluster,region}``: 1 while the cluster's agent holds its lease
- ``tau_cluster_gpus{cluster,region,use}``: GPUs busy/free from agent reports
- ``tau_cluster_gpu_utilization`` / ``tau_region_gpu_utilization`` ``{source}``:
  ``source="nvml"`` is the device utilisation an agent measured (``gpu_utilization`` in
  its report); otherwise — and always for emulated GPUs — ``source="allocation"``, the
  share of GPUs allocated to jobs, which says nothing about how busy the devices are;
  a cluster or region without GPUs has no utilisation series (undefined, not low)
- ``tau_node_unhealthy{cluster,region,node,reason}`` (1) and
  ``tau_nodes{cluster,region,health}``: nodes with an open mark (fault or cordon, reason =
  its kind), or that the agent reports dead (``not_alive``) or faulty (``agent_fault``)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import core as prom_core
from prometheus_client import registry as prom_registry

from taugrid.lifecycle import states as st

if TYPE_CHECKING:
    from taugrid.hub.core import context

__all__ = ["ClusterCollector", "RunCollector", "gpu_utilization"]

_GAUGE = prom_core.GaugeMetricFamily
_RUN = ["run_id", "workspace", "region"]
_UTIL_HELP = (
    "GPU utilisation 0..1. source=nvml: measured device utilisation (NVML); "
    "source=allocation: share of GPUs allocated to jobs (emulated GPUs, or no NVML "
    "reading), not device utilisation"
)


class RunCollector(prom_registry.Collector):
    """Runs by state and workspace, and one series set per run that has not ended."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub
        self.clock: Callable[[], float] = time.time  # a seam for tests

    def collect(self) -> Iterator[prom_core.Metric]:
        runs = _GAUGE("tau_runs", "Runs by state", labels=["state", "workspace"])
        for (state, ws), n in sorted(self.hub.runs.count_by_state_workspace().items()):
            runs.add_metric([state, ws], n)
        info = _GAUGE(
            "tau_run_info", "A run that has not ended (1)", labels=[*_RUN, "team", "state"]
        )
        gpus = _GAUGE("tau_run_gpus", "GPUs a run asks for", labels=_RUN)
        attempts = _GAUGE("tau_run_attempts", "Attempts a run has used", labels=_RUN)
        step = _GAUGE("tau_run_last_step", "Last step the current attempt reported", labels=_RUN)
        age = _GAUGE(
            "tau_run_progress_age_seconds",
            "Seconds since a running run's last metric, event or attempt start",
            labels=_RUN,
        )
        region = {c["id"]: c["region"] for c in self.hub.clusters.all()}
        now = self.clock()
        for r in self.hub.runs.live_runs():
            labels = [r["id"], r["workspace"], region.get(r["cluster_id"] or "", "")]
            info.add_metric([*labels, r["team"], r["state"]], 1)
            gpus.add_metric(labels, r["gpus"])
            attempts.add_metric(labels, r["attempts_used"])
            if r["last_step"] is not None:
                step.add_metric(labels, r["last_step"])
            if r["state"] == st.RunState.RUNNING.value:
                marks = (r["started_at"], r["last_metric_at"], r["last_event_at"])
                last = max((float(m) for m in marks if m is not None), default=now)
                age.add_metric(labels, max(0.0, now - last))
        yield from (runs, info, gpus, attempts, step, age)


def gpu_utilization(report: dict[str, Any]) -> tuple[float, str]:
    """``(utilisation 0..1, source)`` of one cluster's report (see the module docstring)."""
    measured = report.get("gpu_utilization")
    if measured is not None and not report.get("emulated_gpus"):
        return float(measured), "nvml"
    busy, free = float(report.get("gpu_busy", 0)), float(report.get("gpu_free", 0))
    return (busy / (busy + free) if busy + free else 0.0), "allocation"


class ClusterCollector(prom_registry.Collector):
    """Clusters, their GPUs and utilisation, regions, and unhealthy nodes."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub

    def collect(self) -> Iterator[prom_core.Metric]:
        up = _GAUGE(
            "tau_cluster_up", "1 while the agent holds its lease", labels=["cluster", "region"]
        )
        gpus = _GAUGE("tau_cluster_gpus", "GPUs by use", labels=["cluster", "region", "use"])
        util = _GAUGE(
            "tau_cluster_gpu_utilization", _UTIL_HELP, labels=["cluster", "region", "source"]
        )
        regions: dict[tuple[str, str], tuple[float, float]] = {}
        clusters = self.hub.clusters.all()
        for c in clusters:
            r, labels = c["report"], [c["id"], c["region"]]
            up.add_metric(labels, 1 if c["state"] == "ready" else 0)
            busy, free = float(r.get("gpu_busy", 0)), float(r.get("gpu_free", 0))
            gpus.add_metric([*labels, "busy"], busy)
            gpus.add_metric([*labels, "free"], free)
            if busy + free == 0:
                continue  # no GPUs: utilisation is undefined, not low
            value, source = gpu_utilization(r)
            util.add_metric([*labels, source], value)
            weighted, total = regions.get((c["region"], source), (0.0, 0.0))
            regions[(c["region"], source)] = (weighted + value * (busy + free), total + busy + free)
        region_util = _GAUGE("tau_region_gpu_utilization", _UTIL_HELP, labels=["region", "source"])
        for (region, source), (weighted, total) in sorted(regions.items()):
            region_util.add_metric([region, source], weighted / total)
        yield from (up, gpus, util, region_util, *self._nodes(clusters))

    def _nodes(self, clusters: list[dict[str, Any]]) -> Iterator[prom_core.Metric]:
        bad = _GAUGE(
            "tau_node_unhealthy",
            "A node unusable for placement (1): an open mark, or dead/faulty per its agent",
            labels=["cluster", "region", "node", "reason"],
        )
        count = _GAUGE("tau_nodes", "Nodes by health", labels=["cluster", "region", "health"])
        marks: dict[tuple[str, str], str] = {}
        for m in self.hub.clusters.open_marks():
            marks.setdefault((m["cluster_id"], m["node_id"]), m["kind"])
        for c in clusters:
            reported = {str(n.get("node_id")): n for n in c["report"].get("nodes", [])}
            names = sorted(set(reported) | {n for cid, n in marks if cid == c["id"]})
            unhealthy = 0
            for node in names:
                reason = _unhealthy(marks.get((c["id"], node)), reported.get(node))
                if reason:
                    unhealthy += 1
                    bad.add_metric([c["id"], c["region"], node, reason], 1)
            count.add_metric([c["id"], c["region"], "healthy"], len(names) - unhealthy)
            count.add_metric([c["id"], c["region"], "unhealthy"], unhealthy)
        yield from (bad, count)


def _unhealthy(mark: str | None, node: dict[str, Any] | None) -> str:
    if mark:
        return mark
    if node is not None and not node.get("alive", True):
        return "not_alive"
    if node is not None and node.get("healthy") is False:
        return "agent_fault"
    return ""

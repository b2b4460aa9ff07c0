"""Cost as Prometheus metrics, computed by ``hub.tenancy.cost`` from the store at scrape time.

- ``tau_run_cost_dollars{run_id,workspace,region,kind}``: each run that has not ended
  (like the other ``tau_run_*`` series), ``kind`` ``gpu`` (GPU-hours x the pool's price)
  or ``egress`` (bytes its staging copied x the source region's price per GB)
- ``tau_workspace_cost_dollars{workspace,team,kind}``: all of a workspace's runs, ever
- ``tau_workspace_cost_month_to_date_dollars{workspace,team}``: this calendar month (UTC)
- ``tau_team_cost_dollars{team,kind}``: the team's workspaces together
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import core as prom_core
from prometheus_client import registry as prom_registry

from taugrid.hub.tenancy import cost

if TYPE_CHECKING:
    from taugrid.hub.core import context

__all__ = ["CostCollector"]

_GAUGE = prom_core.GaugeMetricFamily
_KINDS = (("gpu", "gpu_cost"), ("egress", "egress_cost"))


class CostCollector(prom_registry.Collector):
    """Cost per live run, per workspace (all time and month to date) and per team."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub

    def collect(self) -> Iterator[prom_core.Metric]:
        doc = cost.summary(self.hub, None)
        ws = _GAUGE(
            "tau_workspace_cost_dollars",
            "Cost of a workspace's runs: GPU-hours x pool price (gpu) and egress",
            labels=["workspace", "team", "kind"],
        )
        month = _GAUGE(
            "tau_workspace_cost_month_to_date_dollars",
            "Cost of a workspace's runs in the current calendar month (UTC)",
            labels=["workspace", "team"],
        )
        for row in doc["workspaces"]:
            for kind, key in _KINDS:
                ws.add_metric([row["workspace"], row["team"], kind], row[key])
            month.add_metric([row["workspace"], row["team"]], row["month_to_date"])
        team = _GAUGE(
            "tau_team_cost_dollars", "Cost of a team's workspaces", labels=["team", "kind"]
        )
        for row in doc["teams"]:
            for kind, key in _KINDS:
                team.add_metric([row["team"], kind], row[key])
        yield from (self._runs(), ws, month, team)

    def _runs(self) -> prom_core.Metric:
        out = _GAUGE(
            "tau_run_cost_dollars",
            "Cost of a run that has not ended so far, by kind (gpu, egress)",
            labels=["run_id", "workspace", "region", "kind"],
        )
        region = {c["id"]: c["region"] for c in self.hub.clusters.all()}
        used = cost.by_run(self.hub)
        for r in self.hub.runs.live_runs():
            doc = used.get(r["id"])
            if doc is None:
                continue  # nothing used yet (waiting): no series, like an unstarted attempt
            labels = [r["id"], r["workspace"], region.get(r["cluster_id"] or "", "")]
            for kind, key in _KINDS:
                out.add_metric([*labels, kind], doc[key])
        return out

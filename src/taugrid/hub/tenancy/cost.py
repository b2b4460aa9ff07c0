"""Cost of runs: GPU-hours x the pool's price plus egress, per run, workspace and team.

Prices come from the hub's effective platform (platform.yaml):

- GPU: an attempt holds its run's GPUs from ``started_at`` to ``ended_at`` (now while it
  runs); that time x the GPUs x ``cost_per_gpu_hour`` of the node pool of the cluster it
  ran on with the run's GPU model and the capacity it was placed on (spot or on-demand;
  the cluster's cheapest such pool when the run names no model). A spot attempt's
  ``saving`` is what the same GPU-hours cost on demand (its cluster's pool, else the
  platform's cheapest) less what it cost; ``spot_saving`` sums them. A cluster that is
  not in platform.yaml, or a run without GPUs, costs 0 and says so (``priced: false``).
- Egress: bytes a run's data staging copied between regions x the source region's
  ``egress_cost_per_gb`` (GB = 1e9 bytes).
- Month to date: the part of the GPU time inside the current calendar month (UTC) and
  the copies that ended in it (or are still moving).

Amounts are in the platform's currency (dollars), rounded to cents only for display.
Reads only (``store.usage``); the API (``/v1/runs/{ref}/cost``, ``/v1/cost``, the
``cost`` of ``/v1/workspaces/{name}/status``) and the metrics (``hub.metrics.metrics_cost``)
serve what this computes.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from taugrid.hub.core import pools
from taugrid.platform import models as pm
from taugrid.spec import models as sm
from taugrid.store import usage

if TYPE_CHECKING:
    from taugrid.hub.core import context

__all__ = ["by_run", "month_start", "run_cost", "summary", "workspace_cost"]

Row = dict[str, Any]
CURRENCY = "USD"
_SUMS = (
    "gpu_hours",
    "gpu_cost",
    "spot_saving",
    "egress_gb",
    "egress_cost",
    "total",
    "month_to_date",
)


def month_start(now: float) -> float:
    """The first instant of ``now``'s calendar month, UTC."""
    day = datetime.datetime.fromtimestamp(now, datetime.UTC)
    return day.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


def _egress_prices(plat: pm.Platform) -> dict[str, float]:
    return {r.name: r.egress_cost_per_gb for r in plat.regions}


def _attempt(a: Row, plat: pm.Platform, now: float, since: float) -> Row:
    capacity = (a.get("placement") or {}).get("capacity") or sm.Capacity.ON_DEMAND.value
    price = pools.price_of(plat, a["cluster_id"], a["gpu_model"], capacity) if a["gpus"] else None
    on_demand = _on_demand_price(plat, a) if capacity == sm.Capacity.SPOT.value else price
    start, end = float(a["started_at"]), float(a["ended_at"] or now)
    hours = a["gpus"] * max(0.0, end - start) / 3600
    month = a["gpus"] * max(0.0, end - max(start, since)) / 3600
    return {
        "run_id": a["run_id"],
        "workspace": a["workspace"],
        "team": a["team"],
        "number": a["number"],
        "cluster_id": a["cluster_id"],
        "gpus": a["gpus"],
        "started_at": start,
        "ended_at": a["ended_at"],
        "gpu_hours": hours,
        "capacity": capacity,
        "price_per_gpu_hour": price or 0.0,
        "priced": price is not None,
        "cost": hours * (price or 0.0),
        "saving": hours * max(0.0, (on_demand or 0.0) - (price or 0.0)),
        "month_cost": month * (price or 0.0),
    }


def _on_demand_price(plat: pm.Platform, a: Row) -> float | None:
    """What a spot attempt's GPUs cost on demand: its cluster's on-demand pool of the
    model, else the platform's cheapest on-demand pool of it (None: there is none)."""
    here = pools.price_of(plat, a["cluster_id"], a["gpu_model"])
    if here is not None:
        return here
    clusters = [c.name for r in plat.regions for c in r.clusters]
    prices = [pools.price_of(plat, c, a["gpu_model"]) for c in clusters]
    return min((p for p in prices if p is not None), default=None)


def _transfer(x: Row, egress: dict[str, float], since: float) -> Row:
    gb = float(x["bytes_done"]) / 1e9
    cost = gb * egress.get(x["src_region"], 0.0)
    this_month = x["ended_at"] is None or float(x["ended_at"]) >= since
    return {
        "run_id": x["run_id"],
        "workspace": x["workspace"],
        "team": x["team"],
        "dataset": x["dataset_id"],
        "from_region": x["src_region"],
        "to_region": x["dst_region"],
        "gb": gb,
        "price_per_gb": egress.get(x["src_region"], 0.0),
        "cost": cost,
        "month_cost": cost if this_month else 0.0,
    }


def _priced(
    hub: context.Hub, now: float, workspaces: Sequence[str] | None, run_id: str | None
) -> tuple[list[Row], list[Row]]:
    plat, since = hub.platform, month_start(now)
    attempts = [
        _attempt(a, plat, now, since) for a in usage.attempts(hub.engine, workspaces, run_id)
    ]
    egress = _egress_prices(plat)
    copies = [_transfer(x, egress, since) for x in usage.transfers(hub.engine, workspaces, run_id)]
    return attempts, copies


def _total(attempts: list[Row], copies: list[Row]) -> Row:
    gpu = sum(a["cost"] for a in attempts)
    egress = sum(x["cost"] for x in copies)
    return {
        "currency": CURRENCY,
        "gpu_hours": sum(a["gpu_hours"] for a in attempts),
        "gpu_cost": gpu,
        "spot_saving": sum(a["saving"] for a in attempts),
        "egress_gb": sum(x["gb"] for x in copies),
        "egress_cost": egress,
        "total": gpu + egress,
        "month_to_date": sum(a["month_cost"] for a in attempts)
        + sum(x["month_cost"] for x in copies),
    }


def run_cost(hub: context.Hub, run_id: str, clock: Callable[[], float] = time.time) -> Row:
    """One run's cost with the attempts and copies it is made of."""
    attempts, copies = _priced(hub, clock(), None, run_id)
    unpriced = sorted({a["cluster_id"] for a in attempts if a["gpus"] and not a["priced"]})
    return {
        "run_id": run_id,
        **_total(attempts, copies),
        "attempts": attempts,
        "transfers": copies,
        "unpriced_clusters": unpriced,
    }


def summary(
    hub: context.Hub, workspaces: Sequence[str] | None, clock: Callable[[], float] = time.time
) -> Row:
    """Cost per workspace and per team (over ``workspaces``; None: all), with the month
    to date; every workspace of the platform that is visible has a row, even at 0."""
    now = clock()
    attempts, copies = _priced(hub, now, workspaces, None)
    team_of = {w.name: w.team for w in hub.platform.workspaces}
    for row in attempts + copies:  # a workspace deleted since keeps its runs' team
        team_of.setdefault(row["workspace"], row["team"])
    names = sorted(w for w in team_of if workspaces is None or w in workspaces)
    by_ws = []
    for ws in names:
        mine_a = [a for a in attempts if a["workspace"] == ws]
        mine_x = [x for x in copies if x["workspace"] == ws]
        by_ws.append({"workspace": ws, "team": team_of[ws], **_total(mine_a, mine_x)})
    teams: dict[str, Row] = {}
    for row in by_ws:
        acc = teams.setdefault(row["team"], {"team": row["team"], "currency": CURRENCY})
        for k in _SUMS:
            acc[k] = acc.get(k, 0.0) + row[k]
    return {
        "currency": CURRENCY,
        "month_start": month_start(now),
        "workspaces": by_ws,
        "teams": [teams[k] for k in sorted(teams)],
    }


def by_run(hub: context.Hub, clock: Callable[[], float] = time.time) -> dict[str, Row]:
    """Every run that used something: its totals (one read for all runs)."""
    attempts, copies = _priced(hub, clock(), None, None)
    groups: dict[str, tuple[list[Row], list[Row]]] = {}
    for a in attempts:
        groups.setdefault(a["run_id"], ([], []))[0].append(a)
    for x in copies:
        groups.setdefault(x["run_id"], ([], []))[1].append(x)
    return {rid: _total(mine_a, mine_x) for rid, (mine_a, mine_x) in groups.items()}


def workspace_cost(hub: context.Hub, name: str, clock: Callable[[], float] = time.time) -> Row:
    """One workspace's total and month-to-date cost (``tau workspace status``)."""
    doc = summary(hub, [name], clock)
    row = next((w for w in doc["workspaces"] if w["workspace"] == name), None)
    return {**(row or _total([], [])), "month_start": doc["month_start"]}

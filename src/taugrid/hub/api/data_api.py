"""HTTP routes of the data plane (``/v1``): datasets, replicas, replication, the link
matrix, explain-placement, and the agents' data channel.

Who may call what (docs/tenancy.md, "Roles and scope"): a dataset belongs to a
workspace, scoped like runs: a researcher lists, reads, replicates and registers
datasets of its own workspaces only — a dataset of another workspace is a 404 (it does
not exist for them), naming a foreign workspace explicitly is a 403; admins see every
workspace. Transfers are listed for visible datasets; the link matrix is readable by any
admin or researcher.
``/runs/{ref}/placement`` follows the run's workspace scope; the data channel
``/agents/{cluster}/data/sync`` is for that cluster's agent token only. Errors map as in
``hub.api.api`` (UserError 400, NotFound 404). ``install`` also registers the link gauges on
the hub's Prometheus registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import fastapi
import prometheus_client.core as prom_core
import prometheus_client.registry as prom_registry

from taugrid import errors
from taugrid.dataplane import wire
from taugrid.hub.api.auth import (
    Auth,
    Principal,
    require_agent,
    require_workspace,
    workspaces_of,
)
from taugrid.hub.core import context
from taugrid.hub.data import data_ops
from taugrid.hub.runs import runs
from taugrid.store import data as store_data

__all__ = ["install", "router"]

router = fastapi.APIRouter(prefix="/v1", tags=["data"])
Agent = Annotated[Principal, fastapi.Depends(require_agent)]
Doc = dict[str, Any]


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _person(p: Principal) -> None:
    workspaces_of(p)  # agent tokens: 403


def _dataset(hub: context.Hub, ref: str, p: Principal) -> Doc:
    ds = store_data.DataStore(hub.engine).get(store_data.dataset_id(ref), workspaces_of(p))
    if ds is None:
        raise runs.NotFound(f"no dataset '{ref}'", "list datasets with: tau data list")
    return ds


def _scope(hub: context.Hub, p: Principal, workspace: str | None) -> list[str] | None:
    """Workspaces a listing covers: the one asked for (403 if not visible), else all
    visible to ``p``."""
    allowed = workspaces_of(p)
    if workspace is None:
        return allowed
    require_workspace(p, workspace)
    return [workspace]


def _home(hub: context.Hub, p: Principal, asked: str | None) -> str:
    """The workspace a new dataset goes to: the one asked for, else the caller's only
    workspace, else the platform's default workspace."""
    known = [w.name for w in hub.platform.workspaces]
    mine = workspaces_of(p)
    default = hub.platform.default_workspace
    ws = asked or (mine[0] if mine is not None and len(mine) == 1 else default)
    if ws is None or (mine is not None and ws not in mine and asked is None):
        raise errors.UserError(
            "which workspace should the dataset belong to?",
            f"pass --workspace (yours: {', '.join(mine or []) or 'none'})",
        )
    require_workspace(p, ws)
    if ws not in known:
        raise runs.NotFound(f"no workspace '{ws}'", f"workspaces are: {', '.join(known)}")
    return ws


@router.post("/datasets", status_code=201)
def register_dataset(request: fastapi.Request, body: wire.DatasetRegister, p: Auth) -> Doc:
    _person(p)
    hub = _hub(request)
    workspace = _home(hub, p, body.workspace)
    if body.region not in data_ops.regions(hub):
        raise runs.NotFound(
            f"no region '{body.region}'", f"regions are: {', '.join(data_ops.regions(hub))}"
        )
    row = store_data.DataStore(hub.engine).register(
        body.name, body.version, body.region, body.path, p.name, workspace
    )
    hub.runs.add_event(
        None,
        "dataset_registered",
        {"dataset": row["id"], "region": body.region, "workspace": workspace},
    )
    return row


@router.get("/datasets")
def list_datasets(request: fastapi.Request, p: Auth, workspace: str | None = None) -> list[Doc]:
    _person(p)
    hub = _hub(request)
    s = store_data.DataStore(hub.engine)
    held = s.complete_regions()
    return [
        {**{k: v for k, v in d.items() if k != "files"}, "regions": list(held.get(d["id"], ()))}
        for d in s.all(_scope(hub, p, workspace))
    ]


@router.get("/datasets/{ref}")
def show_dataset(request: fastapi.Request, ref: str, p: Auth) -> Doc:
    _person(p)
    hub = _hub(request)
    ds = _dataset(hub, ref, p)
    s = store_data.DataStore(hub.engine)
    return {**ds, "replicas": s.replicas(ds["id"]), "transfers": s.transfers(did=ds["id"])}


@router.get("/datasets/{ref}/replicas")
def dataset_replicas(request: fastapi.Request, ref: str, p: Auth) -> list[Doc]:
    _person(p)
    hub = _hub(request)
    return store_data.DataStore(hub.engine).replicas(_dataset(hub, ref, p)["id"])


@router.post("/datasets/{ref}/replicate", status_code=202)
def replicate_dataset(
    request: fastapi.Request, ref: str, body: wire.ReplicateRequest, p: Auth
) -> Doc:
    _person(p)
    hub = _hub(request)
    return data_ops.replicate(hub, _dataset(hub, ref, p)["id"], body, p.name)


@router.get("/transfers")
def list_transfers(request: fastapi.Request, p: Auth, state: str | None = None) -> list[Doc]:
    _person(p)
    states = tuple(state.split(",")) if state else None
    s = store_data.DataStore(_hub(request).engine)
    rows = s.transfers(states)
    if workspaces_of(p) is None:
        return rows
    visible = {d["id"] for d in s.all(workspaces_of(p))}
    return [t for t in rows if t["dataset_id"] in visible]


@router.get("/links")
def links(request: fastapi.Request, p: Auth) -> Doc:
    _person(p)
    return data_ops.link_matrix(_hub(request))


@router.get("/runs/{ref}/placement")
def explain_placement(request: fastapi.Request, ref: str, p: Auth) -> Doc:
    hub = _hub(request)
    run = runs.find(hub, ref, workspaces_of(p))
    return data_ops.explain(hub, run, request.app.state.scheduler.policy)


@router.post("/agents/{cluster_id}/data/sync")
def agent_data_sync(
    request: fastapi.Request, cluster_id: str, body: wire.DataSync, p: Agent
) -> wire.DataTasks:
    return data_ops.data_sync(_hub(request), cluster_id, body)


class _LinkCollector(prom_registry.Collector):
    """Measured link throughput and the share active transfers use, per (src, dst)."""

    def __init__(self, hub: context.Hub) -> None:
        self.hub = hub

    def collect(self) -> Iterator[prom_core.Metric]:
        util = prom_core.GaugeMetricFamily(
            "tau_link_utilization",
            "Transfer rate / measured link throughput",
            labels=["src", "dst"],
        )
        bw = prom_core.GaugeMetricFamily(
            "tau_link_throughput_mbps", "Measured TCP throughput of a link", labels=["src", "dst"]
        )
        rtt = prom_core.GaugeMetricFamily(
            "tau_link_rtt_ms", "Measured round-trip time of a link", labels=["src", "dst"]
        )
        loss = prom_core.GaugeMetricFamily(
            "tau_link_loss_percent", "Measured packet loss of a link", labels=["src", "dst"]
        )
        for row in data_ops.link_matrix(self.hub)["links"]:
            labels = [row["src"], row["dst"]]
            util.add_metric(labels, float(row["utilisation"]))
            bw.add_metric(labels, float(row["throughput_mbps"] or 0.0))
            rtt.add_metric(labels, float(row["rtt_ms"] or 0.0))
            loss.add_metric(labels, float(row["loss_pct"] or 0.0))
        yield from (util, bw, rtt, loss)


def install(app: fastapi.FastAPI, hub: context.Hub) -> None:
    """Serve the data routes on ``app`` and export link gauges with the hub's metrics."""
    app.include_router(router)
    metrics = getattr(hub, "metrics", None)  # None for a schema-only app (OpenAPI export)
    if metrics is not None:
        metrics.registry.register(_LinkCollector(hub))

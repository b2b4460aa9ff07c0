"""HTTP routes of the data plane (``/v1``): datasets, replicas, replication, the link
matrix, explain-placement, and the agents' data channel.

Who may call what (DESIGN §6): any admin or researcher token reads datasets and links,
registers datasets and asks for replicas (datasets are shared across workspaces);
``/runs/{ref}/placement`` follows the run's workspace scope; the data channel
``/agents/{cluster}/data/sync`` is for that cluster's agent token only. Errors map as in
``hub.api`` (UserError 400, NotFound 404). ``install`` also registers the link gauges on
the hub's Prometheus registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import fastapi
import prometheus_client.core as prom_core
import prometheus_client.registry as prom_registry

from taugrid.dataplane import wire
from taugrid.hub import context, data_ops, runs
from taugrid.hub.auth import Principal, principal, require_agent, workspaces_of
from taugrid.store import data as store_data

__all__ = ["install", "router"]

router = fastapi.APIRouter(prefix="/v1", tags=["data"])
Auth = Annotated[Principal, fastapi.Depends(principal)]
Agent = Annotated[Principal, fastapi.Depends(require_agent)]
Doc = dict[str, Any]


def _hub(request: fastapi.Request) -> context.Hub:
    hub: context.Hub = request.app.state.hub
    return hub


def _person(p: Principal) -> None:
    workspaces_of(p)  # agent tokens: 403


def _dataset(hub: context.Hub, ref: str) -> Doc:
    ds = store_data.DataStore(hub.engine).get(store_data.dataset_id(ref))
    if ds is None:
        raise runs.NotFound(f"no dataset '{ref}'", "list datasets with: tau data list")
    return ds


@router.post("/datasets", status_code=201)
def register_dataset(request: fastapi.Request, body: wire.DatasetRegister, p: Auth) -> Doc:
    _person(p)
    hub = _hub(request)
    if body.region not in data_ops.regions(hub):
        raise runs.NotFound(
            f"no region '{body.region}'", f"regions are: {', '.join(data_ops.regions(hub))}"
        )
    row = store_data.DataStore(hub.engine).register(
        body.name, body.version, body.region, body.path, p.name
    )
    hub.runs.add_event(None, "dataset_registered", {"dataset": row["id"], "region": body.region})
    return row


@router.get("/datasets")
def list_datasets(request: fastapi.Request, p: Auth) -> list[Doc]:
    _person(p)
    s = store_data.DataStore(_hub(request).engine)
    held = s.complete_regions()
    return [
        {**{k: v for k, v in d.items() if k != "files"}, "regions": list(held.get(d["id"], ()))}
        for d in s.all()
    ]


@router.get("/datasets/{ref}")
def show_dataset(request: fastapi.Request, ref: str, p: Auth) -> Doc:
    _person(p)
    hub = _hub(request)
    ds = _dataset(hub, ref)
    s = store_data.DataStore(hub.engine)
    return {**ds, "replicas": s.replicas(ds["id"]), "transfers": s.transfers(did=ds["id"])}


@router.get("/datasets/{ref}/replicas")
def dataset_replicas(request: fastapi.Request, ref: str, p: Auth) -> list[Doc]:
    _person(p)
    hub = _hub(request)
    return store_data.DataStore(hub.engine).replicas(_dataset(hub, ref)["id"])


@router.post("/datasets/{ref}/replicate", status_code=202)
def replicate_dataset(
    request: fastapi.Request, ref: str, body: wire.ReplicateRequest, p: Auth
) -> Doc:
    _person(p)
    hub = _hub(request)
    return data_ops.replicate(hub, _dataset(hub, ref)["id"], body, p.name)


@router.get("/transfers")
def list_transfers(request: fastapi.Request, p: Auth, state: str | None = None) -> list[Doc]:
    _person(p)
    states = tuple(state.split(",")) if state else None
    return store_data.DataStore(_hub(request).engine).transfers(states)


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

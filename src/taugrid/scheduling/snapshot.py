"""Immutable inputs of one scheduling cycle: clusters, nodes, quotas and pending runs.

The hub builds a ``Snapshot`` from its store and the agents' latest reports; the
simulator builds one from a trace. Nothing here performs I/O or reads a clock: ``now``
is a field.

Data-aware fields (all defaulted, filled by the hub from agent reports and the dataset
registry; see ``scheduling.plugins_data``): a cluster's measured inbound links
(``LinkView`` per peer region), the datasets and runtimes its region holds, and when
its running work is expected to give GPUs back; a run's dataset needs (``DataNeed``),
runtime key, the expected wait near its data, and its declared run time.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Collection, Mapping
from typing import Any

from taugrid import payloads as wire
from taugrid.platform import models as pm
from taugrid.spec import models as sm

__all__ = [
    "ANY",
    "CHECKPOINT_EVERY_S",
    "ON_DEMAND",
    "RECLAIM_LOSS_S",
    "RESTART_S",
    "SPOT",
    "AdmittedRun",
    "ClusterView",
    "DataNeed",
    "LinkView",
    "NodeView",
    "PendingRun",
    "QuotaView",
    "Relocation",
    "Shape",
    "Snapshot",
    "cluster_from_report",
    "links_from_report",
    "node_slots",
    "spot_overhead",
]

ON_DEMAND, SPOT, ANY = (c.value for c in sm.Capacity)
CHECKPOINT_EVERY_S = 1200.0
"""How often a run is assumed to checkpoint when it declares nothing (20 minutes)."""
RESTART_S = 300.0
"""Seconds a reclaimed run takes to be placed again and restart from its checkpoint."""
RECLAIM_LOSS_S = CHECKPOINT_EVERY_S / 2 + RESTART_S
"""Work a reclaim costs a run, in seconds on its GPUs: half a checkpoint interval lost
on average, plus the restart (docs/spot.md)."""


def spot_overhead(run: PendingRun, cluster: ClusterView) -> float:
    """Expected GPU time per unit of useful work on ``cluster``'s spot nodes: each of the
    run's nodes is reclaimed ``reclaims_per_hour`` times an hour, and each reclaim costs
    ``RECLAIM_LOSS_S`` of work (1.0: never reclaimed)."""
    nodes = max(1, run.workers)
    return 1.0 + nodes * cluster.reclaims_per_hour * RECLAIM_LOSS_S / 3600


@dataclasses.dataclass(frozen=True)
class NodeView:
    """One node as last reported: capacity, what is free, and whether it may be used."""

    node_id: str
    gpu_model: str | None
    gpus_total: float
    gpus_free: float
    cpus_free: float
    memory_free: float
    healthy: bool = True
    alive: bool = True
    spot: bool = False
    """In a spot pool: the provider may reclaim it (platform.yaml ``capacity: spot``)."""

    @property
    def usable(self) -> bool:
        return self.healthy and self.alive


Shape = tuple[str | None, float, float, float, bool | None]
"""One worker's request: (GPU model or None for any, GPUs, CPUs, memory, spot nodes only
(True), on-demand nodes only (False) or either (None))."""


def node_slots(n: NodeView, shape: Shape, *, use_free: bool = True) -> float:
    """Workers of ``shape`` that fit on node ``n`` on its own (inf: the shape needs nothing)."""
    model, gpus, cpus, memory, spot = shape
    if not (n.healthy and n.alive) or (model is not None and n.gpu_model != model):
        return 0
    if spot is not None and n.spot != spot:
        return 0
    have = n.gpus_free if use_free else n.gpus_total
    if have < gpus or n.cpus_free < cpus or n.memory_free < memory:
        return 0  # the common case (and a negative amount where nothing is asked)
    count = math.inf
    if gpus > 0:
        count = have // gpus
    if cpus > 0:
        count = min(count, n.cpus_free // cpus)
    if memory > 0:
        count = min(count, n.memory_free // memory)
    return count


@dataclasses.dataclass(frozen=True)
class LinkView:
    """The latest measurement of the link *from* ``source`` region into a cluster's region.

    ``throughput_bps`` is bytes/s of a TCP payload (not ping); ``rtt_s`` the round trip;
    ``egress_cost_per_gb`` what the source charges per GB leaving it.
    """

    source: str
    throughput_bps: float
    rtt_s: float = 0.0
    measured_at: float = 0.0
    egress_cost_per_gb: float = 0.0


@dataclasses.dataclass(frozen=True)
class DataNeed:
    """One input dataset of a run: its size and the regions holding a complete replica."""

    name: str
    size_bytes: int
    regions: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ClusterView:
    """One member cluster: ``ready`` clusters hold a valid lease; others get nothing new."""

    cluster_id: str
    region: str
    ready: bool
    nodes: tuple[NodeView, ...]
    cost_per_gpu_hour: float = 0.0
    gpu_speed: float = 1.0
    """Work per GPU-hour of the cluster's slowest GPU model (platform reference = 1)."""
    queued: int = 0
    links: tuple[LinkView, ...] = ()
    datasets: tuple[str, ...] = ()
    warm_runtimes: tuple[str, ...] = ()
    releases: tuple[tuple[float, float], ...] = ()
    """(seconds from now, GPUs given back) per running attempt, soonest first."""
    compliance: tuple[str, ...] = ()
    """Compliance domains the cluster's region meets (platform.yaml ``regions[].compliance``)."""
    interconnect_gbps: float = 0.0
    """Node-to-node bandwidth inside the cluster (0: not declared)."""
    whole_gpus: bool = False
    """GPUs are handed out whole only (Kubernetes device plugins): no shares of one GPU."""
    spannable: bool = False
    """Its agent can head a spanning run or lend it nodes (``StateReport.spannable``)."""
    spot_cost_per_gpu_hour: float | None = None
    """$/GPU-hour of its cheapest spot pool (None: it has none); ``cost_per_gpu_hour`` is
    then its cheapest on-demand pool's."""
    reclaims_per_hour: float = 0.0
    """Reclaims per node-hour of its spot nodes (observed, else platform.yaml's estimate)."""

    def price(self, run: PendingRun) -> float:
        """Expected $ per GPU-hour of useful work for ``run`` here (``spot_overhead``)."""
        if run.capacity == SPOT and self.spot_cost_per_gpu_hour is not None:
            return self.spot_cost_per_gpu_hour * spot_overhead(run, self)
        return self.cost_per_gpu_hour

    def link_from(self, region: str) -> LinkView | None:
        """The latest measured link from ``region`` into this cluster, if any."""
        return next((link for link in self.links if link.source == region), None)

    @functools.cached_property
    def _slot_counts(self) -> dict[tuple[Shape, bool], float]:
        """Memo of ``slots`` (the view is immutable, so it never goes stale)."""
        return {}

    def slots(self, shape: Shape, *, use_free: bool = True) -> float:
        """Workers of ``shape`` that fit on the usable nodes (first fit; inf: no needs).

        Identical workers fill nodes in order, so first fit places exactly the sum of
        what each node holds on its own. ``use_free=False`` counts total GPUs (CPU and
        memory stay free amounts): whether the shape could ever fit.
        """
        memo = self._slot_counts
        key = (shape, use_free)
        if key not in memo:
            memo[key] = sum(node_slots(n, shape, use_free=use_free) for n in self.nodes)
        return memo[key]

    def with_nodes(self, changed: dict[int, NodeView]) -> ClusterView:
        """A copy with the nodes at ``changed`` positions replaced (capacity taken).

        The memoised GPU totals and slot counts are carried over by difference on the
        changed nodes instead of being counted again over every node.
        """
        nodes = list(self.nodes)
        for i, n in changed.items():
            nodes[i] = n
        view = dataclasses.replace(self, nodes=tuple(nodes))
        old = [self.nodes[i] for i in changed]
        new = list(changed.values())
        if "_usable_gpus" in self.__dict__:
            gpus = dict(self._usable_gpus)
            for a, b in zip(old, new, strict=True):
                for key in {a.gpu_model, None}:
                    if a.usable and key in gpus:
                        t, f = gpus[key]
                        gpus[key] = (t, f - a.gpus_free + b.gpus_free)
            view.__dict__["_usable_gpus"] = gpus
        counts = view._slot_counts
        for (shape, use_free), total in self._slot_counts.items():
            delta = sum(
                node_slots(a, shape, use_free=use_free) - node_slots(b, shape, use_free=use_free)
                for a, b in zip(old, new, strict=True)
            )
            if not math.isinf(total) and not math.isnan(delta):
                counts[(shape, use_free)] = total - delta
        return view

    @functools.cached_property
    def _usable_gpus(self) -> dict[str | None, tuple[float, float]]:
        """(total, free) GPUs on usable nodes, per model and for any model (key None)."""
        out: dict[str | None, tuple[float, float]] = {}
        for n in self.nodes:
            if n.usable:
                for key in {n.gpu_model, None}:
                    t, f = out.get(key, (0.0, 0.0))
                    out[key] = (t + n.gpus_total, f + n.gpus_free)
        return out

    def gpus(self, model: str | None = None) -> tuple[float, float]:
        """(total, free) GPUs on usable nodes, of one model when given."""
        return self._usable_gpus.get(model, (0.0, 0.0))


@dataclasses.dataclass(frozen=True)
class Relocation:
    """Where a moved run may not go back to, and the room it asked for: set when the hub
    moves a running job that asked to leave (``tau.request_relocation``)."""

    away_from: tuple[str, ...]
    """Clusters the run left because it could not meet its goal there."""
    cpus: float = 0.0
    """Free CPUs its next cluster needs beyond the run's own workers."""


@dataclasses.dataclass(frozen=True)
class PendingRun:
    """A run waiting for admission and/or placement, with what it asks for."""

    run_id: str
    team: str
    priority: int
    created_at: float
    workers: int
    gpus_per_worker: float
    """Whole GPUs, or a share of one GPU below 1 (workers share a GPU)."""
    cpus_per_worker: float
    memory_per_worker: float
    gpu_model: str | None = None
    allowed_regions: tuple[str, ...] = ()
    admitted: bool = False
    not_before: float = 0.0
    datasets: tuple[DataNeed, ...] = ()
    runtime_key: str | None = None
    wait_near_data_s: float | None = None
    """Expected wait at the best ready cluster holding all its data (None: none holds it)."""
    objective: str | None = None
    """``placement.objective``: which weight preset scores its clusters (None: default)."""
    communication: str | None = None
    """``placement.communication``: sync, async or none (None: not declared)."""
    compliance: tuple[str, ...] = ()
    """Compliance domains every region it runs in must meet (``placement.compliance``)."""
    runtime_s: float | None = None
    """Declared run time on reference-speed GPUs (``resilience.max_runtime``; None: unknown)."""
    relocation: Relocation | None = None
    """Set once the hub moved the run off a cluster (``plugins.RelocationFilter``)."""
    capacity: str = ON_DEMAND
    """``resilience.capacity``: spot, on-demand or any (the cycle tries both for any)."""
    max_price: float | None = None
    """``resilience.max_price``: most $/GPU-hour a spot pool may charge it."""

    @property
    def total_gpus(self) -> float:
        return self.workers * self.gpus_per_worker

    @property
    def shape(self) -> Shape:
        """One worker's request (the model only matters when it asks for GPUs)."""
        model = self.gpu_model if self.gpus_per_worker else None
        spot = {SPOT: True, ON_DEMAND: False}.get(self.capacity)
        return (model, self.gpus_per_worker, self.cpus_per_worker, self.memory_per_worker, spot)

    @functools.cached_property
    def request(self) -> tuple[object, ...]:
        """Every field placement plugins may read: all but identity and queue position.

        Two runs with the same ``request`` get the same verdict from every cluster, so a
        cycle computes it once (plugins must not read ``run_id``, ``priority``,
        ``created_at``, ``admitted`` or ``not_before``).
        """
        return (
            self.team,
            self.workers,
            self.gpu_model,
            self.shape,
            self.allowed_regions,
            self.datasets,
            self.runtime_key,
            self.wait_near_data_s,
            self.objective,
            self.communication,
            self.compliance,
            self.runtime_s,
            self.relocation,
            self.capacity,
            self.max_price,
        )


@dataclasses.dataclass(frozen=True)
class QuotaView:
    """A team's GPU quota of one model: ``nominal`` guaranteed, ``used`` held by admitted runs.

    The team is a Kueue ClusterQueue (``scheduling.admission``): ``cohort`` lets it borrow
    unused nominal quota of its cohort peers, up to ``borrowing_limit`` beyond nominal, and
    lend at most ``lending_limit`` of its own (``None``: no limit; both need a cohort).
    ``strategy`` is the team's queueing strategy (the first row of a team is used).
    """

    team: str
    gpu_model: str
    nominal: int
    used: float
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    strategy: pm.QueueingStrategy = pm.QueueingStrategy.BEST_EFFORT_FIFO


@dataclasses.dataclass(frozen=True)
class AdmittedRun:
    """A run holding quota (admitted, placed or running): a candidate for preemption.

    Its GPUs must be part of ``QuotaView.used`` of its team and model; usage not listed
    here is held too, but cannot be preempted.
    """

    run_id: str
    team: str
    gpu_model: str
    gpus: float
    priority: int
    admitted_at: float


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything one cycle decides on."""

    now: float
    clusters: tuple[ClusterView, ...]
    quotas: tuple[QuotaView, ...]
    admitted: tuple[AdmittedRun, ...] = ()


def links_from_report(report: Mapping[str, Any]) -> tuple[LinkView, ...]:
    """Inbound links of a cluster from the probe results of its state report.

    ``probes``: peer region → ``throughput_mbps``, ``rtt_ms``, ``measured_at``,
    ``egress_cost_per_gb`` (a payload downloaded *from* the peer: the direction data
    moves in). Peers never measured (no positive throughput) are left out.
    """
    out = []
    for peer, p in sorted((report.get("probes") or {}).items()):
        mbps = float(p.get("throughput_mbps", 0.0))
        if mbps > 0:
            out.append(
                LinkView(
                    source=peer,
                    throughput_bps=mbps * 1e6 / 8,
                    rtt_s=float(p.get("rtt_ms", 0.0)) / 1000,
                    measured_at=float(p.get("measured_at", 0.0)),
                    egress_cost_per_gb=float(p.get("egress_cost_per_gb", 0.0)),
                )
            )
    return tuple(out)


def _node_view(row: wire.NodeReport | Mapping[str, Any], faulty: Collection[str]) -> NodeView:
    """A reported node (``payloads.NodeReport``, or its JSON as the hub stores it)."""
    n = row if isinstance(row, wire.NodeReport) else wire.NodeReport.model_validate(row)
    return NodeView(
        node_id=n.node_id,
        gpu_model=n.gpu_model,
        gpus_total=n.gpus_total,
        gpus_free=n.gpus_free,
        cpus_free=n.cpus_free,
        memory_free=n.memory_free,
        healthy=n.node_id not in faulty and n.healthy,
        alive=n.alive,
        spot=n.spot,
    )


def cluster_from_report(
    cluster_id: str,
    region: str,
    ready: bool,
    report: Mapping[str, Any],
    *,
    faulty: Collection[str] = (),
    datasets: tuple[str, ...] = (),
    releases: tuple[tuple[float, float], ...] = (),
    compliance: tuple[str, ...] = (),
    interconnect_gbps: float = 0.0,
    whole_gpus: bool = False,
) -> ClusterView:
    """A cluster as its agent's latest state report (``payloads.StateReport``) shows it.

    The one translation from report to view, shared by the hub and the simulator so
    both decide on the same snapshot. ``faulty``: node IDs with an open fault mark;
    ``datasets`` and ``releases`` come from the dataset registry and active attempts,
    ``compliance``, ``interconnect_gbps`` and ``whole_gpus`` (the cluster's backend) from
    platform.yaml; the report carries none.
    """
    nodes = tuple(_node_view(n, faulty) for n in report.get("nodes", []))
    return ClusterView(
        cluster_id=cluster_id,
        region=region,
        ready=ready,
        nodes=nodes,
        cost_per_gpu_hour=float(report.get("cost_per_gpu_hour", 0.0)),
        gpu_speed=float(report.get("gpu_speed", 1.0)) or 1.0,
        queued=int(report.get("queued_jobs", 0)),
        links=links_from_report(report),
        datasets=datasets,
        warm_runtimes=tuple(report.get("cached_runtimes", ())),
        releases=releases,
        compliance=compliance,
        interconnect_gbps=interconnect_gbps,
        whole_gpus=whole_gpus,
        spannable=bool(report.get("spannable", False)),
        spot_cost_per_gpu_hour=report.get("spot_cost_per_gpu_hour"),
        reclaims_per_hour=float(report.get("reclaims_per_hour", 0.0)),
    )

"""Immutable inputs of one scheduling cycle: clusters, nodes, quotas and pending runs.

The hub builds a ``Snapshot`` from its store and the agents' latest reports; the
simulator builds one from a trace. Nothing here performs I/O or reads a clock: ``now``
is a field.
"""

from __future__ import annotations

import dataclasses

__all__ = ["ClusterView", "NodeView", "PendingRun", "QuotaView", "Snapshot"]


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

    @property
    def usable(self) -> bool:
        return self.healthy and self.alive


@dataclasses.dataclass(frozen=True)
class ClusterView:
    """One member cluster: ``ready`` clusters hold a valid lease; others get nothing new."""

    cluster_id: str
    region: str
    ready: bool
    nodes: tuple[NodeView, ...]
    cost_per_gpu_hour: float = 0.0
    queued: int = 0

    def gpus(self, model: str | None = None) -> tuple[float, float]:
        """(total, free) GPUs on usable nodes, of one model when given."""
        nodes = [n for n in self.nodes if n.usable and (model is None or n.gpu_model == model)]
        return sum(n.gpus_total for n in nodes), sum(n.gpus_free for n in nodes)


@dataclasses.dataclass(frozen=True)
class PendingRun:
    """A run waiting for admission and/or placement, with what it asks for."""

    run_id: str
    team: str
    priority: int
    created_at: float
    workers: int
    gpus_per_worker: int
    cpus_per_worker: float
    memory_per_worker: float
    gpu_model: str | None = None
    allowed_regions: tuple[str, ...] = ()
    admitted: bool = False
    not_before: float = 0.0

    @property
    def total_gpus(self) -> int:
        return self.workers * self.gpus_per_worker


@dataclasses.dataclass(frozen=True)
class QuotaView:
    """A team's GPU quota of one model: ``nominal`` guaranteed, ``used`` held by admitted runs."""

    team: str
    gpu_model: str
    nominal: int
    used: int


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything one cycle decides on."""

    now: float
    clusters: tuple[ClusterView, ...]
    quotas: tuple[QuotaView, ...]

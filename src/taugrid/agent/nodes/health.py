"""What a cluster can do, from the agent's Ray inventory: health, nodes, GPU capacity.

Owns three rules of the state report:

- *health*: ``unavailable`` when Ray cannot run jobs (its inventory cannot be read, or
  the head node — GCS, dashboard, job agent — is down), ``degraded`` when fewer nodes
  are alive than the cluster has (``expected``) or when every GPU node is marked faulty
  (runs wait for a node to be cleared), else ``ready``; each with a reason;
- *nodes*: alive nodes, plus dead ones only while they are missing (a node that Ray
  restarted gets a new ID; its old, dead ID is not listed next to it); each row's
  ``problem`` is the backend's word on the node (a Kubernetes Node not Ready or
  tainted, naming it), else None;
- *capacity*: GPUs of alive nodes marked faulty are cordoned (``faulty``), counted
  neither free nor busy, so free + busy + faulty is every alive GPU.
"""

from __future__ import annotations

from taugrid import payloads as wire
from taugrid.backends import base
from taugrid.lifecycle import node_ids
from taugrid.render import naming

__all__ = ["capacity", "health", "node_rows"]


def health(
    inv: base.ClusterInventory, expected: int | None, faulty: dict[str, str] | None = None
) -> tuple[str, str]:
    """``(state, reason)`` of the cluster (see the module docstring)."""
    heads = [n for n in inv.nodes if n.is_head]
    if heads and not any(n.alive for n in heads):
        return "unavailable", "the Ray head node is down: no job can be submitted"
    alive = len(inv.alive_nodes)
    if expected is not None and alive < expected:
        return "degraded", f"{expected - alive} of {expected} Ray nodes down"
    gpu_nodes = [n for n in inv.alive_nodes if n.gpu_total > 0]
    marked = [
        f"{node_ids.short(n.node_id)} ({(faulty or {})[n.node_id]})"
        for n in gpu_nodes
        if n.node_id in (faulty or {})
    ]
    if gpu_nodes and len(marked) == len(gpu_nodes):
        why = (
            f"every GPU node is marked faulty: {', '.join(marked)}; runs wait until one is cleared"
        )
        return "degraded", why
    return "ready", ""


def node_rows(
    inv: base.ClusterInventory, faulty: dict[str, str], expected: int | None
) -> list[wire.NodeReport]:
    """The report's node list (see the module docstring)."""
    missing = max((expected or 0) - len(inv.alive_nodes), 0) if expected is not None else None
    dead = [n for n in inv.nodes if not n.alive]
    shown = inv.alive_nodes + (dead if missing is None else dead[-missing:] if missing else [])
    return [
        wire.NodeReport(
            node_id=n.node_id,
            ip=n.ip,
            alive=n.alive,
            gpu_model=n.accelerator,
            gpus_total=n.gpu_total,
            gpus_free=0.0 if n.node_id in faulty else n.gpu_available,
            cpus_free=n.cpu_available,
            memory_free=n.memory_available,
            healthy=n.node_id not in faulty,
            fault=faulty.get(n.node_id),
            problem=n.state_message,
            pool=n.labels.get(naming.POOL_LABEL),
        )
        for n in shown
    ]


def capacity(inv: base.ClusterInventory, faulty: dict[str, str]) -> tuple[float, float, float]:
    """``(free, busy, faulty)`` GPUs of the alive nodes."""
    ok = [n for n in inv.alive_nodes if n.node_id not in faulty]
    cordoned = sum(n.gpu_total for n in inv.alive_nodes if n.node_id in faulty)
    free = sum(n.gpu_available for n in ok)
    return free, sum(n.gpu_total for n in ok) - free, cordoned

"""Ray cluster observation: inventory, job placement and release, from state APIs.

Owns turning Ray's node/actor/task/placement-group rows into the backend values of
``taugrid.backends.base``. Nothing here calls ``ray.init``: node identity and totals
come from the dashboard state API (``/api/v0/nodes``); what is *available* per node
comes from one of two sources:

- the GCS (``ray.autoscaler.v2.sdk.get_cluster_status``) when the GCS address is
  known — fresh and with exact resource names; or
- the dashboard's ``/api/cluster_status`` autoscaler report otherwise — refreshed by
  the autoscaler monitor every ~5 s and with camelCased resource names, which are
  mapped back through the node's real names.

Conventions: a node's GPU *model* is the ``<model>`` of its ``accelerator_type:<model>``
resource (Ray's convention); a dead node reports nothing available. A Ray Jobs
submission's driver lives in the ``JobSupervisor`` actor named
``_ray_internal_job_actor_<submission_id>``; the entrypoint's own actors, tasks and
placement groups carry the Ray job id (``JobDetails.job_id``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from taugrid.backends import base, errors
from taugrid.backends.ray import ray_http

__all__ = [
    "ACCELERATOR_PREFIX",
    "GUEST_LABEL",
    "build_inventory",
    "camel_case",
    "job_placement",
    "job_released",
    "usage_from_dashboard",
    "usage_from_gcs",
]

ACCELERATOR_PREFIX = "accelerator_type:"
GUEST_LABEL = "tau.io/guest-of"
"""Node label of a guest node another cluster lent to a spanning run (``ray_guest``)."""
_SUPERVISOR_PREFIX = "_ray_internal_job_actor_"

# node_id → resource name → (used, total)
Usage = dict[str, dict[str, tuple[float, float]]]


def camel_case(name: str) -> str:
    """The dashboard's key mangling (``ray.dashboard.utils.to_camel_case``)."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def usage_from_gcs(gcs_address: str, timeout_s: float = 10.0) -> Usage:
    """Per-node (used, total) straight from the GCS; needs Ray importable, not a driver."""
    from ray.autoscaler.v2 import sdk  # heavy: only when asked

    try:
        status = sdk.get_cluster_status(gcs_address, timeout=max(int(timeout_s), 1))
    except Exception as exc:  # grpc/Ray errors have no common base worth naming
        raise errors.RayUnavailable(f"Ray GCS at {gcs_address} did not answer: {exc}") from exc
    out: Usage = {}
    for node in [*status.active_nodes, *status.idle_nodes]:
        usage = node.resource_usage.usage if node.resource_usage else []
        if node.node_id:
            out[node.node_id] = {u.resource_name: (u.used, u.total) for u in usage}
    return out


def usage_from_dashboard(dashboard: ray_http.DashboardClient) -> dict[str, Any]:
    """Per-node usage rows of the autoscaler report; keys are camelCased names."""
    report = dashboard.cluster_status().get("clusterStatus") or {}
    by_node: dict[str, Any] = (report.get("loadMetricsReport") or {}).get("usageByNode") or {}
    return by_node


def _usage_by_real_name(row: Mapping[str, Any], totals: Mapping[str, float]) -> dict[str, float]:
    """Map a camelCased usage row back onto the node's real resource names → used."""
    used: dict[str, float] = {}
    for name in totals:
        pair = row.get(name) or row.get(camel_case(name))
        if pair is not None:
            used[name] = float(pair[0])
    return used


def _node(row: Mapping[str, Any], used: Mapping[str, float]) -> base.NodeInventory:
    totals = {k: float(v) for k, v in (row.get("resources_total") or {}).items()}
    alive = row.get("state") == "ALIVE"
    avail = {k: (max(v - used.get(k, 0.0), 0.0) if alive else 0.0) for k, v in totals.items()}
    models = [
        k.removeprefix(ACCELERATOR_PREFIX) for k in totals if k.startswith(ACCELERATOR_PREFIX)
    ]
    return base.NodeInventory(
        node_id=row["node_id"],
        ip=row.get("node_ip", ""),
        is_head=bool(row.get("is_head_node", False)),
        alive=alive,
        state_message=row.get("state_message"),
        cpu_total=totals.get("CPU", 0.0),
        cpu_available=avail.get("CPU", 0.0),
        gpu_total=totals.get("GPU", 0.0),
        gpu_available=avail.get("GPU", 0.0),
        memory_total=int(totals.get("memory", 0.0)),
        memory_available=int(avail.get("memory", 0.0)),
        accelerator=models[0] if models else None,
        resources_total=totals,
        resources_available=avail,
        labels={str(k): str(v) for k, v in (row.get("labels") or {}).items()},
    )


def build_inventory(
    node_rows: list[dict[str, Any]],
    *,
    gcs_usage: Usage | None = None,
    dashboard_usage: Mapping[str, Any] | None = None,
    emulated_gpus: bool = False,
) -> base.ClusterInventory:
    """Assemble the inventory from node rows plus one usage source (GCS preferred).

    Guest nodes (``GUEST_LABEL``: lent by another cluster to a spanning run) are not this
    cluster's capacity and are left out."""
    nodes = []
    for row in node_rows:
        if GUEST_LABEL in (row.get("labels") or {}):
            continue
        totals = row.get("resources_total") or {}
        if gcs_usage is not None:
            used = {k: pair[0] for k, pair in gcs_usage.get(row["node_id"], {}).items()}
        else:
            used = _usage_by_real_name((dashboard_usage or {}).get(row["node_id"], {}), totals)
        nodes.append(_node(row, used))
    nodes.sort(key=lambda n: (not n.is_head, n.ip, n.node_id))
    return base.ClusterInventory(
        nodes=nodes, emulated_gpus=emulated_gpus, taken_at=dt.datetime.now(dt.UTC)
    )


def job_placement(
    dashboard: ray_http.DashboardClient, job_id: str, details: Mapping[str, Any]
) -> base.JobPlacement:
    """Nodes of the job's driver and of its alive actors and running tasks."""
    workers: set[str] = set()
    ray_job_id = details.get("job_id")
    if ray_job_id:
        for actor in dashboard.list_state("actors", [("job_id", ray_job_id), ("state", "ALIVE")]):
            if actor.get("node_id"):
                workers.add(actor["node_id"])
        for task in dashboard.list_state("tasks", [("job_id", ray_job_id), ("state", "RUNNING")]):
            if task.get("node_id") and task.get("type") != "DRIVER_TASK":
                workers.add(task["node_id"])
    return base.JobPlacement(
        job_id=job_id,
        driver_node_id=details.get("driver_node_id"),
        worker_node_ids=frozenset(workers),
    )


def job_released(
    dashboard: ray_http.DashboardClient, job_id: str, details: Mapping[str, Any]
) -> bool:
    """True when nothing of a terminal job is alive: supervisor, actors, tasks, PGs."""
    supervisor = dashboard.list_state(
        "actors", [("name", _SUPERVISOR_PREFIX + job_id), ("state", "ALIVE")]
    )
    if supervisor:
        return False
    ray_job_id = details.get("job_id")
    if not ray_job_id:
        return True  # the entrypoint never connected to Ray: only the supervisor held anything
    alive = dashboard.list_state(
        "actors", [("job_id", ray_job_id), ("state", "ALIVE")], detail=True
    )
    # Resource-free helpers (e.g. Ray Train's detached _AutoscalingCoordinatorActor)
    # outlive jobs by design; they hold no CPU/GPU, so they do not block the release.
    if any(a.get("required_resources") for a in alive):
        return False
    running = dashboard.list_state("tasks", [("job_id", ray_job_id), ("state", "RUNNING")])
    if any(t.get("type") != "DRIVER_TASK" for t in running):
        return False
    groups = dashboard.list_state("placement_groups", [("creator_job_id", ray_job_id)])
    return all(g.get("state") == "REMOVED" for g in groups)

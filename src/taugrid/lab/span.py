"""One Ray cluster across the lab's regions: the head in one region's namespace, a node
in each other region's, joined over the shaped inter-region links.

What a spanning placement (``scheduling.spanning``) runs on in the lab. Each node is a
``LocalRayCluster`` node started inside its region's namespace (``NodeShape.netns``) on
the region's address on its link to the head's region, so the head, its workers and
every object they exchange cross only the lab's shaped links (``lab.net`` routes every
peer address over the link shared with that peer: ``peer_routes=True``). The host
reaches the head's dashboard (the Jobs API) over the management link (``mgmt=True``).

Every node gets the custom resource ``region:<name>`` (one unit per GPU, or 1) so a job
may pin work to a region; the cluster runs with Ray's token authentication.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from taugrid.backends.ray import ray_local
from taugrid.lab import net

__all__ = ["DASHBOARD_PORT", "GCS_PORT", "HEALTH_CHECK_FAILURES", "span_cluster"]

GCS_PORT = 6379
DASHBOARD_PORT = 8265
"""Ports inside the head region's namespace (a fresh namespace has them all free)."""
HEALTH_CHECK_FAILURES = 15
"""Missed GCS health checks (1 s apart) before a node is dead: Ray's default is 30 s."""


def _node(n: net.Net, region: str, head: str, shape: ray_local.NodeShape) -> ray_local.NodeShape:
    ip = n.address(region, head) if region != head else n.addresses(head)[0]
    resources = {**shape.resources, f"region:{region}": float(shape.num_gpus or 1)}
    return shape.model_copy(update={"ip": ip, "netns": n.ns(region), "resources": resources})


def span_cluster(
    n: net.Net,
    head: str,
    shapes: Mapping[str, ray_local.NodeShape],
    state_dir: Path,
    token_file: Path,
) -> ray_local.LocalRayCluster:
    """A (not yet started) cluster with one node per region in ``shapes``, head first.

    ``head`` must be in ``shapes`` and linked to every other region there; the head binds
    its address on its first link, and each other node its address on its link to the
    head (``Net.address``), so Ray's traffic takes the direct shaped path.
    """
    if not (n.mgmt and n.peer_routes):
        raise ValueError("a spanning cluster needs Net(mgmt=True, peer_routes=True)")
    missing = [r for r in shapes if r != head and not n.has(head, r)]
    if head not in shapes or missing:
        raise ValueError(f"head {head} must be in shapes and linked to {missing or 'all'}")
    order = [head, *sorted(r for r in shapes if r != head)]
    nodes = [_node(n, r, head, shapes[r]) for r in order]
    return ray_local.LocalRayCluster(
        str(nodes[0].ip),
        GCS_PORT,
        DASHBOARD_PORT,
        nodes,
        state_dir,
        auth_token_file=ray_local.write_auth_token(token_file),
        # Health checks cross the shaped links too: a saturated slow link delays them,
        # and at the local default (5 missed, 1 s apart) a slowed region was declared
        # dead. 15 s tolerates a degraded link; a region cut off is still lost in ~15 s.
        health_check_failure_threshold=HEALTH_CHECK_FAILURES,
    )

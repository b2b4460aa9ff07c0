"""Cordon a Ray node: ask the GCS to drain it so that no new work lands there.

Used when a node is marked faulty (ECC, disk, lost). Ray has no public API for this;
``GcsClient.drain_node`` is the call behind the hidden ``ray drain-node`` command and
autoscaler v2. Reason PREEMPTION is used because Ray accepts it for busy nodes (IDLE
termination is refused while work runs). Running work is not killed by the drain;
the agent stops affected attempts itself.
"""

from __future__ import annotations

from taugrid.backends import errors

__all__ = ["drain_node"]


def drain_node(gcs_address: str, node_id: str, reason: str) -> None:
    """Mark ``node_id`` draining in the GCS at ``gcs_address``; raises on refusal."""
    import ray  # heavy; only the agent calls this (GcsClient is private API: no stubs)
    from ray.core.generated import autoscaler_pb2

    try:
        client = ray._raylet.GcsClient(address=gcs_address)  # type: ignore[attr-defined]
        accepted, why = client.drain_node(
            node_id,
            autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),  # type: ignore[attr-defined]
            reason,
            0,
        )
    except Exception as exc:  # the GCS client raises plain RuntimeErrors
        raise errors.RayRequestFailed(f"drain of node {node_id} failed: {exc}") from exc
    if not accepted:
        raise errors.RayRequestFailed(f"Ray refused to drain node {node_id}: {why}")

"""Where a waiting run will most likely run: the target of a runtime pre-warm hint.

A run that waits for GPUs is placed on the best cluster that has room once room frees
up. ``likely_cluster`` asks the placement cycle itself (same filters, scores and
weights) which cluster it would choose if every GPU were free now — CPU and memory
stay as reported, ``admitted`` is assumed and backoff ignored — so the hub can tell
that cluster's agent to prepare the run's runtime while the run waits. ``None`` when
no cluster could ever hold it. Pure: a function of the snapshot.
"""

from __future__ import annotations

import dataclasses

from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap

__all__ = ["likely_cluster"]


def _all_gpus_free(cluster: snap.ClusterView) -> snap.ClusterView:
    nodes = tuple(dataclasses.replace(n, gpus_free=n.gpus_total) for n in cluster.nodes)
    return dataclasses.replace(cluster, nodes=nodes)


def likely_cluster(
    run: snap.PendingRun, snapshot: snap.Snapshot, policy: cycle.Policy
) -> str | None:
    """The cluster ``run`` would be placed on if every GPU were free now."""
    emptied = dataclasses.replace(
        snapshot, clusters=tuple(_all_gpus_free(c) for c in snapshot.clusters)
    )
    as_head = dataclasses.replace(run, admitted=True, not_before=snapshot.now)
    return cycle.schedule(emptied, [as_head], policy)[0].cluster_id

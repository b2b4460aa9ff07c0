"""What the data-aware plugins need in the scheduling snapshot, read from the hub's state.

Owns the translation of the dataset registry and the active attempts into the defaulted
snapshot fields of ``scheduling.snapshot`` (the pure core never reads the store); the
agent's state report itself becomes a view in ``snapshot.cluster_from_report``:

- ``ClusterView.datasets`` from complete replicas in the cluster's region;
- ``ClusterView.releases`` from the cluster's active attempts: each gives its GPUs back
  at its ``max_runtime`` (or ``DEFAULT_RUN_S`` when it has none) after it started;
- ``PendingRun.datasets`` / ``runtime_key`` from the run's spec, and
  ``wait_near_data_s`` from the snapshot (``scheduling.plugins_data.wait_near_data``).

It also tells an agent where a run's inputs are in its region (``local_inputs``, sent
with the assignment and given to the job as ``TAU_INPUT_<NAME>``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from taugrid.dataplane import runtimes
from taugrid.lifecycle import states as st
from taugrid.scheduling import plugins_data
from taugrid.scheduling import snapshot as snap
from taugrid.store import data as store_data

if TYPE_CHECKING:
    from taugrid.hub.core import context

__all__ = ["DEFAULT_RUN_S", "cluster_fields", "local_inputs", "near_data", "with_needs"]

DEFAULT_RUN_S = 3600.0
_ACTIVE = {s.value for s in st.ACTIVE_ATTEMPT_STATES}
Held = tuple[dict[str, Any], dict[str, Any]]
"""An unreleased attempt row and its run row."""


def _releases(attempts: list[Held], now: float) -> tuple[tuple[float, float], ...]:
    out = []
    for a, run in attempts:
        if a["state"] not in _ACTIVE:
            continue
        spec = run["spec"]
        limit = spec.get("max_runtime_s") or DEFAULT_RUN_S
        started = a.get("started_at") or now
        gpus = float(spec.get("workers", 1) * spec.get("gpus_per_worker", 0))
        out.append((max(0.0, started + limit - now), gpus))
    return tuple(sorted(out))


def cluster_fields(
    row: dict[str, Any], now: float, complete: dict[str, Any], attempts: list[Held]
) -> dict[str, Any]:
    """Keyword fields for ``snap.ClusterView`` of one cluster row, from the datasets'
    complete regions (``DataStore.complete_regions``) and the cluster's unreleased
    attempts with their runs (read once per snapshot for every cluster)."""
    return {
        "datasets": tuple(sorted(d for d, regions in complete.items() if row["region"] in regions)),
        "releases": _releases(attempts, now),
    }


def with_needs(hub: context.Hub, run: dict[str, Any], view: snap.PendingRun) -> snap.PendingRun:
    """``view`` with the run's dataset needs and runtime key."""
    spec = run["spec"]
    inputs = spec.get("inputs", ()) or ()
    if not inputs and not spec.get("pip"):
        return view
    ds = store_data.DataStore(hub.engine)
    held = ds.complete_regions() if inputs else {}
    needs = []
    for i in inputs:
        did = store_data.dataset_id(i["dataset"])
        row = ds.get(did, [run["workspace"]])  # another workspace's dataset: not there
        size = int(row["size_bytes"]) if row and row["state"] == "ready" else 0
        needs.append(snap.DataNeed(did, size, held.get(did, ()) if row else ()))
    return dataclasses.replace(view, datasets=tuple(needs), runtime_key=runtimes.runtime_key(spec))


def near_data(pending: list[snap.PendingRun], snapshot: snap.Snapshot) -> list[snap.PendingRun]:
    """Fill ``wait_near_data_s`` of runs that need datasets."""
    return [
        dataclasses.replace(r, wait_near_data_s=plugins_data.wait_near_data(r, snapshot.clusters))
        if r.datasets
        else r
        for r in pending
    ]


def local_inputs(hub: context.Hub, run: dict[str, Any], cluster_id: str) -> dict[str, str]:
    """Input name (as in tau.yaml) → its complete replica in ``cluster_id``'s region: a
    path under the region's data root, or an object-store URL."""
    inputs = run["spec"].get("inputs") or ()
    row = hub.clusters.get(cluster_id)
    if not inputs or row is None:
        return {}
    here = {
        r["dataset_id"]: str(r["path"])
        for r in store_data.DataStore(hub.engine).replicas()
        if r["region"] == row["region"] and r["state"] == "complete"
    }
    wanted = {i["dataset"]: store_data.dataset_id(i["dataset"]) for i in inputs}
    return {name: here[did] for name, did in wanted.items() if did in here}

"""Moving a running run to another cluster when its job asks (``tau.request_relocation``).

Owns the hub's side of the third level of a pipeline's controller (docs/pipelines.md):
a job that cannot meet its goal where it runs — its cluster's CPUs cap the pipeline —
asks for a cluster with more free CPUs. ``consider`` asks the scheduling core, on
this tick's snapshot, where the run would go if it were waiting now, with the
cluster it runs on ruled out and the asked-for CPUs required (``plugins.RelocationFilter``):

- some cluster fits: the run remembers the move (``runs.relocation``: the clusters it
  left and the CPUs it asked for, which every later placement honours), its attempt is
  marked ``relocation`` and stopped by the next sync, and the stopped attempt requeues
  the run from its latest checkpoint without using up a retry, as a preemption does
  (``hub.runs.attempts``);
- none fits: the run stays, its *Progressing* phase turns to a warning, and a
  ``relocation_declined`` event says why, cluster by cluster.

The move is decided on a snapshot, so the room it saw may be gone by the time the run
is placed again: the run then waits for room elsewhere; it never returns to a cluster
it left.
"""

from __future__ import annotations

from typing import Any

from taugrid import payloads as wire
from taugrid.hub.core import context
from taugrid.hub.placement import snapshot
from taugrid.hub.runs import runs
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st

__all__ = ["consider"]


def consider(
    hub: context.Hub, run: dict[str, Any], a: dict[str, Any], ask: wire.RelocationRequest
) -> bool:
    """Move ``run`` off its attempt ``a``'s cluster if another has room; True if moved."""
    if a["failure_kind"] or run["cancel_requested"] or a["state"] != st.AttemptState.RUNNING:
        return False
    left = (run.get("relocation") or {}).get("away_from", [])
    moved = {"away_from": sorted({*left, a["cluster_id"]}), "cpus": ask.cpus}
    policy = hub.policy()
    target, _, _ = snapshot.probe(hub, {**run, "relocation": moved}, policy)
    if target.cluster_id is None:
        hub.runs.add_event(
            run["id"],
            "relocation_declined",
            {"asked": ask.reason, "cpus": ask.cpus, "why": target.reason},
        )
        why = f"asked to move ({ask.reason}); no cluster has the room now: {target.reason}"
        runs.phase(hub, run["id"], ph.Phase.PROGRESSING, ph.PhaseStatus.WARNING, "hub", why[:2000])
        return False
    why = f"Relocating to {target.cluster_id}: {ask.reason}"
    hub.runs.update_run(run["id"], relocation=moved)
    hub.runs.update_attempt(
        a["token"], failure_kind=st.FailureKind.RELOCATION.value, reason=why, event="relocating"
    )
    doc = {"asked": ask.reason, "cpus": ask.cpus, "to": target.cluster_id}
    hub.runs.add_event(run["id"], "relocation_accepted", doc)
    runs.phase(hub, run["id"], ph.Phase.COMPLETED, ph.PhaseStatus.WARNING, "hub", why)
    return True

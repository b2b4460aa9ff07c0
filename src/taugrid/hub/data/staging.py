"""Staging on placement: bring a placed run's datasets into its region before dispatch.

When placement sends a run to a cluster whose region lacks a complete replica of one of
its input datasets (the data plugins chose "move"), the scheduler still creates the
attempt — so the run is Placed, keeps its quota and its GPUs are reserved in the
snapshot — but marks it *held*: ``attempt.placement["hold"] == "staging"`` and
``attempt.placement["staging"]`` records what is moving. The agent's sync reply leaves a
held attempt out of its assignments (``hub.agents.agents``), so nothing starts.

Every scheduling cycle ``advance`` looks at each held attempt:

- every missing dataset has an open transfer into the region (``data_ops.replicate``,
  idempotent per dataset and destination, so several runs needing the same dataset in
  the same region share one transfer); its progress is the Placed phase's reason:
  ``staging dataset corpus@v1 into b: 12.0/200.0 MB, ETA 15 s``;
- all replicas complete (the destination agent verified every file's sha256 before
  the hub marks a replica complete) → the hold is lifted, the agent is woken and gets
  the assignment on its next sync;
- a transfer failed ``MAX_TRIES`` times since the attempt was placed (sha256 mismatch
  repeated, source unreachable), or no region holds a complete replica any more (source
  gone) → the attempt fails with ``FailureKind.DATA_STAGING`` and a reason naming the
  dataset, the region and the last error; the run is re-placed or fails per its retry
  policy (``hub.runs.attempts.end``), which also releases its quota. A region lost
  while staging follows the lost-contact path like any placed attempt.

State machine of ``placement["staging"]["state"]``::

    staging ──all replicas complete──▶ ready
    staging ──MAX_TRIES failures / no source──▶ failed
"""

from __future__ import annotations

import time
from typing import Any

from taugrid import errors
from taugrid.dataplane import wire
from taugrid.hub.core import context
from taugrid.hub.data import data_ops
from taugrid.hub.runs import attempts
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.store import data as store_data

__all__ = ["HOLD", "MAX_TRIES", "PROGRESS_EVERY_S", "advance", "hold", "missing", "placed"]

HOLD = "staging"
MAX_TRIES = 3
"""Failed transfers of one dataset into the region before staging gives up."""
PROGRESS_EVERY_S = 1.0
"""At most one progress update of the Placed phase per run this often."""

Doc = dict[str, Any]


def _region(hub: context.Hub, cluster_id: str) -> str | None:
    row = hub.clusters.get(cluster_id)
    return str(row["region"]) if row else None


def missing(hub: context.Hub, run: Doc, cluster_id: str) -> list[str]:
    """Input datasets of ``run`` without a complete replica in ``cluster_id``'s region."""
    inputs = run["spec"].get("inputs") or ()
    region = _region(hub, cluster_id)
    if not inputs or region is None:
        return []
    held = store_data.DataStore(hub.engine).complete_regions()
    dids = [store_data.dataset_id(i["dataset"]) for i in inputs]
    return [d for d in dict.fromkeys(dids) if region not in held.get(d, ())]


def hold(hub: context.Hub, cluster_id: str, datasets: list[str]) -> Doc:
    """Fields to merge into a new attempt's placement to hold it while ``datasets`` move."""
    staging = {"region": _region(hub, cluster_id), "datasets": datasets, "state": "staging"}
    return {"hold": HOLD, "staging": staging}


def placed(hub: context.Hub, run: Doc, attempt: Doc) -> None:
    """Start staging for a just-created held attempt and show it on the Placed phase."""
    datasets = attempt["placement"]["staging"]["datasets"]
    hub.runs.add_event(
        run["id"], "staging_started", {"attempt": attempt["number"], "datasets": datasets}
    )
    failure = _request(hub, run, attempt, datasets)
    if failure is not None:
        _fail(hub, run, attempt, failure)
        return
    reason = _progress(hub, attempt, datasets) or f"staging {', '.join(datasets)}"
    hub.runs.update_run(run["id"], reason=reason)
    _phase(hub, run["id"], ph.Phase.PLACED, ph.PhaseStatus.ACTIVE, reason)


def _request(hub: context.Hub, run: Doc, attempt: Doc, datasets: list[str]) -> str | None:
    """Make sure each dataset has an open transfer; an error message when one cannot."""
    region = attempt["placement"]["staging"]["region"]
    s = store_data.DataStore(hub.engine)
    for did in datasets:
        if _open(s, did, region) is not None:
            continue
        tries = _failures(s, did, region, attempt["created_at"])
        if len(tries) >= MAX_TRIES:
            last = tries[-1]["error"] or "unknown error"
            return f"copy of {did} into {region} failed {len(tries)} times (last: {last})"
        try:
            data_ops.replicate(hub, did, wire.ReplicateRequest(to_region=region), run["id"])
        except errors.TauError as exc:
            if region not in s.complete_regions().get(did, ()):
                return f"cannot copy {did} into {region}: {exc.message}"
    return None


def _open(s: store_data.DataStore, did: str, region: str) -> Doc | None:
    open_ = [t for t in s.transfers(store_data.ACTIVE_TRANSFER, did) if t["dst_region"] == region]
    return open_[0] if open_ else None


def _failures(s: store_data.DataStore, did: str, region: str, since: float) -> list[Doc]:
    return [
        t
        for t in s.transfers(("failed",), did)
        if t["dst_region"] == region and t["created_at"] >= since
    ]


def _progress(hub: context.Hub, attempt: Doc, datasets: list[str]) -> str | None:
    """``staging dataset X: n/N MB, ETA`` over the open transfers (None: none open)."""
    region = attempt["placement"]["staging"]["region"]
    s = store_data.DataStore(hub.engine)
    open_ = [t for d in datasets if (t := _open(s, d, region)) is not None]
    if not open_:
        return None
    done = sum(int(t["bytes_done"]) for t in open_)
    total = sum(int(t["bytes_total"]) for t in open_)
    rate = sum(float(t["rate_bps"]) for t in open_ if t["state"] == "active")
    eta = (total - done) / rate if rate > 0 else sum(float(t["estimate_s"]) for t in open_)
    queued = sum(t["state"] == "queued" for t in open_)
    names = ", ".join(datasets)
    return (
        f"staging dataset {names} into {region}: {done / 1e6:.1f}/{total / 1e6:.1f} MB, "
        f"ETA {eta:.0f} s" + (f" ({queued} queued for link bandwidth)" if queued else "")
    )


def advance(hub: context.Hub) -> None:
    """One pass over held attempts: request, report progress, release or fail."""
    placed, assigned = st.RunState.PLACED.value, st.AttemptState.ASSIGNED.value
    for a in hub.runs.current_attempts(placed, assigned):
        if (a["placement"] or {}).get("hold") != HOLD or a["cancel_requested"]:
            continue
        run = hub.runs.get_run(a["run_id"])
        if run is not None:
            _step(hub, run, a)


def _step(hub: context.Hub, run: Doc, a: Doc) -> None:
    left = missing(hub, run, a["cluster_id"])
    if not left:
        _release(hub, run, a)
        return
    failure = _request(hub, run, a, left)
    if failure is not None:
        _fail(hub, run, a, failure)
        return
    phase = hub.runs.phases(run["id"]).get(ph.Phase.PLACED)
    if phase is not None and time.time() - phase.ts < PROGRESS_EVERY_S:
        return
    reason = _progress(hub, a, left)
    if reason is not None:
        hub.runs.update_run(run["id"], reason=reason)
        _phase(hub, run["id"], ph.Phase.PLACED, ph.PhaseStatus.ACTIVE, reason)


def _lift(hub: context.Hub, a: Doc, state: str, **extra: Any) -> None:
    placement = dict(a["placement"])
    placement.pop("hold", None)
    placement["staging"] = {**placement["staging"], "state": state, **extra}
    hub.runs.update_attempt(a["token"], placement=placement, event=f"staging_{state}")


def _release(hub: context.Hub, run: Doc, a: Doc) -> None:
    took = time.time() - a["created_at"]
    _lift(hub, a, "ready", seconds=round(took, 3))
    datasets = ", ".join(a["placement"]["staging"]["datasets"])
    hub.runs.update_run(run["id"], reason="")
    _phase(
        hub,
        run["id"],
        ph.Phase.PLACED,
        ph.PhaseStatus.DONE,
        f"cluster {a['cluster_id']}; attempt {a['number']}; staged {datasets} in {took:.1f} s",
    )
    hub.runs.set_phase(
        run["id"],
        ph.PhaseRecord(
            ph.Phase.SCHEDULED,
            ph.PhaseStatus.ACTIVE,
            "agent",
            f"waiting for agent of {a['cluster_id']} to start attempt {a['number']}",
            time.time(),
        ),
    )
    hub.notify(a["cluster_id"])


def _fail(hub: context.Hub, run: Doc, a: Doc, why: str) -> None:
    message = f"data staging failed: {why}"
    _lift(hub, a, "failed", error=why)
    _phase(hub, run["id"], ph.Phase.PLACED, ph.PhaseStatus.WARNING, message)
    fresh = hub.runs.get_attempt(a["token"]) or a
    attempts.end(hub, fresh, st.AttemptState.FAILED, message, kind=st.FailureKind.DATA_STAGING)


def _phase(
    hub: context.Hub, run_id: str, phase: ph.Phase, status: ph.PhaseStatus, reason: str
) -> None:
    hub.runs.set_phase(run_id, ph.PhaseRecord(phase, status, "data plane", reason, time.time()))

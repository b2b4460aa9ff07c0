"""The hub's scheduling loop: the live shell around the pure ``scheduling.cycle``.

Each tick: (0) lost contact — clusters whose lease expired become Unknown; after the
grace period their restartable attempts are revoked and their runs requeued;
staging — held attempts whose datasets are still moving advance (``hub.data.staging``);
limits — attempts running past ``resilience.max_runtime`` end as ``timeout`` (``hub.runs.limits``);
(1-5) build an immutable ``Snapshot`` (``hub.placement.snapshot``) from agent reports, node marks
and quota usage,
and call ``scheduling.cycle.schedule``; (6) dispatch — persist admissions and create
attempts (the agent pulls them on its next sync, unless a dispatch gate holds them:
``hub.data.staging`` while their datasets move into the region); (7) requeue — runs that did not fit
keep their reason for ``tau queue``/``tau run status`` (written when it changed).
A tick reads the cluster rows and the unreleased attempts with their runs once, and reads
them again only when one of its own steps changed them; the store's live rows are found by
index (``ix_runs_quota_held``, ``ix_attempts_released``), so a tick's cost follows the
live work, not the runs the store keeps.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

from taugrid.hub.core import context
from taugrid.hub.data import staging
from taugrid.hub.placement import data_view, snapshot
from taugrid.hub.runs import attempts, guests, limits, runs, sweeps
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.render import command, runspec
from taugrid.render import resolve as rs
from taugrid.scheduling import cycle

__all__ = ["Scheduler", "tick"]

log = logging.getLogger(__name__)


def _admit(hub: context.Hub, run: dict[str, Any], d: cycle.Decision) -> bool:
    """Persist the admission; False when the run changed meanwhile (e.g. cancelled)."""
    if run["state"] == st.RunState.QUEUED.value:
        model = run["gpu_model"] or d.flavor or _charged_model(hub, run)
        reason = "admitted" + (f", borrowing {d.borrowed:g} GPUs" if d.borrowed else "")
        admitted = hub.runs.transition(
            run["id"],
            (st.RunState.QUEUED.value,),
            state=st.RunState.ADMITTED.value,
            quota_held=True,
            gpu_model=model,
            reason=reason,
            event="admitted",
        )
        if not admitted:
            return False
        run = {**run, "reason": reason}  # as stored now: the reason below compares with it
        runs.phase(
            hub,
            run["id"],
            ph.Phase.ADMITTED,
            ph.PhaseStatus.DONE,
            "queue",
            f"quota reserved in queue {run['spec']['queue']}",
        )
    if d.outcome is cycle.Outcome.ADMITTED:
        _unplaced(hub, run, d)
    return True


def _unplaced(hub: context.Hub, run: dict[str, Any], d: cycle.Decision) -> None:
    """Admitted, no cluster takes it now; a warning when no cluster ever will as set up.
    Written only when it changed: a run that waits for capacity gets the same answer
    every tick, and its reason and phase were written with the first."""
    status, why = ph.PhaseStatus.ACTIVE, d.reason
    reason = f"waiting for capacity: {d.reason}"
    if d.unresolvable:
        status = ph.PhaseStatus.WARNING
        why = reason = (
            f"no registered cluster can ever take this run as the platform is set up "
            f"({d.reason}); cancel it and resubmit with allowed regions, compliance or "
            "compute that a cluster offers (`tau cluster list`), or ask the platform team "
            "for such capacity"
        )
    if run["reason"] != reason:
        hub.runs.update_run(run["id"], reason=reason)
        runs.phase(hub, run["id"], ph.Phase.PLACED, status, "scheduler", why)


def _image_unused(hub: context.Hub, run: dict[str, Any], cluster_id: str) -> str:
    """Said where it is true: a Ray cluster runs the job in its nodes' Python
    environment, not in the image tau.yaml names (a Kubernetes region uses it)."""
    image = rs.named_image(run["spec"])
    cluster = hub.platform.cluster(cluster_id)
    if image is None or cluster is None or cluster.backend == "kubernetes":
        return ""
    hub.runs.add_event(run["id"], "image_not_used", {"image": image, "cluster": cluster_id})
    return (
        f"; runtime.image {image} is not used there: a Ray cluster runs jobs in its "
        "nodes' Python environment"
    )


def _charged_model(hub: context.Hub, run: dict[str, Any]) -> str | None:
    team = hub.platform.team(run["team"])
    return team.quotas[0].gpu_model if team and team.quotas and run["gpus"] else None


def _place(hub: context.Hub, run: dict[str, Any], d: cycle.Decision) -> None:
    assert d.cluster_id is not None
    if not _admit(hub, run, d):
        return
    placement = {
        "cluster": d.cluster_id,
        "reason": d.reason,
        "objective": d.objective,
        "weights": d.weights,
        "capacity": d.capacity,
        "nodes": list(d.nodes) if command.pinnable(runspec.read(run["spec"])) else [],
    } | guests.placement_doc(d)
    to_stage = staging.missing(hub, run, d.cluster_id)  # dispatch gate: data not there yet
    if to_stage:
        placement |= staging.hold(hub, d.cluster_id, to_stage)
    record = runs.record_of(hub, run)  # FENCE names the attempt before its agent sees it
    attempt = hub.runs.create_attempt(
        run["id"],
        d.cluster_id,
        placement,
        verdicts=[dataclasses.asdict(v) for v in d.verdicts],
        before_commit=record.set_fence,
    )
    if attempt is None:
        return
    hub.notify(d.cluster_id)
    if attempt["number"] == 1:
        hub.metrics.observe_scheduling(run, d.cluster_id)
    if attempt["number"] > 1:  # a new attempt starts its per-attempt phases afresh
        for p in ph.ATTEMPT_PHASES[1:]:
            hub.runs.set_phase(
                run["id"],
                ph.PhaseRecord(
                    p,
                    ph.PhaseStatus.PENDING,
                    "scheduler",
                    f"attempt {attempt['number']}",
                    time.time(),
                ),
                reset=True,
            )
    if to_stage:
        staging.placed(hub, run, attempt)
        runs.write_run_json(hub, run["id"])
        return
    runs.phase(
        hub,
        run["id"],
        ph.Phase.PLACED,
        ph.PhaseStatus.DONE,
        "scheduler",
        f"cluster {d.cluster_id} ({d.reason}); attempt {attempt['number']}"
        + _image_unused(hub, run, d.cluster_id),
    )
    runs.phase(
        hub,
        run["id"],
        ph.Phase.SCHEDULED,
        ph.PhaseStatus.ACTIVE,
        "agent",
        f"waiting for agent of {d.cluster_id} to start attempt {attempt['number']}",
    )
    runs.write_run_json(hub, run["id"])


def _dispatch(hub: context.Hub, run: dict[str, Any], d: cycle.Decision) -> None:
    for victim in d.preempt:
        attempts.preempt(hub, victim, f"quota for {run['id']} (priority {run['priority']})")
    if d.outcome is cycle.Outcome.PLACED:
        _place(hub, run, d)
    elif d.outcome is cycle.Outcome.ADMITTED:
        _admit(hub, run, d)
    elif d.outcome is cycle.Outcome.WAITING_QUOTA and run["reason"] != d.reason:
        hub.runs.update_run(run["id"], reason=d.reason)
        runs.phase(hub, run["id"], ph.Phase.ADMITTED, ph.PhaseStatus.ACTIVE, "queue", d.reason)


def _lost_contact(hub: context.Hub, now: float, rows: list[dict[str, Any]]) -> bool:
    """Leases that ran out make clusters Unknown, grace that ran out revokes their
    attempts; True when a cluster's row changed."""
    changed = False
    for c in rows:
        # a lease that ran out while this hub was down is not the cluster's silence
        expires = max(c["lease_expires"], hub.started_at + hub.config.lease_s)
        if c["state"] in ("ready", "degraded", "unavailable") and expires < now:
            hub.clusters.set_state(c["id"], "unknown")
            hub.runs.add_event(None, "cluster_unknown", {"cluster": c["id"]})
            log.warning("cluster %s lost contact; Unknown", c["id"])
            changed = True
        if c["state"] == "unknown" and expires + hub.config.grace_s < now:
            _replace_lost(hub, c["id"])
    return changed


def _replace_lost(hub: context.Hub, cluster_id: str) -> None:
    for a in hub.runs.attempts_on_cluster(cluster_id):
        if not a["revoked"] and a["state"] in {s.value for s in st.ACTIVE_ATTEMPT_STATES}:
            attempts.end(
                hub,
                a,
                st.AttemptState.FAILED,
                "cluster lost contact beyond the grace period",
                kind=st.FailureKind.LOST_CONTACT,
                revoke=True,
            )


def tick(hub: context.Hub, policy: cycle.Policy, now: float | None = None) -> list[cycle.Decision]:
    """One full cycle (phases 0-7); returns the decisions for tests and metrics."""
    now = time.time() if now is None else now
    clusters = hub.clusters.all()  # each read once a tick unless this tick changed it
    if _lost_contact(hub, now, clusters):
        clusters = hub.clusters.all()
    staging.advance(hub)
    sweeps.advance(hub)  # stops trials that fall behind, submits the next ones
    live = hub.runs.unreleased_with_runs()
    if limits.enforce_max_runtime(hub, now, live):
        live = hub.runs.unreleased_with_runs()
    waiting = hub.runs.waiting_runs()
    if not waiting:
        return []
    by_id = {r["id"]: r for r in waiting}
    view = snapshot.build(hub, now, clusters, live)
    pending = data_view.near_data([snapshot.pending_view(r, hub) for r in waiting], view)
    decisions = cycle.schedule(view, pending, policy)
    for d in decisions:
        _dispatch(hub, by_id[d.run_id], d)
    return decisions


class Scheduler:
    """Runs ``tick`` every ``cycle_s`` in a daemon thread until ``stop``, while this
    replica is the leader (``hub.is_leader``; always on a single hub)."""

    def __init__(self, hub: context.Hub, policy: cycle.Policy | None = None) -> None:
        self.hub = hub
        self.policy = policy or hub.policy()
        self._stop = threading.Event()
        self._wake = hub.schedule_wakeup  # also set by agent syncs that free capacity
        self._thread = threading.Thread(target=self._loop, name="tau-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            if not self.hub.is_leader():  # a standby replica: the leader schedules
                self._wake.wait(self.hub.config.cycle_s)
                self._wake.clear()
                continue
            try:
                tick(self.hub, self.policy)
            except Exception:  # the loop must survive one bad cycle; it is logged
                log.exception("scheduling cycle failed")
            self.hub.metrics.tick.observe(time.monotonic() - started)
            self._wake.wait(self.hub.config.cycle_s)
            self._wake.clear()

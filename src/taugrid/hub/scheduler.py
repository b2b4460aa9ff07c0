"""The hub's scheduling loop: the live shell around the pure ``scheduling.cycle``.

Each tick: (0) lost contact — clusters whose lease expired become Unknown; after the
grace period their restartable attempts are revoked and their runs requeued;
limits — attempts running past ``resilience.max_runtime`` end as ``timeout`` (``hub.limits``);
staging — held attempts whose datasets are still moving advance (``hub.staging``);
(1-5) build an immutable ``Snapshot`` from agent reports, node marks and quota usage,
and call ``scheduling.cycle.schedule``; (6) dispatch — persist admissions and create
attempts (the agent pulls them on its next sync, unless a dispatch gate holds them:
``hub.staging`` while their datasets move into the region); (7) requeue — runs that did not fit
keep their reason for ``tau queue``/``tau run status``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any

from taugrid.hub import agents, context, data_view, limits, runs, staging
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.render import command, runspec
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap

__all__ = ["LIVE_STATES", "Scheduler", "build_snapshot", "pending_view", "platform_fields", "tick"]

LIVE_STATES = ("ready", "degraded")
"""Cluster states that take new work (``unavailable``: its agent says it cannot run jobs)."""

log = logging.getLogger(__name__)


def pending_view(run: dict[str, Any], hub: context.Hub | None = None) -> snap.PendingRun:
    """The run as the core sees it; with ``hub``, also its datasets and runtime key."""
    s = run["spec"]
    view = snap.PendingRun(
        run_id=run["id"],
        team=run["team"],
        priority=run["priority"],
        created_at=run["created_at"],
        workers=s["workers"],
        gpus_per_worker=s["gpus_per_worker"],
        cpus_per_worker=s["cpus_per_worker"],
        memory_per_worker=s["memory_per_worker_bytes"],
        gpu_model=s.get("gpu_model"),
        allowed_regions=tuple(s.get("allowed_regions", ())),
        admitted=run["state"] == st.RunState.ADMITTED.value,
        not_before=run["not_before"],
        objective=s.get("objective"),
        communication=s.get("communication"),
        compliance=tuple(s.get("compliance", ())),
        runtime_s=s.get("max_runtime_s"),
    )
    return data_view.with_needs(hub, run, view) if hub is not None else view


def _cluster_view(hub: context.Hub, row: dict[str, Any], now: float) -> snap.ClusterView:
    faulty = {m["node_id"] for m in hub.clusters.open_marks(row["id"])}
    ready = row["state"] in LIVE_STATES and row["lease_expires"] > now
    view = snap.cluster_from_report(
        row["id"],
        row["region"],
        ready,
        row["report"],
        faulty=faulty,
        **data_view.cluster_fields(hub, row, now),
        **platform_fields(hub, row),
    )
    return _reserve_unseen(hub, row, view, now)


def platform_fields(hub: context.Hub, row: dict[str, Any]) -> dict[str, Any]:
    """What platform.yaml declares of a cluster: its region's compliance, its interconnect."""
    region = next((r for r in hub.platform.regions if r.name == row["region"]), None)
    spec = next((c for c in region.clusters if c.name == row["id"]), None) if region else None
    return {
        "compliance": tuple(region.compliance) if region else (),
        "interconnect_gbps": spec.interconnect_gbps if spec else 0.0,
    }


def _reserve_unseen(
    hub: context.Hub, row: dict[str, Any], view: snap.ClusterView, now: float
) -> snap.ClusterView:
    """Take room for attempts the agent's report may not show yet.

    The hub's ledger (the GPUs of the cluster's unreleased attempts) is a lower bound on
    the GPUs in use: while the report shows fewer in use — an attempt assigned after it
    was taken, or Ray's view lagging a job — the newest attempts are reserved until the
    ledger is covered. An attempt the report already counts is not reserved again: the
    agent reports at once when an attempt starts or ends, so freed GPUs are placed
    again without waiting for the next periodic report.
    """
    held = []
    attempts = hub.runs.attempts_on_cluster(row["id"])
    runs_by_id = hub.runs.get_runs([a["run_id"] for a in attempts])
    for a in attempts:
        run = runs_by_id.get(a["run_id"])
        if run is not None:
            bound = tuple((a["placement"] or {}).get("nodes") or ())
            held.append((-(a["started_at"] or now), -a["token"], pending_view(run), bound))
    ledger = sum(p.workers * p.gpus_per_worker for _s, _t, p, _b in held)
    deficit, unseen = ledger - _gpus_used(view), []
    for newest in sorted(held, key=lambda h: h[:2]):
        if deficit <= 0:
            break
        unseen.append(newest)
        deficit -= newest[2].workers * newest[2].gpus_per_worker
    # On the nodes the cycle bound them to; attempts from before node binding first fit,
    # in the order they were placed (oldest token first), as the cycle that placed them.
    for _s, _t, p, bound in sorted(unseen, key=lambda h: -h[1]):
        view = cycle.take(p, view, bound) if bound else cycle.reserve(p, view)
    return view


def _gpus_used(view: snap.ClusterView) -> float:
    return sum(n.gpus_total - n.gpus_free for n in view.nodes if n.alive)


def build_snapshot(hub: context.Hub, now: float) -> snap.Snapshot:
    """Clusters, quotas (with cohorts and limits) and quota holders, as of ``now``."""
    usage = hub.runs.quota_usage()
    quotas = tuple(
        snap.QuotaView(
            t.name,
            q.gpu_model,
            q.nominal,
            usage.get((t.name, q.gpu_model), 0),
            cohort=t.cohort,
            borrowing_limit=q.borrowing_limit,
            lending_limit=q.lending_limit,
            strategy=t.queueing_strategy,
        )
        for t in hub.platform.teams
        for q in t.quotas
    )
    admitted = tuple(
        snap.AdmittedRun(
            r["id"], r["team"], r["gpu_model"] or "", r["gpus"], r["priority"], r["created_at"]
        )
        for r in hub.runs.holding_quota()
        if r["gpus"]
    )
    clusters = tuple(_cluster_view(hub, c, now) for c in hub.clusters.all())
    return snap.Snapshot(now=now, clusters=clusters, quotas=quotas, admitted=admitted)


def _phase(
    hub: context.Hub, run_id: str, phase: ph.Phase, status: ph.PhaseStatus, source: str, reason: str
) -> None:
    hub.runs.set_phase(run_id, ph.PhaseRecord(phase, status, source, reason, time.time()))


def _admit(hub: context.Hub, run: dict[str, Any], d: cycle.Decision) -> bool:
    """Persist the admission; False when the run changed meanwhile (e.g. cancelled)."""
    if run["state"] == st.RunState.QUEUED.value:
        model = run["gpu_model"] or d.flavor or _charged_model(hub, run)
        admitted = hub.runs.transition(
            run["id"],
            (st.RunState.QUEUED.value,),
            state=st.RunState.ADMITTED.value,
            quota_held=True,
            gpu_model=model,
            reason="admitted" + (f", borrowing {d.borrowed:g} GPUs" if d.borrowed else ""),
            event="admitted",
        )
        if not admitted:
            return False
        _phase(
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
    """Admitted, no cluster takes it now; a warning when no cluster ever will as set up."""
    if not d.unresolvable:
        hub.runs.update_run(run["id"], reason=f"waiting for capacity: {d.reason}")
        _phase(hub, run["id"], ph.Phase.PLACED, ph.PhaseStatus.ACTIVE, "scheduler", d.reason)
        return
    why = (
        f"no registered cluster can ever take this run as the platform is set up ({d.reason}); "
        "cancel it and resubmit with allowed regions, compliance or compute that a cluster "
        "offers (`tau cluster list`), or ask the platform team for such capacity"
    )
    hub.runs.update_run(run["id"], reason=why)
    _phase(hub, run["id"], ph.Phase.PLACED, ph.PhaseStatus.WARNING, "scheduler", why)


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
        "verdicts": [dataclasses.asdict(v) for v in d.verdicts],
        "nodes": list(d.nodes)
        if command.pinnable(runspec.RunSpec.model_validate(run["spec"]))
        else [],
    }
    to_stage = staging.missing(hub, run, d.cluster_id)  # dispatch gate: data not there yet
    if to_stage:
        placement |= staging.hold(hub, d.cluster_id, to_stage)
    attempt = hub.runs.create_attempt(run["id"], d.cluster_id, placement)
    if attempt is None:
        return
    runs.record_of(hub, run).set_fence(attempt["token"])
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
    _phase(
        hub,
        run["id"],
        ph.Phase.PLACED,
        ph.PhaseStatus.DONE,
        "scheduler",
        f"cluster {d.cluster_id} ({d.reason}); attempt {attempt['number']}",
    )
    _phase(
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
        agents.preempt(hub, victim, f"quota for {run['id']} (priority {run['priority']})")
    if d.outcome is cycle.Outcome.PLACED:
        _place(hub, run, d)
    elif d.outcome is cycle.Outcome.ADMITTED:
        _admit(hub, run, d)
    elif d.outcome is cycle.Outcome.WAITING_QUOTA and run["reason"] != d.reason:
        hub.runs.update_run(run["id"], reason=d.reason)
        _phase(hub, run["id"], ph.Phase.ADMITTED, ph.PhaseStatus.ACTIVE, "queue", d.reason)


def _lost_contact(hub: context.Hub, now: float) -> None:
    for c in hub.clusters.all():
        if c["state"] in ("ready", "degraded", "unavailable") and c["lease_expires"] < now:
            hub.clusters.set_state(c["id"], "unknown")
            hub.runs.add_event(None, "cluster_unknown", {"cluster": c["id"]})
            log.warning("cluster %s lost contact; Unknown", c["id"])
        if c["state"] == "unknown" and c["lease_expires"] + hub.config.grace_s < now:
            _replace_lost(hub, c["id"])


def _replace_lost(hub: context.Hub, cluster_id: str) -> None:
    for a in hub.runs.attempts_on_cluster(cluster_id):
        if not a["revoked"] and a["state"] in {s.value for s in st.ACTIVE_ATTEMPT_STATES}:
            agents.end_attempt(
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
    _lost_contact(hub, now)
    limits.enforce_max_runtime(hub, now)
    staging.advance(hub)
    waiting = hub.runs.waiting_runs()
    if not waiting:
        return []
    by_id = {r["id"]: r for r in waiting}
    snapshot = build_snapshot(hub, now)
    pending = data_view.near_data([pending_view(r, hub) for r in waiting], snapshot)
    decisions = cycle.schedule(snapshot, pending, policy)
    for d in decisions:
        _dispatch(hub, by_id[d.run_id], d)
    return decisions


class Scheduler:
    """Runs ``tick`` every ``cycle_s`` in a daemon thread until ``stop``, while this
    replica is the leader (``hub.is_leader``; always on a single hub)."""

    def __init__(self, hub: context.Hub, policy: cycle.Policy | None = None) -> None:
        self.hub = hub
        self.policy = policy or cycle.policy_from(hub.platform.scheduling)
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

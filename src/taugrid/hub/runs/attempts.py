"""The attempt lifecycle in the hub: how an attempt ends and what its run does next.

Owns the state machine after dispatch (docs/ARCHITECTURE.md, "The run flow as
implemented"; states in ``lifecycle.states``): an
attempt ends (succeeded, failed with a ``FailureKind``, stopped, revoked); the run is
then retried from its latest checkpoint (``retry_on``, ``max_retries``, backoff;
preemption and relocation never use up a retry), finished (Completed, Artifacts saved
from the record), or cancelled; ``preempt`` marks an attempt for eviction
(``hub.placement.relocation`` marks one to move the same way); ``check_released``
closes *Released* once quota is back and every attempt's GPUs are free, then writes the
record's ``COMPLETE``. An attempt ends once: the first of two deciders that read it at
the same time wins (``RunStore.claim_attempt``), the other does nothing. Fencing
(``hub.runs.fencing``) then revokes the ended attempt's token, first of all else.
Called by the sync endpoint (``hub.agents.agents``), the scheduler (preemption, lost contact),
run limits and data staging; it imports none of them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from taugrid.hub.core import context, pools
from taugrid.hub.runs import fencing, guests, nodehealth, results, runs
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import reasons
from taugrid.lifecycle import states as st
from taugrid.record import checkpoints, layout
from taugrid.spec import units

__all__ = ["UPLOAD_SOURCE", "artifacts", "check_released", "end", "preempt"]

log = logging.getLogger(__name__)

_DEFAULT_RETRY_ON = ("node_failure", "preemption", "lost_contact", "data_staging")

UPLOAD_SOURCE = "agent upload"
"""The source of *Artifacts saved* while the agent's final upload waits for the store."""


def end(
    hub: context.Hub,
    a: dict[str, Any],
    state: st.AttemptState,
    message: str,
    *,
    kind: st.FailureKind | None = None,
    exit_code: int | None = None,
    revoke: bool = False,
    uploads_pending: str = "",
    adopted: checkpoints.Adoption | None = None,
) -> None:
    """Record the end of an attempt and decide the run's next state. ``adopted``: the
    checkpoints its agent adopted in the job's scratch (``agent.records.recordsync``);
    ``uploads_pending``: why its outputs are not in the record store yet."""
    ordered = next((k for k in st.HUB_STOPPED if k.value == a["failure_kind"]), None)
    # the hub stopped it; a job on a node being reclaimed may also die with its node first
    reclaimed = ordered is st.FailureKind.RECLAIM and state is st.AttemptState.FAILED
    if ordered is not None and (state is st.AttemptState.STOPPED or reclaimed):
        state, kind = st.AttemptState.FAILED, ordered
        message = a["reason"] or message
    if not hub.runs.claim_attempt(a["token"], a["state"], state.value):
        log.info(
            "attempt %s changed from %s before it could end %s (%s): ended once, by the other",
            a["token"],
            a["state"],
            state.value,
            message,
        )
        return
    revoked_at = fencing.revoke(hub, a)  # then the token stops being valid
    if state is st.AttemptState.FAILED:  # a log that blames the node: suspect it, retry
        kind = nodehealth.suspect(hub, a, message, kind)
    hub.runs.update_attempt(
        a["token"],
        state=state.value,
        ended_at=time.time(),
        reason=reasons.detail(message)[-2000:],
        exit_code=exit_code,
        failure_kind=kind.value if kind else None,
        revoked=revoke or a["revoked"],
        event=f"attempt_{state.value}",
    )
    if state is st.AttemptState.FAILED:
        hub.metrics.failures.labels(kind=(kind or st.FailureKind.EXIT_NONZERO).value).inc()
    for guest in guests.clusters_of(a["placement"]):  # a span: its guests stop their nodes
        hub.notify(guest)
    run = hub.runs.get_run(a["run_id"])
    if run is None or run["current_token"] != a["token"]:
        return
    adoption = fencing.adopt(hub, run, a, revoked_at)  # what it wrote but never committed
    if adopted is not None:
        adoption.adopted += adopted.adopted
        adoption.unusable += adopted.unusable
    if state is st.AttemptState.SUCCEEDED:
        _succeeded(hub, run, uploads_pending)
    elif run["cancel_requested"]:
        _finish(hub, run, st.RunState.CANCELLED, ph.PhaseStatus.SKIPPED, "cancelled by user")
    else:
        _failed(hub, run, a, kind or st.FailureKind.EXIT_NONZERO, message, exit_code)
    fencing.report(hub, run["id"], a, adoption)


def _finish(
    hub: context.Hub, run: dict[str, Any], state: st.RunState, status: ph.PhaseStatus, reason: str
) -> None:
    hub.runs.update_run(
        run["id"], state=state.value, quota_held=False, reason=reason, event=state.value
    )
    runs.phase(hub, run["id"], ph.Phase.COMPLETED, status, "ray job", reason)
    runs.close_scheduled(hub, run["id"], state)
    if state is not st.RunState.SUCCEEDED:
        runs.phase(
            hub,
            run["id"],
            ph.Phase.PROGRESSING,
            ph.PhaseStatus.SKIPPED,
            "hub",
            f"run {state.value}",
        )
    if state is st.RunState.CANCELLED:
        runs.phase(hub, run["id"], ph.Phase.ARTIFACTS_SAVED, ph.PhaseStatus.SKIPPED, "hub", reason)
    runs.phase(
        hub,
        run["id"],
        ph.Phase.RELEASED,
        ph.PhaseStatus.ACTIVE,
        "hub",
        "quota released; waiting for GPUs",
    )


def _succeeded(hub: context.Hub, run: dict[str, Any], uploads_pending: str = "") -> None:
    runs.phase(hub, run["id"], ph.Phase.PROGRESSING, ph.PhaseStatus.DONE, "metrics", "job finished")
    _finish(hub, run, st.RunState.SUCCEEDED, ph.PhaseStatus.DONE, "exit code 0")
    if uploads_pending:  # the agent uploads them once the store answers (``uploads``)
        why = f"outputs not in the record store yet: {uploads_pending}"
        runs.phase(
            hub, run["id"], ph.Phase.ARTIFACTS_SAVED, ph.PhaseStatus.ACTIVE, UPLOAD_SOURCE, why
        )
        return
    artifacts(hub, run)


def artifacts(hub: context.Hub, run: dict[str, Any]) -> None:
    """*Artifacts saved* from what the record holds (and the results export, if any)."""
    rec = runs.record_of(hub, run)
    outputs = run["spec"].get("outputs", [])
    missing = rec.missing_outputs(outputs)
    files = rec.files(layout.ARTIFACTS_DIR)
    if missing:
        runs.phase(
            hub,
            run["id"],
            ph.Phase.ARTIFACTS_SAVED,
            ph.PhaseStatus.FAILED,
            "files",
            f"missing outputs: {', '.join(missing)} (declared in tau.yaml data.outputs)",
        )
    elif url := results.output_url(hub, run["workspace"], run["id"], run["spec"]):
        results.save(hub, run, url)
    elif files:
        runs.phase(
            hub,
            run["id"],
            ph.Phase.ARTIFACTS_SAVED,
            ph.PhaseStatus.DONE,
            "files",
            f"{units.plural(len(files), 'file')} in artifacts/",
        )
    else:
        runs.phase(
            hub,
            run["id"],
            ph.Phase.ARTIFACTS_SAVED,
            ph.PhaseStatus.SKIPPED,
            "files",
            "no outputs declared",
        )


def preempt(hub: context.Hub, run_id: str, why: str) -> None:
    """Evict a run's attempt so that higher-priority work can have its quota.

    The attempt is marked (``failure_kind=preemption``); the next sync tells its agent
    to stop it, and the stopped attempt ends as a ``Preempted`` failure that requeues
    the run from its latest checkpoint without consuming a retry. A run that has not
    started yet just gives its quota back and waits again.
    """
    run = hub.runs.get_run(run_id)
    if run is None or run["state"] in {s.value for s in st.TERMINAL_RUN_STATES}:
        return
    reason = f"Preempted: {why}"
    if run["current_token"] is None or run["state"] in (
        st.RunState.QUEUED.value,
        st.RunState.ADMITTED.value,
    ):
        hub.runs.update_run(
            run_id,
            state=st.RunState.QUEUED.value,
            quota_held=False,
            reason=reason,
            event="preempted",
        )
        runs.phase(hub, run_id, ph.Phase.ADMITTED, ph.PhaseStatus.PENDING, "queue", reason)
        return
    hub.runs.update_attempt(
        run["current_token"],
        failure_kind=st.FailureKind.PREEMPTION.value,
        reason=reason,
        event="preempting",
    )
    runs.phase(hub, run_id, ph.Phase.COMPLETED, ph.PhaseStatus.WARNING, "queue", reason)


def reclaim(hub: context.Hub, cluster_id: str, node_id: str, why: str) -> list[str]:
    """A spot node is being taken back: every running attempt on it is marked
    (``failure_kind=reclaim``); its agent warns the job, stops it after the hub's
    ``reclaim_grace_s``, and the run is placed again from its newest checkpoint without
    using up a retry. Returns the runs warned."""
    warned = []
    for a in hub.runs.attempts_on_cluster(cluster_id):
        run = hub.runs.get_run(a["run_id"])
        active = a["state"] in {s.value for s in st.ACTIVE_ATTEMPT_STATES}
        if run is None or not active or node_id not in (a["nodes"] or []):
            continue
        if run["current_token"] != a["token"] or a["failure_kind"]:
            continue
        reason = f"Reclaimed: {why}"
        hub.runs.update_attempt(
            a["token"],
            failure_kind=st.FailureKind.RECLAIM.value,
            reason=reason,
            event="reclaim_notice",
        )
        grace = f"; stopped in {hub.config.reclaim_grace_s:g}s, then placed again"
        runs.phase(
            hub, run["id"], ph.Phase.COMPLETED, ph.PhaseStatus.WARNING, "node", reason + grace
        )
        warned.append(run["id"])
    if warned:
        hub.notify(cluster_id)  # the agent hears of it now, not at its next report
    return warned


def _failed(
    hub: context.Hub,
    run: dict[str, Any],
    a: dict[str, Any],
    kind: st.FailureKind,
    message: str,
    exit_code: int | None,
) -> None:
    hub.runs.add_event(run["id"], "failure_detail", {"attempt": a["number"], "text": message})
    spec = run["spec"]
    retry_on = list(spec.get("retry_on") or _DEFAULT_RETRY_ON)
    left = int(spec.get("max_retries", 0)) - (run["attempts_used"] - 1)
    if kind in st.HUB_STOPPED:  # Kueue semantics: an eviction or a move never uses up retries
        retry_on, left = [kind.value], max(left, 1)
    if kind is st.FailureKind.STALL:
        retry_on, left, message = nodehealth.stall_retry(hub, run, retry_on, left, message)
    if kind is st.FailureKind.RECLAIM:
        left, message = pools.past_restarts(hub, run, left, message)
    lost = _lost_steps(hub, a)
    if st.is_retryable(kind, retry_on, left):
        delay = 0.0 if kind in st.HUB_STOPPED else _backoff(spec, run["attempts_used"])
        resume = runs.latest_checkpoint(hub, run)
        hub.runs.update_run(
            run["id"],
            state=st.RunState.QUEUED.value,
            quota_held=False,
            not_before=time.time() + delay,
            reason=f"attempt {a['number']} failed ({kind.value}); retrying in {delay:.0f}s",
            resume_from=resume,
            event="retry",
        )
        hub.runs.add_event(run["id"], "lost_work", {"attempt": a["number"], "lost_steps": lost})
        _phases_for_retry(hub, run["id"], a, kind, resume)
        return
    why = reasons.summary(kind.value, message, exit_code)
    _finish(hub, run, st.RunState.FAILED, ph.PhaseStatus.FAILED, why)
    runs.phase(
        hub, run["id"], ph.Phase.ARTIFACTS_SAVED, ph.PhaseStatus.SKIPPED, "files", "run failed"
    )


def _phases_for_retry(
    hub: context.Hub, run_id: str, a: dict[str, Any], kind: st.FailureKind, resume: str | None
) -> None:
    """The phases of the attempt that ended go back to pending, each saying why: a run
    waiting for its retry shows the retry, never a live *Progressing* beside ``queued``."""
    why = f"retry after {kind.value}"
    fresh = hub.runs.get_attempt(a["token"]) or a
    at = f" at step {fresh['last_step']}" if fresh.get("last_step") is not None else ""
    start = f"checkpoint {resume}" if resume else "the start (no checkpoint committed)"
    progress = f"attempt {a['number']} ended{at} ({kind.value}); the retry resumes from {start}"
    retried = (ph.Phase.ADMITTED, ph.Phase.PLACED, ph.Phase.SCHEDULED, ph.Phase.GPU_HEALTHY)
    for p in (*retried, ph.Phase.PROGRESSING):
        note = progress if p is ph.Phase.PROGRESSING else why
        rec = ph.PhaseRecord(p, ph.PhaseStatus.PENDING, "hub", note, time.time())
        hub.runs.set_phase(run_id, rec, reset=True)


def _lost_steps(hub: context.Hub, a: dict[str, Any]) -> int | None:
    fresh = hub.runs.get_attempt(a["token"]) or a
    if fresh["last_step"] is None:
        return None
    return int(fresh["last_step"]) - int(fresh["checkpoint_step"] or 0)


def _backoff(spec: dict[str, Any], attempts_used: int) -> float:
    b = spec.get("backoff") or {}
    initial = units.parse_duration(b.get("initial", "10s"))
    cap = units.parse_duration(b.get("max", "5m"))
    return float(min(cap, initial * float(b.get("multiplier", 2.0)) ** max(0, attempts_used - 1)))


def check_released(hub: context.Hub, run_id: str) -> None:
    run = hub.runs.get_run(run_id)
    if (
        run is None
        or run["state"] not in {s.value for s in st.TERMINAL_RUN_STATES}
        or run["quota_held"]
    ):
        return
    if all(x["released"] for x in hub.runs.attempts_for_run(run_id)):
        runs.phase(
            hub,
            run_id,
            ph.Phase.RELEASED,
            ph.PhaseStatus.DONE,
            "agent+hub",
            "quota released and GPUs freed",
        )
        runs.finish_record(hub, run_id)

"""The hub's sync endpoint: agent registration, syncs, and what attempt reports mean.

Owns how agent signals become run state and phases (docs/ARCHITECTURE.md, "The nine
phases"): Ray job submitted →
Scheduled active; running on nodes → Scheduled done + GPU healthy from node marks;
metric lines → Progressing; terminal job state → Completed (+ retry decision);
declared outputs present → Artifacts saved; quota released *and* the agent confirms the
GPUs are free → Released, then the record's ``COMPLETE``. How an attempt ends and what its
run does next (retry, finish, release) is ``hub.runs.attempts``.

Fencing: reports from a revoked attempt, or from an attempt that is no longer the
run's current one, never change the run: a revoked attempt's success is rejected and
recorded, and the reply tells the agent to stop it.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from typing import Any

from starlette import concurrency

from taugrid import errors
from taugrid import payloads as wire
from taugrid.hub.agents import delivery
from taugrid.hub.core import context, pools, wakeups
from taugrid.hub.metrics import util_history
from taugrid.hub.placement import data_view, prewarm, relocation
from taugrid.hub.runs import attempts, guests, nodehealth, runs
from taugrid.lifecycle import node_ids
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.record import checkpoints, jobenv, layout
from taugrid.spec import units

__all__ = ["apply", "finish", "peer_endpoints", "register", "sync", "sync_async"]

_ACTIVE = {s.value for s in st.ACTIVE_ATTEMPT_STATES}
PEERS_TTL_S = 5.0
BUSY_TTL_S = 1.0
"""How long syncs share which clusters have work or marks (``_busy``), at most."""
"""How long the fleet's syncs share one reading of the regions' data planes (they are
sent with full reports, every ``report_s``; a data plane's address rarely changes)."""


def register(hub: context.Hub, req: wire.AgentRegister) -> float:
    hub.leases.forget_report(req.cluster_id)  # the stored report is empty again:
    with _LAST_LOCK:
        _LAST_REPORTS.setdefault(hub, {}).pop(req.cluster_id, None)  # the next one is new
    hub.clusters.upsert(req.cluster_id, req.region, hub.config.lease_s, {})
    hub.runs.add_event(
        None, "cluster_registered", {"cluster": req.cluster_id, "region": req.region}
    )
    return time.time() + hub.config.lease_s


def sync(hub: context.Hub, cluster_id: str, req: wire.AgentSync) -> wire.AgentSyncReply:
    """Renew the lease, apply attempt reports, answer with assignments and stops (the
    long-poll waits in this thread; the HTTP route awaits it instead: ``sync_async``)."""
    reply, wake = apply(hub, cluster_id, req)
    if req.wait_s > 0 and not _news(reply, req) and wake.wait(req.wait_s):
        reply = _reply(hub, cluster_id, reply.lease_expires)
    return finish(hub, cluster_id, req, reply)


async def sync_async(hub: context.Hub, cluster_id: str, req: wire.AgentSync) -> wire.AgentSyncReply:
    """``sync`` for the event loop: the work runs in the thread pool, the long-poll is
    awaited without holding a thread (``hub.core.wakeups``)."""
    reply, wake = await concurrency.run_in_threadpool(apply, hub, cluster_id, req)
    woken = req.wait_s > 0 and not _news(reply, req) and await wake.wait_async(req.wait_s)
    return await concurrency.run_in_threadpool(_answer, hub, cluster_id, req, reply, woken)


def _answer(
    hub: context.Hub,
    cluster_id: str,
    req: wire.AgentSync,
    reply: wire.AgentSyncReply,
    woken: bool,
) -> wire.AgentSyncReply:
    """The reply after the long-poll (read again if something woke it), finished: one
    trip to the thread pool."""
    if woken:
        reply = _reply(hub, cluster_id, reply.lease_expires)
    return finish(hub, cluster_id, req, reply)


def apply(
    hub: context.Hub, cluster_id: str, req: wire.AgentSync
) -> tuple[wire.AgentSyncReply, wakeups.Wakeup]:
    """Renew the lease, apply the reports; the reply now and the flag to long-poll on."""
    report = req.report.model_dump(mode="json") if req.report else None
    if report is not None:
        pools.observe(hub, cluster_id, report)
    changed = report is not None and _report_changed(hub, cluster_id, report)
    health = (report or {}).get("health")
    lease = hub.leases.renew(cluster_id, report, health, urgent=changed)
    if report is not None:
        util_history.record(hub, _region_of(hub, cluster_id))
    prewarm.apply(hub, cluster_id, req.runtimes)
    wake = hub.wakeup(cluster_id)
    wake.clear()
    for a in req.attempts:
        _apply(hub, a)
    guests.apply_joins(hub, cluster_id, req.joins)
    guests.apply_status(hub, cluster_id, req.guests)
    ended = any(a.released or a.state not in _ACTIVE for a in req.attempts)
    if ended or changed:
        hub.wake_scheduler()  # capacity may be free: place now, answer this long-poll
    return _reply(hub, cluster_id, lease), wake


_LAST_REPORTS: weakref.WeakKeyDictionary[context.Hub, dict[str, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
_LAST_LOCK = threading.Lock()


_VOLATILE = frozenset(
    {"last_heartbeat", "avg_cpu_usage", "avg_gpu_usage", "gpu_utilization", "probes"}
)
"""Report fields that change on every report and say nothing of free capacity (and each
node's ``checked_at``)."""


def _report_changed(hub: context.Hub, cluster_id: str, report: dict[str, Any]) -> bool:
    """Whether ``report`` says something of capacity that the last one this replica had
    from the cluster did not: an idle fleet's unchanged reports (hundreds a second at
    1,000 regions) do not each run a scheduling cycle; the loop still runs every
    ``cycle_s``."""
    key = {k: v for k, v in report.items() if k not in _VOLATILE}
    key["nodes"] = [
        {k: v for k, v in n.items() if k != "checked_at"} for n in report.get("nodes", [])
    ]
    with _LAST_LOCK:
        last = _LAST_REPORTS.setdefault(hub, {})
        changed = last.get(cluster_id) != key
        last[cluster_id] = key
    return changed


def finish(
    hub: context.Hub, cluster_id: str, req: wire.AgentSync, reply: wire.AgentSyncReply
) -> wire.AgentSyncReply:
    """What the reply carries besides assignments: peers, runtimes to prepare, uploads."""
    if req.report is not None:
        reply.peers = peer_endpoints(hub, cluster_id)
    reply.prepare = prewarm.hints(hub, cluster_id)
    reply.uploads = [t for t in req.known if _upload_wanted(hub, t)]
    return reply


def _upload_wanted(hub: context.Hub, token: int) -> bool:
    """The agent's held-back uploads of ``token`` are still wanted: the run succeeded with
    that attempt and *Artifacts saved* waits for them (``recordsync`` in the agent)."""
    a = hub.runs.get_attempt(token)
    run = hub.runs.get_run(a["run_id"]) if a is not None else None
    if run is None or run["current_token"] != token:
        return False
    rec = hub.runs.phases(run["id"]).get(ph.Phase.ARTIFACTS_SAVED)
    return (
        rec is not None
        and rec.status is ph.PhaseStatus.ACTIVE
        and rec.source == attempts.UPLOAD_SOURCE
    )


def peer_endpoints(hub: context.Hub, cluster_id: str) -> list[wire.PeerEndpoint]:
    """The data planes of every other region (one per region), priced from the platform."""
    regions, endpoints = hub.memo(
        "agents.endpoints", PEERS_TTL_S, lambda: _endpoints(hub), work=False
    )
    return [ep for region, ep in endpoints.items() if region != regions.get(cluster_id)]


def _region_of(hub: context.Hub, cluster_id: str) -> str:
    regions, _ = hub.memo("agents.endpoints", PEERS_TTL_S, lambda: _endpoints(hub), work=False)
    found = regions.get(cluster_id)
    if found is None:  # registered since the memo was made
        found = str((hub.clusters.get(cluster_id) or {}).get("region", ""))
    return found


def _endpoints(hub: context.Hub) -> tuple[dict[str, str], dict[str, wire.PeerEndpoint]]:
    """Every cluster's region, and one data plane per region that has one."""
    egress = {r.name: r.egress_cost_per_gb for r in hub.platform.regions}
    regions: dict[str, str] = {}
    out: dict[str, wire.PeerEndpoint] = {}
    for c in hub.clusters.all():
        regions[c["id"]] = c["region"]
        ep = c["report"].get("endpoint")
        if ep and c["region"] not in out:
            out[c["region"]] = wire.PeerEndpoint(
                region=c["region"], egress_cost_per_gb=egress.get(c["region"], 0.0), **ep
            )
    return regions, out


def _news(reply: wire.AgentSyncReply, req: wire.AgentSync) -> bool:
    """Something the agent must act on now: an unknown assignment, a stop it can do, a
    guest order it can start (the head's address known) or one to stop."""
    known, lent = set(req.known), {g.token for g in req.guests}
    ordered = {g.token for g in reply.guests}
    return (
        any(a.token not in known for a in reply.assignments)
        or any(s.token in known and not s.grace_s for s in reply.stop)  # graced: once, woken
        or any(g.address and g.token not in lent for g in reply.guests)
        or bool(lent - ordered)
    )


def _busy(hub: context.Hub) -> tuple[set[str], set[str]]:
    """The clusters with unreleased attempts and those with open node marks: an idle
    cluster's sync reads neither table. Shared by syncs for at most ``BUSY_TTL_S`` and
    dropped at once when this replica changes work (``notify``: a dispatch, a stop)."""
    return hub.memo(
        "agents.busy",
        BUSY_TTL_S,
        lambda: (hub.runs.clusters_with_unreleased(), hub.clusters.clusters_with_open_marks()),
    )


def _reply(hub: context.Hub, cluster_id: str, lease: float) -> wire.AgentSyncReply:
    assignments: list[wire.Assignment] = []
    stop: list[wire.StopOrder] = []
    working, marked = _busy(hub)
    mine = hub.runs.attempts_on_cluster(cluster_id) if cluster_id in working else []
    runs_of = hub.runs.get_runs([a["run_id"] for a in mine])  # one query, not one a run
    for a in mine:
        run = runs_of.get(a["run_id"])
        if run is None:
            continue
        current = run["current_token"] == a["token"] and not a["revoked"]
        stopping = a["failure_kind"] in {k.value for k in st.HUB_STOPPED}
        if a["state"] in _ACTIVE and current and not run["cancel_requested"] and not stopping:
            if not (a["placement"] or {}).get("hold"):  # held by a dispatch gate (hub.staging)
                assignments.append(_assignment(hub, run, a))
        elif a["state"] in _ACTIVE or not a["released"]:
            stop.append(_stop_order(hub, a))
    open_marks = hub.clusters.open_marks(cluster_id) if cluster_id in marked else []
    marks = {m["node_id"]: m["kind"] for m in open_marks}
    return wire.AgentSyncReply(
        lease_expires=lease,
        assignments=assignments,
        stop=stop,
        faulty_nodes=marks,
        guests=guests.orders(hub, cluster_id),
    )


DEV_STOP_GRACE_S = 20.0
"""How long a session being stopped (``tau dev stop``) has to save its files: it is
warned first (``tau.preemption_notice()``, which ``sdk.job.dev_session`` watches), then
stopped; Ray alone would give it a few seconds before SIGKILL."""


def _stop_order(hub: context.Hub, a: dict[str, Any]) -> wire.StopOrder:
    """Stop ``a``; a reclaimed attempt still running is warned first and given a grace."""
    order = wire.StopOrder(token=a["token"], submission_id=a["submission_id"])
    if a["failure_kind"] == st.FailureKind.RECLAIM.value and a["state"] in _ACTIVE:
        order.grace_s, order.reason = hub.config.reclaim_grace_s, a["reason"] or ""
    elif a["state"] in _ACTIVE and _session_stopped(hub, a):
        order.grace_s, order.reason = DEV_STOP_GRACE_S, "session stopped (tau dev stop)"
    return order


def _session_stopped(hub: context.Hub, a: dict[str, Any]) -> bool:
    """Whether ``a`` is an interactive session's attempt being stopped (``hub.dev``)."""
    run = hub.runs.get_run(a["run_id"])
    return bool(run and run["cancel_requested"] and jobenv.DEV_CONFIG in run["spec"]["env"])


def _assignment(hub: context.Hub, run: dict[str, Any], a: dict[str, Any]) -> wire.Assignment:
    rec = runs.record_of(hub, run)
    return wire.Assignment(
        records=runs.records_for_agent(hub, run["workspace"]),
        record_key=rec.prefix,
        token=a["token"],
        run_id=run["id"],
        attempt=a["number"],
        workspace=run["workspace"],
        spec=run["spec"],
        run_dir=rec.location,
        submission_id=a["submission_id"],
        resumed_from=a["resumed_from"],
        log_offset=a["log_offset"],
        metrics_offset=a["metrics_offset"],
        inputs=data_view.local_inputs(hub, run, a["cluster_id"]),
        nodes=(a["placement"] or {}).get("nodes", []),
        capacity=(a["placement"] or {}).get("capacity"),
        guests=guests.workers_of(a["placement"]),
    ).model_copy(update=_secrets(hub, run, a))


def _secrets(hub: context.Hub, run: dict[str, Any], a: dict[str, Any]) -> dict[str, Any]:
    """The run's secret values while its attempt is not submitted yet (``hub.core.vault``)."""
    refs = run["spec"].get("secrets") or []
    if not refs or a["submission_id"]:
        return {}
    try:
        return {"secrets": hub.vault.values(run["workspace"], refs)}
    except errors.TauError as exc:
        return {"secrets_error": str(exc)}


def _apply(hub: context.Hub, rep: wire.AttemptReport) -> None:
    a = hub.runs.get_attempt(rep.token)
    if a is None:
        return
    run = hub.runs.get_run(a["run_id"])
    if run is None:
        return
    authoritative = run["current_token"] == a["token"] and not a["revoked"]
    if rep.released and not a["released"]:
        hub.runs.update_attempt(a["token"], released=True, event="gpus_released")
        a["released"] = True
    if not authoritative:
        _stale(hub, a, rep)
        attempts.check_released(hub, run["id"])
        return
    rec = runs.record_of(hub, run)
    if rep.uploaded and _upload_wanted(hub, a["token"]):
        attempts.artifacts(hub, run)
        runs.finish_record(hub, run["id"])
    new = delivery.new(a, rep)
    if new.gap is not None:
        _log_gap(hub, run["id"], a, new.gap)
    if new.log_text:  # before its offset is stored: a crash here resends, never loses
        rec.append_log(layout.DRIVER_LOG, new.log_text)
    if rep.staged_checkpoint is not None:
        _staged(hub, a, rep.staged_checkpoint or None)
    if rep.submission:
        rec.write_rendered(
            f"ray-job-submission-a{a['number']}.json", json.dumps(rep.submission, indent=2)
        )
    _metrics(hub, run, a, rep, new)
    if rep.serve_status is not None:  # the cluster's word (Kubernetes), as the driver writes it
        doc = {**rep.serve_status, "run_id": run["id"], "updated_at": time.time()}
        rec.write_bytes(layout.SERVE_STATUS_FILE, json.dumps(doc).encode())
    if rep.progress_warning:
        nodehealth.stalled(hub, run["id"], a["number"], rep.progress_warning)
    # the cluster's phases before the state they came with: whoever sees ``running`` sees
    # them, and a retry's reset of the phases (an ended attempt) is not overwritten
    _signals(hub, run["id"], rep)
    if a["state"] not in _ACTIVE:
        pass  # ended (by the hub, or an earlier report): a report never reopens or re-ends it
    elif rep.state != a["state"]:
        _transition(hub, run, a, rep)
        runs.write_run_json(hub, run["id"])
    elif rep.state == st.AttemptState.RUNNING.value:
        _running(hub, run, a, rep)
    if rep.relocate is not None:  # after the state: the ask may come with its first "running"
        relocation.consider(hub, run, hub.runs.get_attempt(a["token"]) or a, rep.relocate)
    attempts.check_released(hub, run["id"])


def _staged(hub: context.Hub, a: dict[str, Any], staged: str | None) -> None:
    """The agent says which checkpoint it staged: that is what the attempt resumed from.

    The hub's ``resumed_from`` is the newest checkpoint it listed when it placed the
    attempt; a fenced attempt whose marker upload raced its revocation deletes that
    marker again, and the agent then stages the newest one left.
    """
    if staged == a["resumed_from"]:
        return
    hub.runs.update_attempt(a["token"], resumed_from=staged, event="resume_point_changed")
    a["resumed_from"] = staged


def _said(rep: wire.AttemptReport, phase: ph.Phase) -> bool:
    """Whether the cluster reported ``phase`` itself (a Kubernetes backend does)."""
    return any(s.get("phase") == phase.value for s in rep.phases)


def _signals(hub: context.Hub, run_id: str, rep: wire.AttemptReport) -> None:
    """Phase signals the cluster gave (a Kubernetes backend names its objects)."""
    for sig in rep.phases:
        try:
            phase, status = ph.Phase(sig.get("phase", "")), ph.PhaseStatus(sig.get("status", ""))
        except ValueError:
            continue
        source = str(sig.get("source", "agent"))[:200]
        runs.phase(hub, run_id, phase, status, source, str(sig.get("reason", ""))[:2000])


def _stale(hub: context.Hub, a: dict[str, Any], rep: wire.AttemptReport) -> None:
    if rep.state == st.AttemptState.SUCCEEDED.value and a["state"] != rep.state:
        hub.runs.add_event(
            a["run_id"],
            "fenced_report_rejected",
            {"token": a["token"], "state": rep.state, "why": "attempt revoked"},
        )
    if rep.state in _ACTIVE:
        return
    _ran_on(hub, a, rep)
    open_states = _ACTIVE | {st.AttemptState.STOPPED.value}
    # compare-and-set on what was read: the hub may have ended it since (lost contact,
    # a retry placed): a late report never overwrites that end
    if a["state"] in open_states and hub.runs.claim_attempt(a["token"], a["state"], rep.state):
        hub.runs.update_attempt(a["token"], ended_at=time.time())


def _ran_on(hub: context.Hub, a: dict[str, Any], rep: wire.AttemptReport) -> None:
    """A revoked attempt that kept running (its cluster was out of contact) reports its
    end: the steps it ran past the hub's last word were run again by the retry, so the
    run's lost work is counted anew from the steps it really ran."""
    if rep.last_step is None or rep.last_step <= (a["last_step"] or 0):
        return
    hub.runs.update_attempt(a["token"], last_step=rep.last_step)
    lost = rep.last_step - int(a["checkpoint_step"] or 0)
    hub.runs.add_event(
        a["run_id"],
        "lost_work",
        {
            "attempt": a["number"],
            "lost_steps": lost,
            "why": f"attempt {a['number']} ran on to step {rep.last_step} after it was revoked; "
            "its steps past its last committed checkpoint were run again",
        },
    )


def _log_gap(hub: context.Hub, run_id: str, a: dict[str, Any], gap: tuple[int, int]) -> None:
    hub.runs.add_event(
        run_id,
        "log_gap",
        {
            "attempt": a["number"],
            "from": gap[0],
            "to": gap[1],
            "why": "the agent's log text resumed past what the hub had stored; the "
            "characters between never reached the hub (the record's own files are complete "
            "where the job wrote them there)",
        },
    )


def _metrics(
    hub: context.Hub,
    run: dict[str, Any],
    a: dict[str, Any],
    rep: wire.AttemptReport,
    new: delivery.Delivery,
) -> None:
    rows = [
        {
            "attempt": a["number"],
            "step": m.get("step"),
            "name": str(m["name"]),
            "value": float(m["value"]),
            "wall_time": float(m.get("wall_time", time.time())),
        }
        for m in new.metrics
        if "name" in m and isinstance(m.get("value"), int | float)
    ]
    offsets = {"log_offset": new.log_offset, "metrics_offset": new.metrics_offset}
    hub.runs.add_metrics(run["id"], rows, a["token"], offsets)
    fields: dict[str, Any] = {}
    if rep.last_step is not None:
        fields["last_step"] = rep.last_step
    if rep.checkpoint_step is not None:
        fields["checkpoint_step"] = rep.checkpoint_step
    if fields:
        hub.runs.update_attempt(a["token"], **fields)
    if rows:
        last = _headline(rows)
        note = f"step {last['step']}: {last['name']}={last['value']:.4g}"
        rec = ph.PhaseRecord(
            ph.Phase.PROGRESSING, ph.PhaseStatus.ACTIVE, "metrics", note, time.time()
        )
        hub.runs.set_phase(run["id"], rec, quiet=True)


def _headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The metric *Progressing* names, at the newest step: ``loss``, else a metric whose
    name has "loss" in it, else the first the job logged at that step (never merely the
    last, nor the alphabetically first)."""
    step = rows[-1]["step"]
    at = [r for r in rows if r["step"] == step]
    exact = [r for r in at if r["name"] == "loss"]
    lossy = [r for r in at if "loss" in r["name"].lower()]
    return (exact or lossy or at)[0]


def _transition(
    hub: context.Hub, run: dict[str, Any], a: dict[str, Any], rep: wire.AttemptReport
) -> None:
    state = rep.state
    if state == st.AttemptState.STARTING.value:
        if not hub.runs.claim_attempt(a["token"], a["state"], state):
            return  # ended (or moved on) since this report was read: not undone
        hub.runs.update_attempt(
            a["token"], state=state, submission_id=rep.submission_id, event="attempt_starting"
        )
        if not _said(rep, ph.Phase.SCHEDULED):  # the cluster's own words win (Kubernetes)
            runs.phase(
                hub,
                run["id"],
                ph.Phase.SCHEDULED,
                ph.PhaseStatus.ACTIVE,
                "ray",
                f"submitted to Ray as {rep.submission_id}; waiting for resources",
            )
    elif state == st.AttemptState.RUNNING.value:
        _running(hub, run, a, rep)
    elif state in (
        st.AttemptState.SUCCEEDED.value,
        st.AttemptState.FAILED.value,
        st.AttemptState.STOPPED.value,
    ):
        kind = st.FailureKind(rep.failure_kind) if rep.failure_kind else None
        attempts.end(
            hub,
            a,
            st.AttemptState(state),
            rep.message,
            kind=kind,
            exit_code=rep.exit_code,
            uploads_pending=rep.uploads_pending,
            adopted=checkpoints.Adoption(
                [(x[0], x[1]) for x in rep.adopted if len(x) == 2],
                [(x[0], x[1]) for x in rep.unusable if len(x) == 2],
            ),
        )


def _binding_mismatch(
    hub: context.Hub, run: dict[str, Any], a: dict[str, Any], landed: list[str]
) -> None:
    """An event when a node the hub bound a worker to is not among those it landed on."""
    bound = (a["placement"] or {}).get("nodes") or []
    missing = sorted(set(bound) - set(landed))
    if missing:
        detail = {"token": a["token"], "bound": bound, "landed": landed, "missing": missing}
        hub.runs.add_event(run["id"], "node_binding_mismatch", detail)


def _running(
    hub: context.Hub, run: dict[str, Any], a: dict[str, Any], rep: wire.AttemptReport
) -> None:
    if a["state"] != st.AttemptState.RUNNING.value:
        if not hub.runs.claim_attempt(a["token"], a["state"], rep.state):
            return  # ended since this report was read (lost contact, a stop): not undone
        hub.runs.update_attempt(
            a["token"],
            state=rep.state,
            started_at=time.time(),
            nodes=rep.nodes,
            submission_id=rep.submission_id,
            event="attempt_running",
        )
        hub.runs.transition(
            run["id"],
            (st.RunState.PLACED.value,),
            state=st.RunState.RUNNING.value,
            reason="running",
            event="running",
        )
    if rep.nodes and rep.nodes != a["nodes"]:
        hub.runs.update_attempt(a["token"], nodes=rep.nodes)
        if rep.worker_nodes:
            _binding_mismatch(hub, run, a, rep.worker_nodes)
    where = ", ".join(node_ids.short(n) for n in rep.nodes) or "Ray"
    if not _said(rep, ph.Phase.SCHEDULED):  # the cluster's own words win (Kubernetes)
        runs.phase(
            hub,
            run["id"],
            ph.Phase.SCHEDULED,
            ph.PhaseStatus.DONE,
            "ray",
            f"workers bound to {where}",
        )
    faulty = {m["node_id"]: m["kind"] for m in hub.clusters.open_marks(a["cluster_id"])}
    bad = [f"{node_ids.short(n)} ({faulty[n]})" for n in rep.nodes if n in faulty]
    unknown = nodehealth.unknown(hub, a["cluster_id"], rep.nodes)
    if bad:
        runs.phase(
            hub,
            run["id"],
            ph.Phase.GPU_HEALTHY,
            ph.PhaseStatus.FAILED,
            "node health",
            f"faulty: {', '.join(bad)}",
        )
    elif unknown:  # a crashing checker is never taken as healthy
        runs.phase(
            hub, run["id"], ph.Phase.GPU_HEALTHY, ph.PhaseStatus.WARNING, "node health", unknown
        )
    elif rep.nodes and not _said(rep, ph.Phase.GPU_HEALTHY):
        runs.phase(
            hub,
            run["id"],
            ph.Phase.GPU_HEALTHY,
            ph.PhaseStatus.DONE,
            "node health",
            f"{units.plural(len(rep.nodes), 'node')} "
            + ("reports" if len(rep.nodes) == 1 else "report")
            + " healthy devices",
        )

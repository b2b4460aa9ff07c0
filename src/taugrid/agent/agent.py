"""The per-cluster agent: sync with the hub, run assignments, report state and events.

One ``step``: poll every tracked attempt → sync (attempt reports every step, a full
``StateReport`` every ``report_s``) → act on the reply: start new assignments, stop
what the hub says to stop, cordon nodes newly marked faulty (new submissions wait
until a fresh cordon holds its node's GPUs). Nothing dials in: the hub answers each
sync with the work. The node health checker (``agent.nodes.nodecheck``) runs with the state
report.

Runtime pre-warm (``agent.attempts.prewarm``): an assignment whose pip runtime is not warm
here waits (``AgentConfig.prewarm_wait_s`` at most) while the runtime is built on the
cluster's nodes, then is submitted; requirements that cannot be installed fail the
attempt (``runtime_env``) with pip's reason; any other preparation trouble only means
the attempt is submitted cold. The hub's ``prepare`` hints start preparations
for queued runs likely to run here; status changes ride on the next sync.

Spanning runs (``agent.attempts.guests``, with ``AgentConfig.span``): each sync carries where the
spans this cluster heads are joined, and what its guest nodes for spans headed
elsewhere are doing; each reply's guest orders are reconciled.

Restart safety: the hub's reply lists every attempt it believes active here with its
``submission_id``; a fresh agent re-attaches to those Ray jobs instead of submitting
again (submission IDs are deterministic per attempt, so a duplicate submit is caught
by Ray and re-attached too). If the hub is unreachable the agent keeps its attempts
running and retries — the hub's lease/grace logic decides, never the agent — and keeps
every report it could not deliver (``agent.outbox``) until a sync gets through.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import shutil
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid import payloads as wire
from taugrid.agent import hubclient, outbox
from taugrid.agent.attempts import guests, prewarm, strays, tracker
from taugrid.agent.data import datasync
from taugrid.agent.nodes import health, nodecheck
from taugrid.agent.records import podsync, recordsync
from taugrid.backends import base
from taugrid.backends import errors as berr
from taugrid.backends.kube import kube_marks
from taugrid.backends.ray import ray_cordon
from taugrid.dataplane import runtimes
from taugrid.health import signals
from taugrid.lifecycle import states as st
from taugrid.record import files
from taugrid.record import store as recordstore
from taugrid.render import command, rayjobs, runspec

__all__ = ["SETTLE_S", "Agent", "AgentConfig"]

log = logging.getLogger(__name__)

_REAP_POLLS = 5
"""Polls after a job ended during which its stray processes are looked for and killed."""


SETTLE_S = 2.0
CORDON_WAIT_S = 30.0
"""How long new submissions wait for a fresh cordon to hold its node's GPUs."""
"""How long a state report after a change waits for Ray's resource view to show it."""


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    cluster_id: str
    region: str
    state_dir: Path
    sync_s: float = 1.0
    busy_sync_s: float = 0.25
    """The pause between syncs while attempts are active: how soon a job's end is seen."""
    report_s: float = 10.0
    prewarm: bool = True
    prewarm_wait_s: float = 900.0
    data_root: Path | None = None
    """The region's data root when no data-plane sidecar runs (the sidecar's wins)."""
    expected_nodes: int | None = None
    """How many Ray nodes the cluster has; fewer alive reports it ``degraded``."""
    health: nodecheck.CheckerConfig | None = dataclasses.field(
        default_factory=nodecheck.CheckerConfig
    )
    """The node health checker (``agent.nodes.nodecheck``); None turns it off."""
    store_endpoint: str | None = None
    """How this region reaches an S3 record store (None: platform.yaml's endpoint_url)."""
    span: guests.SpanConfig | None = None
    """The agent's own Ray cluster, when it may head spanning runs and lend them nodes."""
    spot_pools: tuple[str, ...] = ()
    """The cluster's spot node pools (platform.yaml): a run's entrypoint and the workers
    it places itself are kept to the pools of the capacity the hub placed it on."""


SUBMIT_TRIES = 4
"""Submissions of one attempt before it fails with ``submit_error`` (2, 4, 8 s apart)."""
_RESTOP_S = 30.0
"""How long a warned attempt that was stopped may take to end before it is stopped again."""
_RESUBMIT = "\0resubmit"  # a ``_waiting`` key: not a runtime, a submission to try again


class Agent:
    """Drives one cluster's backend on behalf of the hub."""

    def __init__(
        self,
        config: AgentConfig,
        backend: base.Backend,
        hub: hubclient.HubClient,
        cordon: ray_cordon.GpuCordon | kube_marks.NodeMarks | None = None,
    ) -> None:
        self.config = config
        self.backend = backend
        self.hub = hub
        self.cordon = cordon
        self.trackers: dict[int, tracker.AttemptTracker] = {}
        self.faulty: dict[str, str] = {}
        self._last_report = 0.0
        self._changed = False  # an attempt started, ended or was released since the report
        self._pending: list[wire.AttemptReport] = []
        self.sidecar: datasync.Sidecar | None = None  # probes, dataset caches (daemon)
        self.prewarm = prewarm.Prewarmer(backend, config.state_dir) if config.prewarm else None
        self._waiting: dict[int, tuple[str, float]] = {}  # token -> (runtime key, deadline)
        self._notices: dict[int, tuple[float, wire.StopOrder]] = {}  # token -> (stop at, order)
        self._submit_tries: dict[int, int] = {}  # token -> submissions that timed out
        self._reaped: dict[int, int] = {}  # token -> stray sweeps done after the job ended
        self._unsettled: dict[str, float] = {}  # fresh cordons not holding yet -> deadline
        self.checker = (
            nodecheck.NodeChecker(
                config.health, config.state_dir, config.data_root, hub, signals.NvmlReader()
            )
            if config.health is not None
            else None
        )
        self.lender = (
            guests.Lender(
                config.cluster_id, config.region, config.span, config.state_dir / "guests"
            )
            if config.span is not None
            else None
        )

    # -- one iteration ----------------------------------------------------------
    def step(self, wait_s: float = 0.0) -> bool:
        """One sync; ``wait_s`` > 0 long-polls the hub for new work. False if it failed."""
        self._advance_waiting()
        wait_s = self._stop_noticed(wait_s)
        polled = [self._poll(t) for k, t in list(self.trackers.items()) if k not in self._waiting]
        reports, self._pending = self._pending + polled, []
        due = time.time() - self._last_report >= self.config.report_s
        report = self._fresh_report() if self._changed else self._state_report() if due else None
        req = wire.AgentSync(
            report=report,
            attempts=outbox.coalesce([r for r in reports if r]),
            known=list(self.trackers),
            wait_s=wait_s,
            runtimes=self.prewarm.changes() if self.prewarm else [],
            joins=guests.joins(self.config.span, self.trackers.values())
            if self.config.span
            else [],
            guests=self.lender.statuses() if self.lender else [],
        )
        try:
            reply = self.hub.sync(req)
        except hubclient.HubUnreachable as exc:
            log.warning("sync failed, will retry: %s", exc)
            if self.prewarm:
                self.prewarm.requeue(req.runtimes)
            self._pending = outbox.coalesce(req.attempts)  # sent again with the next sync
            return False
        for t in self.trackers.values():  # the hub has what was read: resume past it
            t.save(self._attempts_dir)
        if report is not None:
            self._last_report, self._changed = time.time(), False
        self._act(reply)
        return True

    def _fresh_report(self) -> wire.StateReport:
        """The state report after an attempt started or ended, once it shows that.

        Ray's resource view lags a job's start or end by a moment: read it again (for
        ``SETTLE_S`` at most) until its GPUs in use fit our attempts — running ones hold
        theirs, submitted or ended but unreleased ones may — so the hub never sees a
        run end (or start) without the GPUs it freed (or took).
        """
        deadline = time.monotonic() + SETTLE_S
        while True:
            held = maybe = 0.0
            for tok, t in self.trackers.items():
                here = int(t.a.spec.get("workers", 1)) - sum(t.a.guests.values())  # a span's head
                gpus = here * float(t.a.spec.get("gpus_per_worker", 0))
                if t.state is st.AttemptState.RUNNING:
                    held += gpus
                elif not t.released and tok not in self._waiting:
                    maybe += gpus
            report = self._state_report()
            fits = held <= report.gpu_busy <= held + maybe
            if fits or report.health == "unavailable" or time.monotonic() > deadline:
                return report
            time.sleep(0.05)

    @property
    def _attempts_dir(self) -> Path:
        return self.config.state_dir / "attempts"

    def _poll(self, t: tracker.AttemptTracker) -> wire.AttemptReport | None:
        before = (t.state, t.released)
        try:
            report = t.poll(self.backend, self.faulty)
            # Capacity changed: the hub gets a fresh inventory with this report, at once.
            self._changed |= (t.state, t.released) != before
            self._reap(t)
            return report
        except errors.TauError as exc:
            log.warning("poll of attempt %s failed: %s", t.a.token, exc)
            return None

    def _reap(self, t: tracker.AttemptTracker) -> None:
        """Once Ray says the job is over, kill its processes that outlived it (a few polls)."""
        done = self._reaped.get(t.a.token, 0)
        if t.state in st.ACTIVE_ATTEMPT_STATES or done >= _REAP_POLLS:
            return
        self._reaped[t.a.token] = done + 1
        killed = strays.kill(t.a.run_id, t.a.token)
        if killed:
            log.warning("attempt %s ended but pids %s lived on; killed", t.a.token, sorted(killed))

    def _act(self, reply: wire.AgentSyncReply) -> None:
        self._cordon(reply.faulty_nodes)
        if self.lender is not None:
            self.lender.reconcile(reply.guests)
        for hint in reply.prepare:
            if self.prewarm is not None:
                self.prewarm.ensure(hint.key, hint.pip, hint.run_ids)
        if self.sidecar is not None and reply.peers:
            self.sidecar.announce(reply.peers)
        wanted = {a.token for a in reply.assignments} | set(reply.uploads)
        for tok in reply.uploads:
            held = self.trackers.get(tok)
            if held is not None and held.sync is not None:
                held.sync.authorize()
        for order in reply.stop:  # first: a retry placed here never runs beside its stray
            self._stop(order)
        fresh = [a for a in reply.assignments if a.token not in self.trackers]
        if fresh and self._cordons_hold():  # else offered again on the next sync
            for a in fresh:
                self._start(a)
        for tok, t in list(self.trackers.items()):
            ended = t.state not in st.ACTIVE_ATTEMPT_STATES
            if tok not in wanted and ended and t.released:
                del self.trackers[tok]
                if t.sync is not None:
                    t.sync.stop()
                if t.sync is not None or t.mirror is not None:
                    shutil.rmtree(t.run_dir, ignore_errors=True)
                self._reaped.pop(tok, None)
                (self._attempts_dir / f"{tok}.json").unlink(missing_ok=True)

    # -- actions ----------------------------------------------------------------
    def _start(self, a: wire.Assignment) -> None:
        sid = a.submission_id or rayjobs.submission_id(a.run_id, a.attempt)
        # a Kubernetes attempt's pods store their outputs themselves (podsync): the
        # agent mirrors what they stored; no scratch of its own
        own = self.backend.supports(base.Capability.RUN_SPEC)
        endpoint = self.config.store_endpoint
        sync = None if own else recordsync.for_assignment(a, self.config.state_dir, endpoint)
        mirror = (
            recordsync.Mirror(
                a,
                recordsync.scratch_dir(self.config.state_dir, a),
                recordsync.open_for(a, endpoint),
            )
            if own and self._pod(a) is not None
            else None
        )
        t = tracker.AttemptTracker(a, sid, sync, mirror)
        self.trackers[a.token] = t
        if a.submission_id:
            t.restore(self._attempts_dir)
            if t.sync is not None:
                t.sync.start()
            log.info("re-attaching to attempt %s (%s)", a.token, sid)
            return
        key = runtimes.runtime_key(a.spec)
        if self.prewarm is not None and key is not None:
            pip = [str(p) for p in a.spec.get("pip", ())]
            if self.prewarm.ensure(key, pip, [a.run_id]) is not prewarm.RuntimeState.READY:
                self._waiting[a.token] = (key, time.time() + self.config.prewarm_wait_s)
                return
        self._submit(t)

    def _advance_waiting(self) -> None:
        """Submit attempts whose runtime is ready (or waited long enough); fail bad ones."""
        for token, (key, deadline) in list(self._waiting.items()):
            if key == _RESUBMIT:
                if time.time() >= deadline:
                    del self._waiting[token]
                    self._submit(self.trackers[token])
                continue
            state, message, build_failed = (
                self.prewarm.state(key) if self.prewarm else (None, "", False)
            )
            if state is prewarm.RuntimeState.PREPARING and time.time() < deadline:
                continue
            del self._waiting[token]
            t = self.trackers[token]
            if build_failed:
                self._fail(t, message, st.FailureKind.RUNTIME_ENV)
            else:  # ready, past the wait, or not built for reasons of its own: Ray builds it
                self._submit(t)

    def _submit(self, t: tracker.AttemptTracker) -> None:
        a, sid = t.a, t.submission_id
        if a.secrets_error:  # never start a job without the secrets it names
            self._fail(t, a.secrets_error, st.FailureKind.SUBMIT_ERROR)
            return
        try:
            if self.backend.supports(base.Capability.RUN_SPEC):
                self.backend.submit_run(a.spec, a.run_id, sid, self._pod(a), a.secrets, a.capacity)
                return
            if t.sync is not None:
                t.sync.stage()  # the resume checkpoint into scratch, before the job starts
            sub = self._submission(a, sid, t.run_dir)
            t.submission = sub.model_dump(mode="json")  # reported and recorded: no secrets
            self.backend.submit(sub.with_env(a.secrets))
            if t.sync is not None:
                t.sync.start()
        except recordsync.Fenced as exc:
            self._fail(t, f"submission refused: {exc.message}", st.FailureKind.SUBMIT_ERROR)
        except (recordstore.RecordStoreError, OSError) as exc:
            self._retry_submit(t, exc)
        except berr.DuplicateSubmission:
            log.info("attempt %s was already submitted; re-attaching", a.token)
            if t.sync is not None:
                t.sync.start()
        except (berr.RayUnavailable, berr.KubernetesUnavailable) as exc:
            self._retry_submit(t, exc)
        except errors.TauError as exc:
            self._fail(t, f"submission failed: {exc}", st.FailureKind.SUBMIT_ERROR)

    def _retry_submit(self, t: tracker.AttemptTracker, exc: Exception) -> None:
        """Ray's Jobs API (or the Kubernetes API server) timed out or was down, or an earlier
        attempt's object is still being deleted: submit again later, a bounded number of times.

        The submission ID is deterministic, so a request that got through before its
        timeout makes the next try a ``DuplicateSubmission`` (re-attach), never a second job.
        """
        tries = self._submit_tries.get(t.a.token, 0) + 1
        if tries >= SUBMIT_TRIES:
            self._fail(t, f"submission failed {tries} times: {exc}", st.FailureKind.SUBMIT_ERROR)
            return
        self._submit_tries[t.a.token] = tries
        log.warning(
            "submission of %s failed (%s); try %d in %g s", t.a.token, exc, tries + 1, 2**tries
        )
        self._waiting[t.a.token] = (_RESUBMIT, time.time() + 2**tries)

    def _fail(self, t: tracker.AttemptTracker, message: str, kind: st.FailureKind) -> None:
        """End an attempt that never reached Ray (nothing to release there)."""
        self._changed = True
        t.state = st.AttemptState.FAILED
        t.released = True
        self._pending.append(
            wire.AttemptReport(
                token=t.a.token,
                state=t.state.value,
                message=message,
                failure_kind=kind.value,
                released=True,
            )
        )

    def _submission(self, a: wire.Assignment, sid: str, run_dir: Path) -> rayjobs.RayJobSubmission:
        spec = runspec.read(a.spec)
        code_dir = self._code_dir(a)
        sub = rayjobs.render_submission(
            spec,
            a.run_id,
            attempt=a.attempt,
            run_dir=str(run_dir),
            working_dir=str(code_dir),
            nodes=tuple(a.nodes),
            selector=command.capacity_selector(self.config.spot_pools, a.capacity),
        )
        root = self.config.data_root or (self.sidecar.cfg.data_root if self.sidecar else None)
        sub = sub.with_env(rayjobs.input_env(a.inputs, str(root) if root else None))
        return sub.with_fencing_token(str(a.token)).model_copy(update={"submission_id": sid})

    def _pod(self, a: wire.Assignment) -> base.PodAttempt | None:
        """What the attempt's pods need to store their own outputs, where they can."""
        if not self.backend.pods_store_records(a.spec):
            return None
        return podsync.pod_attempt(a, self.config.store_endpoint)

    def _code_dir(self, a: wire.Assignment) -> Path:
        target = self.config.state_dir / "code" / f"{a.run_id}-a{a.attempt}"
        target.mkdir(parents=True, exist_ok=True)
        blob = self.hub.code(a.run_id)
        if blob:
            with zipfile.ZipFile(io.BytesIO(blob)) as zf:
                zf.extractall(target)
        return target

    def _stop_noticed(self, wait_s: float) -> float:
        """Stop the warned attempts whose grace is over; the long-poll ends by the next."""
        now = time.time()
        for token, (stop_at, order) in list(self._notices.items()):
            t = self.trackers.get(token)
            if t is None or t.state not in st.ACTIVE_ATTEMPT_STATES:
                del self._notices[token]
                if t is not None:  # ended: a record shared by attempts keeps no stale notice
                    (t.run_dir / st.NOTICE_FILE).unlink(missing_ok=True)
            elif now >= stop_at:  # stop; again in a while if Ray has not stopped it by then
                self._notices[token] = (now + _RESTOP_S, order)
                self._stop(order.model_copy(update={"grace_s": 0.0}))
        soonest = min((at for at, _ in self._notices.values()), default=now + wait_s)
        return max(0.0, min(wait_s, soonest - now))

    def _warn(self, t: tracker.AttemptTracker, order: wire.StopOrder) -> bool:
        """Tell the job it will be stopped (``tau.preemption_notice()``); True while its
        grace lasts (the stop comes from ``_stop_noticed``)."""
        if order.token in self._notices:
            return True
        if self.backend.supports(base.Capability.RUN_SPEC):  # pods: stopped now; the pod's
            return False  # SIGTERM is their notice (agent.podsync)
        stop_at = time.time() + order.grace_s
        doc = {"token": order.token, "reason": order.reason, "stop_at": stop_at}
        files.write_json_atomic(t.run_dir / st.NOTICE_FILE, doc)
        self._notices[order.token] = (stop_at, order)
        log.info("attempt %s warned in %s: stopped in %.0fs", order.token, t.run_dir, order.grace_s)
        return True

    def _stop(self, order: wire.StopOrder) -> None:
        t = self.trackers.get(order.token)
        sid = t.submission_id if t else order.submission_id
        if t is not None and t.state not in st.ACTIVE_ATTEMPT_STATES:
            return  # already ended; its next poll reports release
        warned = order.grace_s > 0 and t is not None and order.token not in self._waiting
        if warned and t is not None and self._warn(t, order):
            return
        if self._waiting.pop(order.token, None) is not None and t is not None:
            t.state, t.released = st.AttemptState.STOPPED, True  # never reached Ray
            self._pending.append(
                wire.AttemptReport(
                    token=order.token,
                    state=t.state.value,
                    message="stopped while its runtime was being prepared",
                    released=True,
                )
            )
            return
        if sid is not None:
            try:
                self.backend.stop(sid)
            except errors.TauError as exc:
                log.info("stop of %s: %s", sid, exc)
        if t is None:
            self._pending.append(
                wire.AttemptReport(
                    token=order.token,
                    state=st.AttemptState.STOPPED.value,
                    message="stopped by agent",
                    released=True,
                )
            )

    def _cordon(self, faulty: dict[str, str]) -> None:
        """Keep GPU work off nodes marked faulty; give a cleared node its GPUs back."""
        self.faulty = faulty
        if self.checker is not None:
            self.checker.cleared(faulty)
        if self.cordon is None:
            return
        for node in sorted(set(self.cordon.jobs) - set(faulty)):
            try:
                self.cordon.uncordon(node)
                self._changed = True
            except errors.TauError as exc:
                log.warning("uncordon of %s failed: %s", node, exc)
        for node, kind in faulty.items():
            try:
                if node not in self.cordon.jobs:
                    self._unsettled[node] = time.monotonic() + CORDON_WAIT_S
                self.cordon.cordon(node, f"marked faulty: {kind}")
            except errors.TauError as exc:
                log.warning("cordon of %s failed: %s", node, exc)

    def _cordons_hold(self) -> bool:
        """Whether new jobs may be submitted: Ray places jobs by free resources, so a job
        sent before a fresh cordon holds its node's GPUs could land on that node. New
        submissions wait (``CORDON_WAIT_S`` at most) until every fresh cordon holds."""
        if not self._unsettled:
            return True
        try:
            nodes = {n.node_id: n for n in self.backend.inventory().alive_nodes}
        except errors.TauError:
            return True
        now = time.monotonic()
        for node, deadline in list(self._unsettled.items()):
            n = nodes.get(node)
            if n is None or n.gpu_available == 0 or now > deadline or node not in self.faulty:
                del self._unsettled[node]
        return not self._unsettled

    # -- state report -------------------------------------------------------------
    def _state_report(self) -> wire.StateReport:
        try:
            inv = self.backend.inventory()
        except errors.TauError as exc:
            log.warning("inventory failed: %s", exc)
            who = "the Kubernetes API server" if self.backend.name == "kubernetes" else "Ray"
            # a refusal (RBAC, a webhook) is the server's own words, not silence
            says = "refused" if isinstance(exc, errors.UserError) else "does not answer"
            return wire.StateReport(
                cluster_id=self.config.cluster_id,
                last_heartbeat=time.time(),
                health="unavailable",
                health_reason=exc.message if says == "refused" else f"{who} {says}: {exc}",
            )
        state, why = health.health(inv, self.config.expected_nodes, self.faulty)
        free, busy, cordoned = health.capacity(inv, self.faulty)
        return wire.StateReport(
            cluster_id=self.config.cluster_id,
            gpu_nodes=sum(1 for n in inv.alive_nodes if n.gpu_total > 0),
            gpu_busy=busy,
            gpu_free=free,
            gpu_faulty=cordoned,
            health=state,
            health_reason=why,
            gpu_models={m: int(c.total) for m, c in inv.gpu_models.items()},
            queued_jobs=sum(
                1 for t in self.trackers.values() if t.state is st.AttemptState.STARTING
            ),
            avg_cpu_usage=inv.cpu_usage,
            avg_gpu_usage=inv.gpu_usage,
            last_heartbeat=time.time(),
            emulated_gpus=inv.emulated_gpus,
            nodes=self._node_rows(inv),
            running_attempts=[
                t for t, x in self.trackers.items() if x.state in st.ACTIVE_ATTEMPT_STATES
            ],
            probes=self.sidecar.probe_results() if self.sidecar else {},
            cached_datasets=self.sidecar.cached_datasets() if self.sidecar else [],
            cached_runtimes=self.prewarm.warm_keys(inv) if self.prewarm else [],
            endpoint=self.sidecar.endpoint() if self.sidecar else None,
            queues=self._queues(),
            spannable=self.lender is not None,
        )

    def _node_rows(self, inv: base.ClusterInventory) -> list[wire.NodeReport]:
        """The report's nodes, with the health checker's conditions (a round when due)."""
        rows = health.node_rows(inv, self.faulty, self.config.expected_nodes)
        if self.checker is None:
            return rows
        root = self.config.data_root or (self.sidecar.cfg.data_root if self.sidecar else None)
        self.checker.roots["data"] = root
        self.checker.maybe_check(inv, [r.node_id for r in rows])
        return [r.model_copy(update=self.checker.row(r.node_id)) for r in rows]

    def _queues(self) -> list[dict[str, Any]]:
        if not self.backend.supports(base.Capability.QUEUES):
            return []
        try:
            return self.backend.queue_usage()
        except errors.TauError as exc:
            log.warning("queue usage failed: %s", exc)
            return []

    # -- loop -----------------------------------------------------------------------
    def register(self) -> None:
        self.hub.register(self.config.region)

    def run(self, stop: threading.Event) -> None:
        """Register (retrying while the hub is down), then step until ``stop`` is set."""
        while not stop.is_set():
            try:
                self.register()
                break
            except hubclient.HubUnreachable as exc:
                log.warning("register failed, retrying: %s", exc)
                stop.wait(2.0)
        while not stop.is_set():
            # The long-poll is the pause between syncs: it returns early with new work.
            # While attempts run it is short, so that an ended job frees its GPUs at once.
            busy = any(not t.released for t in self.trackers.values())
            wait = min(self.config.sync_s, self.config.busy_sync_s) if busy else self.config.sync_s
            if not self.step(wait_s=wait):
                stop.wait(self.config.sync_s)
        if self.lender is not None:
            self.lender.close()
        for t in self.trackers.values():
            if t.sync is not None:
                t.sync.stop()

"""One attempt as the agent sees it: submit, observe, stop, and report deltas.

Owns the translation from Ray job state to ``payloads.AttemptReport``: PENDING →
starting, RUNNING → running (with the nodes it uses), SUCCEEDED/FAILED/STOPPED →
the same, plus what changed since the last report — new log text, new metric lines
of *this* attempt from ``metrics/metrics.jsonl``, the last step, the latest committed
checkpoint step, and whether Ray has given back every resource (release line).

A job on a node that the hub marks faulty is stopped and reported FAILED with failure
kind ``node_failure``; a job whose driver died with its node is classified the same. A
``reclaim`` mark is not a fault: the hub's stop order gives that job its grace.

Log and progress monitor: each new log chunk is scanned (``health.logscan``); a fatal
error that points at a node (Xid, ECC, a lost GPU, an NCCL timeout) stops the job as
``node_failure`` with the offending line (the hub then suspects its nodes). Any new
log text, metric line or heartbeat file is progress (``health.stall``): past
``warn_after`` idle intervals the report carries ``progress_warning`` once; past
``restart_after`` the job is stopped as ``stall``.

A job that asks to be moved (``tau.request_relocation`` writes ``relocate.json`` in its
output dir) has the ask sent once, in ``AttemptReport.relocate``; the hub decides.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid import payloads as wire
from taugrid.agent.attempts import prewarm
from taugrid.agent.records import recordsync
from taugrid.backends import base
from taugrid.backends import errors as berr
from taugrid.health import logscan, stall
from taugrid.lifecycle import node_ids
from taugrid.lifecycle import states as st
from taugrid.record import checkpoints, layout

__all__ = ["AttemptTracker"]

_NODE_DEATH = re.compile(
    r"node .*(died|dead|failed)|raylet|unexpectedly|ActorDiedError|NodeDied", re.I
)
_SUPERVISOR_LOST = frozenset({"JOB_SUPERVISOR_ACTOR_DIED", "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"})
"""Ray's ``JobDetails.error_type`` of a job whose supervisor (on the driver's node) died or
could not be reached: the node or its Ray processes failed, not the user's code, whatever
the message says (a raylet killed under load gave a FAILED status whose message named
none of ``_NODE_DEATH``'s words, and the attempt was counted as the code's failure)."""
RAY_RUNTIME_ENV_FAILED = "RUNTIME_ENV_SETUP_FAILURE"
"""Ray's ``JobDetails.error_type`` of a job whose runtime_env (pip) could not be built."""
_STEP_DIR = re.compile(r"step-(\d+)")
_STATE = {
    base.JobState.PENDING: st.AttemptState.STARTING,
    base.JobState.RUNNING: st.AttemptState.RUNNING,
    base.JobState.SUCCEEDED: st.AttemptState.SUCCEEDED,
    base.JobState.FAILED: st.AttemptState.FAILED,
    base.JobState.STOPPED: st.AttemptState.STOPPED,
}


NODES_EVERY_S = 5.0
"""How often the nodes of a running job are looked up again (Ray's state API is costly)."""
LOGS_EVERY_S = 1.0
"""How often a running job's log is read; a state change reads it at once."""


_BACKEND_KINDS = (st.FailureKind.PREEMPTION.value, st.FailureKind.SUBMIT_ERROR.value)
"""Failure kinds a backend names itself (``JobStatus.error_type``)."""


def _node_died(status: base.JobStatus, message: str) -> bool:
    """Whether a failed job's driver was lost with its node rather than exiting itself."""
    return status.error_type in _SUPERVISOR_LOST or bool(_NODE_DEATH.search(message))


class AttemptTracker:
    """State the agent keeps per attempt (by fencing token).

    ``poll`` is cheap enough to run several times a second (one Ray call while nothing
    changes): the job's nodes and log are read again only every ``NODES_EVERY_S`` and
    ``LOGS_EVERY_S``, and whenever its state changes.
    """

    def __init__(
        self,
        assignment: wire.Assignment,
        submission_id: str,
        sync: recordsync.RecordSync | None = None,
        mirror: recordsync.Mirror | None = None,
    ) -> None:
        self.a = assignment
        self.submission_id = submission_id
        self.sync = sync
        self.mirror = mirror
        self.log_offset = 0
        self.metrics_offset = 0
        self.last_step: int | None = None
        self.fault: str | None = None
        self.fault_kind = st.FailureKind.NODE_FAILURE
        self.state: st.AttemptState = st.AttemptState.STARTING
        self.released = False
        self.submission: dict[str, Any] | None = None
        self.log_tail = ""
        self._nodes_seen: set[str] = set()
        self._workers_seen: set[str] = set()
        self._nodes_at = self._logs_at = 0.0
        self.stall = stall.StallDetector(stall.Settings.from_spec(assignment.spec), time.time())
        self._stall_level = stall.Level.OK
        self._beat = 0.0
        self._serve_sent: dict[str, Any] | None = None
        self.relocate_sent = 0.0  # wall time of the relocation ask last sent

    _SAVED = ("log_offset", "metrics_offset", "last_step", "log_tail", "relocate_sent")

    def save(self, directory: Path) -> None:
        """Persist read offsets once the hub has acknowledged what was read up to them."""
        directory.mkdir(parents=True, exist_ok=True)
        doc = {k: getattr(self, k) for k in self._SAVED}
        tmp = directory / f".{self.a.token}.json"
        tmp.write_text(json.dumps(doc))
        tmp.replace(directory / f"{self.a.token}.json")

    def restore(self, directory: Path) -> None:
        """What the agent saved after its last acknowledged sync; the read offsets the
        hub sent (what it has stored) win: reading on from there skips and repeats nothing."""
        path = directory / f"{self.a.token}.json"
        if path.exists():
            for k, v in json.loads(path.read_text()).items():
                if k in self._SAVED:
                    setattr(self, k, v)
        if self.a.log_offset is not None:
            self.log_offset = self.a.log_offset
        if self.a.metrics_offset is not None:
            self.metrics_offset = self.a.metrics_offset

    @property
    def run_dir(self) -> Path:
        """Where the job's files are seen: its scratch (``recordsync``), the copy of what
        its pods stored (``recordsync.Mirror``), else the record itself."""
        if self.sync is not None:
            return self.sync.scratch
        return self.mirror.scratch if self.mirror is not None else Path(self.a.run_dir)

    def poll(self, backend: base.Backend, faulty: dict[str, str]) -> wire.AttemptReport:
        """Observe the job once and build the report of what changed."""
        try:
            status = backend.status(self.submission_id)
        except berr.JobNotFound:
            return self._lost("Ray no longer knows this job (its cluster restarted)")
        nodes = self._nodes(backend, status)
        # a reclaim mark is not a fault: the hub warns the job and stops it after a grace
        bad = sorted(n for n in nodes if faulty.get(n, st.RECLAIM_MARK) != st.RECLAIM_MARK)
        if bad and not status.state.terminal and self.fault is None:
            self.fault = f"node {bad[0]} marked faulty ({faulty[bad[0]]}); attempt stopped"
            backend.stop(self.submission_id)
        job = self._held(backend, status.state)
        changed = _STATE[job] is not self.state or job.terminal
        if changed and _STATE[job] is st.AttemptState.RUNNING:
            self.stall.progress(time.time())  # the stall clock starts when the job runs
        self.state = _STATE[job]
        due = changed or time.monotonic() - self._logs_at >= LOGS_EVERY_S
        log_from = self.log_offset
        log_chunk = self._logs(backend) if due else ""
        if due and self.mirror is not None:
            self.mirror.pull()
        metrics, ends = self._metrics()
        report = wire.AttemptReport(
            token=self.a.token,
            state=self._reported_state().value,
            submission_id=self.submission_id,
            nodes=sorted(nodes),
            worker_nodes=sorted(self._workers_seen),
            log_chunk=log_chunk,
            log_from=log_from if log_chunk else None,
            metrics=metrics,
            metric_ends=ends,
            metrics_to=self.metrics_offset,
            checkpoint_step=self._checkpoint_step(),
            submission=self.submission,
            staged_checkpoint=self._staged() if self.submission is not None else None,
            phases=[s.model_dump() for s in status.signals],
            serve_status=self._serve_changed(status.serve),
        )
        self.submission = None  # sent once
        if self.state is st.AttemptState.RUNNING:
            self._watch(backend, report, due)
            report.relocate = self._relocation()
        return self._finish(backend, status, report, job.terminal)

    def _serve_changed(self, doc: dict[str, Any] | None) -> dict[str, Any] | None:
        """The backend's Serve status when it differs from the last one sent."""
        if doc is None or doc == self._serve_sent:
            return None
        self._serve_sent = doc
        return doc

    def _held(self, backend: base.Backend, job: base.JobState) -> base.JobState:
        """The job's state, but not yet terminal while its final upload round runs
        (``recordsync``: the end is reported once its outputs are stored or pending) or
        while its stopped pods still store theirs (``Backend.settling``: the mirror is
        pulled once more when the end is reported, so no metric line is lost)."""
        if not job.terminal:
            return job
        if self.sync is not None and not self.sync.settled.is_set():
            self.sync.finish(job is base.JobState.SUCCEEDED)
        elif self.mirror is None or not backend.settling(self.submission_id):
            return job
        running = self.state is st.AttemptState.RUNNING
        return base.JobState.RUNNING if running else base.JobState.PENDING

    def _watch(self, backend: base.Backend, r: wire.AttemptReport, read_logs: bool) -> None:
        """The log and progress monitor (see the module docstring)."""
        now = time.time()
        if r.log_chunk or r.metrics or (read_logs and self._heartbeat()):
            self.stall.progress(now)
        finding = next((f for f in logscan.scan(r.log_chunk) if f.node and f.fatal), None)
        level = self.stall.level(now)
        if finding is not None and self.fault is None:
            where = ", ".join(node_ids.short(n) for n in r.nodes) or "its node"
            self._stop(backend, f"log monitor: {finding.kind} on {where}: {finding.line}")
        elif level is stall.Level.RESTART and self.fault is None:
            self.fault_kind = st.FailureKind.STALL
            self._stop(backend, f"stalled: {self.stall.describe(now)}; attempt stopped")
        elif level is stall.Level.WARN and self._stall_level is stall.Level.OK:
            r.progress_warning = f"stalled: {self.stall.describe(now)}"
        self._stall_level = level

    def _stop(self, backend: base.Backend, why: str) -> None:
        self.fault = why
        try:
            backend.stop(self.submission_id)
        except errors.TauError:
            self.fault = None  # try again on the next poll

    def _heartbeat(self) -> bool:
        """A heartbeat file (``tau.heartbeat()``) changed since the last look."""
        beats = self.run_dir.glob(layout.HEARTBEATS)
        newest = max((p.stat().st_mtime for p in beats), default=0.0)
        fresh, self._beat = newest > self._beat, max(self._beat, newest)
        return fresh

    def _reported_state(self) -> st.AttemptState:
        if self.fault and self.state in (st.AttemptState.STOPPED, st.AttemptState.FAILED):
            return st.AttemptState.FAILED
        return self.state

    def _finish(
        self, backend: base.Backend, status: base.JobStatus, r: wire.AttemptReport, ended: bool
    ) -> wire.AttemptReport:
        r.last_step = self.last_step
        if not ended:
            return r
        if self.sync is not None:
            r.uploads_pending = self.sync.pending[:2000]
            r.uploaded = self.sync.uploaded_late
            r.adopted = [list(x) for x in self.sync.adoption.adopted][:100]
            r.unusable = [list(x) for x in self.sync.adoption.unusable][:100]
        r.exit_code = status.exit_code
        r.message = self.fault or status.message or ""
        if self.fault:
            r.failure_kind = self.fault_kind.value
        elif status.error_type in _BACKEND_KINDS:  # the cluster's queue, a pod that cannot start
            r.failure_kind = status.error_type
        elif status.state is base.JobState.FAILED and status.error_type == RAY_RUNTIME_ENV_FAILED:
            # Ray built the runtime itself (the pre-warm did not run or did not finish):
            # the same reason as a failed pre-warm, naming the requirement and pip's words
            r.failure_kind = st.FailureKind.RUNTIME_ENV.value
            pip = [str(p) for p in self.a.spec.get("pip", ())]
            r.message = prewarm.failure_reason(pip, status.driver_node_id or "", r.message)
        elif status.state is base.JobState.FAILED and _node_died(status, r.message):
            r.failure_kind = st.FailureKind.NODE_FAILURE.value
        elif status.state is base.JobState.FAILED:
            r.failure_kind = st.FailureKind.EXIT_NONZERO.value
            r.message = f"{r.message}\n{self.log_tail}"
        if not self.released:
            self.released = backend.release_check(self.submission_id)
        r.released = self.released
        return r

    def _staged(self) -> str | None:
        return self.sync.staged if self.sync is not None else None

    def _lost(self, why: str) -> wire.AttemptReport:
        self.state = st.AttemptState.FAILED
        self.released = True
        return wire.AttemptReport(
            token=self.a.token,
            state=self.state.value,
            message=why,
            failure_kind=st.FailureKind.NODE_FAILURE.value,
            released=True,
        )

    def _nodes(self, backend: base.Backend, status: base.JobStatus) -> set[str]:
        driver = {status.driver_node_id} if status.driver_node_id else set()
        if status.state is not base.JobState.RUNNING:
            return driver
        now = time.monotonic()
        several = int(self.a.spec.get("workers", 1)) > 1
        waiting = several and not self._workers_seen  # until the workers show, look each poll
        recent = self.state is st.AttemptState.RUNNING and now - self._nodes_at < NODES_EVERY_S
        if recent and not waiting:
            return self._nodes_seen or driver
        try:
            placement = backend.job_nodes(self.submission_id)
        except errors.TauError:
            return driver
        self._nodes_seen = set(placement.node_ids)
        self._workers_seen = set(placement.worker_node_ids) if several else driver
        self._nodes_at = now
        return self._nodes_seen

    def _logs(self, backend: base.Backend) -> str:
        self._logs_at = time.monotonic()
        try:
            chunk = backend.read_logs(self.submission_id, self.log_offset)
        except errors.TauError:
            return ""
        self.log_offset = chunk.next_offset
        self.log_tail = "\n".join((self.log_tail + chunk.text).splitlines()[-20:])
        return chunk.text

    def _metrics(self) -> tuple[list[dict[str, Any]], list[int]]:
        """New metric lines of this attempt, and the file offset where each one ends."""
        path = self.run_dir / layout.METRICS_FILE
        if not path.exists():
            return [], []
        with path.open("rb") as fh:
            fh.seek(self.metrics_offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1  # only whole lines; the job may be mid-write
        out, ends, pos = [], [], self.metrics_offset
        for line in data[:end].splitlines(keepends=True):
            pos += len(line)
            try:
                m = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(m, dict) and m.get("attempt", self.a.attempt) == self.a.attempt:
                out.append(m)
                ends.append(pos)
                if isinstance(m.get("step"), int):
                    self.last_step = max(self.last_step or 0, m["step"])
        self.metrics_offset += end
        return out, ends

    def _relocation(self) -> wire.RelocationRequest | None:
        """The job's relocation ask (``tau.request_relocation``) when it is new."""
        try:
            doc = json.loads((self.run_dir / layout.RELOCATE_FILE).read_text())
            asked = float(doc["wall_time"])
            if asked <= self.relocate_sent or doc.get("attempt") != self.a.attempt:
                return None
            ask = wire.RelocationRequest(cpus=doc["cpus"], reason=str(doc["reason"]))
        except (OSError, ValueError, KeyError, TypeError):  # absent, or being written
            return None
        self.relocate_sent = asked
        return ask

    def _checkpoint_step(self) -> int | None:
        ckpt = checkpoints.checkpoint_root(self.run_dir, self.a.spec.get("checkpoint_path"))
        latest = ckpt / layout.LATEST_FILE
        m = _STEP_DIR.search(latest.read_text()) if latest.exists() else None
        return int(m.group(1)) if m else None

"""The kubernetes backend: a ``backend: kubernetes`` cluster's runs as KubeRay objects
queued by Kueue, applied and observed through the cluster's API server.

Submit (``submit_run``): the platform's Kueue and workspace objects
(``render.kueue.render_platform``: ResourceFlavors, WorkloadPriorityClasses,
ClusterQueues, each workspace's Namespace, ServiceAccount, RoleBinding, data PVC and
LocalQueue) are applied once per backend (at its first inventory or submit), then the run's objects
(``render.plan.render_manifests``), all by server-side apply. Each run object and its
pod templates carry ``taugrid.io/run-id`` and ``taugrid.io/submission`` (the attempt).
A rejected object fails the submission with the API server's message and what this
attempt had applied is deleted again (nothing half-applied stays).

Observe (``status``): the run object (RayJob/RayCluster/RayService/Job), Kueue's
Workload for it, the attempt's Pods and their Nodes map onto job states and phase
signals, each naming the Kubernetes object it came from:

    Workload QuotaReserved/Admitted     → Admitted done   (source: Workload ns/name)
    Workload not admitted               → Scheduled active, Kueue's reason
    Pod unbound (PodScheduled=False)    → Scheduled active, kube-scheduler's reason
    every Pod bound (spec.nodeName)     → Scheduled done, job RUNNING
    Nodes of its GPU pods Ready, untainted → GPU healthy done (else failed, the taint)
    RayJob jobDeploymentStatus Complete → SUCCEEDED; Failed → FAILED (its message)
    the run object deleted by ``stop``  → STOPPED
    Workload Evicted, reason Preempted  → the run object deleted, FAILED with
                                          ``error_type`` "preemption" (Kueue's message)
    RayService                          → its RayCluster's Workload; Serve's status of the
                                          app as ``JobStatus.serve`` (``kube_serve``)

A finished RayJob is held (``settling``) while its submitter pod still prints the job's last
log lines, at most ``SUBMITTER_GRACE_S``.

Release (``release_check``): both lines — Kueue's quota (the Workload gone, no longer
admitted or Finished) and then the pods gone; an ended run object is deleted then, so
its pods go at once rather than after KubeRay's ``ttlSecondsAfterFinished``.
``inventory`` reads Nodes (allocatable GPUs, the GPU model from the platform's node
labels, Ready and taints) and the GPUs requested by bound pods; ``queue_usage`` reads
ClusterQueues (admitted/pending workloads, GPUs reserved per flavor). ``read_logs``:
the driver pod's log (``backends.kube.kube_logs``).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from taugrid.backends import base
from taugrid.backends import errors as berr
from taugrid.backends.kube import kube_api, kube_logs, kube_pods, kube_serve
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.platform import models as pm
from taugrid.render import kueue, naming, plan, runspec
from taugrid.render import pods as render_pods
from taugrid.spec import units

__all__ = ["LABEL_SUBMISSION", "PREEMPTED", "KubernetesBackend"]

log = logging.getLogger(__name__)
LABEL_SUBMISSION = "taugrid.io/submission"
_JOB_UID = "kueue.x-k8s.io/job-uid"
_RAY_NODE_TYPE = "ray.io/node-type"
_BAD_TAINT_EFFECTS = ("NoSchedule", "NoExecute")
PREEMPTED = st.FailureKind.PREEMPTION.value
"""``JobStatus.error_type`` of an attempt Kueue evicted (the agent's failure kind)."""
SUBMIT_ERROR = st.FailureKind.SUBMIT_ERROR.value
"""``JobStatus.error_type`` of an attempt whose pods cannot start (a bad image, a
missing Secret, a crash loop): the agent's failure kind."""


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def _cond(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def _true(obj: dict[str, Any], kind: str) -> bool:
    c = _cond(obj, kind)
    return c is not None and c.get("status") == "True"


def _stamp(obj: dict[str, Any], label: str) -> None:
    """``label`` on ``obj`` and on each of its pod templates."""
    key, value = label.split("=", 1)
    obj["metadata"].setdefault("labels", {})[key] = value
    for template in render_pods.pod_templates(obj):
        template["metadata"]["labels"][key] = value


class KubernetesBackend(base.Backend):
    """Runs on one Kubernetes cluster (a kubeconfig and context) with Kueue and KubeRay."""

    name: ClassVar[str] = "kubernetes"
    capabilities: ClassVar[frozenset[base.Capability]] = frozenset(
        {
            base.Capability.RUN_SPEC,
            base.Capability.STOP,
            base.Capability.INVENTORY,
            base.Capability.JOB_NODES,
            base.Capability.RELEASE_CHECK,
            base.Capability.QUEUES,
            base.Capability.LOGS,
        }
    )

    def __init__(self, platform: pm.Platform, cluster: pm.ClusterSpec) -> None:
        self.platform = platform
        self.pods = cluster.pods
        self._spot_pools = list(cluster.spot_pools)
        self.api = kube_api.KubeApi(cluster.kubeconfig, cluster.context)
        self._lock = threading.Lock()
        self._platform_applied = False
        self._where: dict[str, tuple[str, str, str]] = {}  # sid -> (kind, namespace, name)
        self._stopped: set[str] = set()
        # sid -> why the agent deleted its object, and the failure kind: Kueue's eviction
        # (preemption) or a pod that cannot start (submit_error)
        self._ended: dict[str, tuple[str, str]] = {}
        self._final: dict[str, tuple[base.JobState, str]] = {}  # sid -> how it ended
        self._log_pods: dict[str, tuple[str, int]] = {}  # sid -> (driver pod, its log's start)
        self._uids: dict[str, str] = {}  # sid -> uid of its run object
        self._queued_uids: dict[str, str] = {}  # sid -> uid of what its Workload is of
        self._models = {
            (g.node_label, g.node_label_value or g.name): g.name for g in platform.gpu_types
        }

    def close(self) -> None:
        self.api.close()

    # -- submit -----------------------------------------------------------------------
    def submit(self, submission: base.Submission | Any) -> str:
        sub = base.Submission.coerce(submission)
        raise berr.SubmissionRejected(
            f"the kubernetes backend runs run specs, not bare Ray submissions "
            f"({sub.submission_id})",
            hint="submit through the hub (the agent calls submit_run)",
        )

    def apply_platform(self) -> None:
        """Applies the platform's Kueue and workspace objects (once per backend)."""
        with self._lock:
            if self._platform_applied:
                return
            for obj in kueue.render_platform(self.platform):
                self.api.apply(obj)
            self._platform_applied = True

    def submit_run(
        self,
        spec: Mapping[str, Any],
        run_id: str,
        submission_id: str,
        pod: base.PodAttempt | None = None,
        secrets: Mapping[str, str] | None = None,
        capacity: str | None = None,
    ) -> str:
        rs = runspec.read(spec)
        objs = plan.render_manifests(rs, run_id)
        for obj in objs:
            _stamp(obj, f"{LABEL_SUBMISSION}={naming.label_value(submission_id)}")
            render_pods.settle(obj, self.pods)
            render_pods.keep_to_capacity(obj, self._spot_pools, capacity)
        self.apply_platform()
        if self._find(submission_id) is not None:
            raise berr.DuplicateSubmission(submission_id)
        self._clear_earlier(objs[-1])
        if pod is not None and kube_pods.wrap(objs[-1], pod) and pod.secret_env:
            ns = objs[-1]["metadata"]["namespace"]
            self.api.apply(kube_pods.records_secret(ns, pod.secret_env))
        run_obj = objs[-1]
        meta = run_obj["metadata"]
        secret = naming.secrets_name(run_id)
        if secrets:  # before the pods that read it; then owned by the run's object
            self.api.apply(kube_pods.opaque_secret(meta["namespace"], secret, dict(secrets)))
        owner = self._apply_all(objs)
        if secrets:
            values = dict(secrets)
            self.api.apply(kube_pods.opaque_secret(meta["namespace"], secret, values, owner))
        self._where[submission_id] = (run_obj["kind"], meta["namespace"], meta["name"])
        return submission_id

    def _apply_all(self, objs: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply ``objs`` in order (all or none); the last one as the server stored it."""
        applied: list[dict[str, Any]] = []
        try:
            for obj in objs:
                stored = self.api.apply(obj)
                applied.append(obj)
        except berr.KubernetesRejected:
            for obj in reversed(applied):
                meta = obj["metadata"]
                self.api.delete(obj["kind"], meta["name"], meta.get("namespace"))
            raise
        return stored

    def pods_store_records(self, spec: Mapping[str, Any]) -> bool:
        return kube_pods.wraps(runspec.read(spec).workload_kind)

    def _current(self, sid: str) -> tuple[str, str, str, dict[str, Any] | None] | None:
        """Where attempt ``sid``'s object is, and the object when it is still this
        attempt's (a later attempt's object has the same name and another label)."""
        where = self._find(sid)
        if where is None:
            return None
        kind, ns, name = where
        obj = self.api.get(kind, name, ns)
        if obj is not None and _labels(obj).get(LABEL_SUBMISSION) != naming.label_value(sid):
            obj = None
        if obj is not None:
            self._uids[sid] = str(obj["metadata"].get("uid", ""))
        return (*where, obj)

    def _clear_earlier(self, run_obj: dict[str, Any]) -> None:
        """An earlier attempt's object of the same name (the hub has ended that attempt)
        is deleted; this submission is tried again once it is gone (a retryable error)."""
        meta = run_obj["metadata"]
        old = self.api.get(run_obj["kind"], meta["name"], meta["namespace"])
        if old is None:
            return
        if not old["metadata"].get("deletionTimestamp"):
            self.api.delete(run_obj["kind"], meta["name"], meta["namespace"])
        raise berr.KubernetesUnavailable(
            f"{run_obj['kind']} {meta['namespace']}/{meta['name']} of an earlier attempt "
            "is still being deleted"
        )

    def _find(self, sid: str) -> tuple[str, str, str] | None:
        """Where attempt ``sid``'s run object is (remembered, else found by its label)."""
        if sid in self._where:
            return self._where[sid]
        selector = f"{LABEL_SUBMISSION}={naming.label_value(sid)}"
        for kind in ("RayJob", "RayCluster", "RayService", "Job"):
            for obj in self.api.list(kind, selector=selector):
                meta = obj["metadata"]
                self._where[sid] = (kind, meta["namespace"], meta["name"])
                return self._where[sid]
        return None

    # -- observe ----------------------------------------------------------------------
    def _pods(self, namespace: str, sid: str) -> list[dict[str, Any]]:
        selector = f"{LABEL_SUBMISSION}={naming.label_value(sid)}"
        return self.api.list("Pod", namespace, selector)

    def _workload(self, namespace: str, uid: str) -> dict[str, Any] | None:
        found = self.api.list("Workload", namespace, f"{_JOB_UID}={uid}")
        return found[0] if found else None

    def status(self, job_id: str) -> base.JobStatus:
        found = self._current(job_id)
        if found is None or found[3] is None:
            return self._gone(job_id)
        kind, ns, name, obj = found[0], found[1], found[2], found[3]
        selector = f"{LABEL_SUBMISSION}={naming.label_value(job_id)}"
        owner = kube_serve.workload_owner(self.api, kind, obj, selector)
        self._queued_uids[job_id] = str(owner["metadata"].get("uid", ""))
        wl = self._workload(ns, self._queued_uids[job_id])
        evicted = _preempted(wl)
        if evicted:  # Kueue took its quota back: TauGrid requeues the run itself
            why = f"preempted by Kueue (Workload {ns}/{_name(wl)}): {evicted}"
            return self._end(job_id, (kind, ns, name, obj), why, PREEMPTED)
        pods = [p for p in self._pods(ns, job_id) if not p["metadata"].get("deletionTimestamp")]
        stuck = _stuck(pods)
        if stuck:  # a pod that cannot start never will by waiting: fail with its reason
            return self._end(job_id, (kind, ns, name, obj), stuck, SUBMIT_ERROR)
        missing = _missing_pods(kind, obj, pods)
        signals = [*_admission(wl, ns), *_scheduling(wl, pods, ns, (kind, name, missing))]
        bound = sorted({p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")})
        gpu_nodes = {p["spec"].get("nodeName") for p in pods if _pod_gpus(p)}
        signals += self._gpu_health(sorted(n for n in gpu_nodes if n))
        done = _finished(kind, obj)
        if done is not None:
            state, message = done
            self._final[job_id] = (state, message)
        elif (
            pods
            and not missing
            and all(p["spec"].get("nodeName") for p in pods)
            and wl is not None
            and _admitted(wl)
        ):
            state, message = base.JobState.RUNNING, f"{len(pods)} pods bound"
        else:
            state, message = base.JobState.PENDING, signals[-1].reason if signals else ""
        return base.JobStatus(
            job_id=job_id,
            state=state,
            message=message,
            driver_node_id=bound[0] if bound else None,
            signals=tuple(signals),
            start_time=_time(obj, "startTime"),
            end_time=_time(obj, "endTime"),
            serve=kube_serve.serve_doc(obj, pods) if kind == "RayService" else None,
        )

    def _end(
        self, job_id: str, where: tuple[str, str, str, dict[str, Any]], why: str, kind: str
    ) -> base.JobStatus:
        """Delete the attempt's object (its pods go with it) and end it with ``why``."""
        self._ended[job_id] = (why, kind)
        obj_kind, ns, name, obj = where
        self.api.delete(obj_kind, name, ns, obj["metadata"].get("uid"))
        return self._gone(job_id)

    def _gone(self, job_id: str) -> base.JobStatus:
        if job_id in self._final:  # ended, then deleted by ``release_check``
            state, message = self._final[job_id]
            return base.JobStatus(job_id=job_id, state=state, message=message)
        if job_id in self._ended:
            why, kind = self._ended[job_id]
            return base.JobStatus(
                job_id=job_id, state=base.JobState.FAILED, message=why, error_type=kind
            )
        if job_id in self._stopped:
            return base.JobStatus(
                job_id=job_id, state=base.JobState.STOPPED, message="deleted by cancel"
            )
        raise berr.JobNotFound(job_id, self.api.server)

    def _gpu_health(self, node_names: list[str]) -> list[base.PhaseSignal]:
        if not node_names:
            return []
        problems = []
        for name in node_names:
            node = self.api.get("Node", name)
            why = _node_problem(node, self.pods) if node is not None else "node deleted"
            if why:
                problems.append(f"{name}: {why}")
        source = f"Node {', '.join(node_names)}"
        if problems:  # failed, as for a node the hub marked (the pods may still run)
            return [
                _signal(ph.Phase.GPU_HEALTHY, ph.PhaseStatus.FAILED, source, "; ".join(problems))
            ]
        reason = "Ready, no NoSchedule/NoExecute taints"
        return [_signal(ph.Phase.GPU_HEALTHY, ph.PhaseStatus.DONE, source, reason)]

    def job_nodes(self, job_id: str) -> base.JobPlacement:
        where = self._find(job_id)
        nodes = (
            {
                p["spec"]["nodeName"]
                for p in self._pods(where[1], job_id)
                if p["spec"].get("nodeName")
            }
            if where
            else set()
        )
        return base.JobPlacement(
            job_id=job_id, driver_node_id=None, worker_node_ids=frozenset(nodes)
        )

    def logs(self, job_id: str) -> str:
        """The driver's log so far (``read_logs`` reads it a chunk at a time)."""
        return self.read_logs(job_id, 0, kube_logs.LOG_MAX).text

    def read_logs(
        self, job_id: str, offset: int = 0, chunk: int = kube_logs.LOG_CHUNK
    ) -> base.LogChunk:
        """The driver pod's log (``backends.kube.kube_logs``) from ``offset`` on, at most
        ``chunk`` more bytes, so a long log is not read whole every poll."""
        where = self._find(job_id)
        pod = kube_logs.driver_pod(where[0], self._pods(where[1], job_id)) if where else None
        if where is None or pod is None:
            return base.LogChunk(text="", offset=offset, next_offset=offset)
        start = self._log_start(job_id, pod["metadata"]["name"], offset)
        read = max(offset - start, 0)
        text = kube_logs.driver_log(self.api, where[0], where[1], pod, read + chunk)
        return base.LogChunk(
            text=text[read:], offset=offset, next_offset=max(start + len(text), offset)
        )

    def _log_start(self, job_id: str, pod: str, offset: int) -> int:
        """Where ``pod``'s log starts in the run's log: 0 for the first driver pod; the
        offset read so far when another one takes over (a submitter made again), so its
        log follows what was read rather than losing its first bytes."""
        seen = self._log_pods.get(job_id)
        if seen is None or seen[0] != pod:
            self._log_pods[job_id] = (pod, offset if seen is not None else 0)
        return self._log_pods[job_id][1]

    # -- stop and release ---------------------------------------------------------------
    def stop(self, job_id: str) -> None:
        found = self._current(job_id)
        self._stopped.add(job_id)
        if found is not None and (obj := found[3]) is not None:
            kind, ns, name, _ = found
            if kind == "RayJob":
                self._without_stop_job(ns, name, obj)
            self.api.delete(kind, name, ns, obj["metadata"].get("uid"))

    def _without_stop_job(self, ns: str, name: str, obj: dict[str, Any]) -> None:
        """``KUBERAY_STOP_JOB_FINALIZER`` off a RayJob about to be deleted, so that its
        pods' deletion stops the Ray job after their preStop hook gave the driver its
        notice. A RayJob changed meanwhile keeps it (deleted as KubeRay would)."""
        finalizers = obj["metadata"].get("finalizers") or []
        if KUBERAY_STOP_JOB_FINALIZER not in finalizers:
            return
        meta = {
            "finalizers": [f for f in finalizers if f != KUBERAY_STOP_JOB_FINALIZER],
            "resourceVersion": obj["metadata"].get("resourceVersion"),
        }
        try:
            self.api.patch("RayJob", name, {"metadata": meta}, namespace=ns)
        except berr.KubernetesRejected as exc:
            log.warning("RayJob %s/%s keeps KubeRay's stop-job finalizer: %s", ns, name, exc)

    def settling(self, job_id: str) -> bool:
        """A pod of a job this agent deleted (stopped, or ended for Kueue's eviction) still
        runs within the grace period its deletion gave it: podsync is storing the job's
        last metric lines and the notice's checkpoint. Past the deadline (a node that no
        longer answers) nothing more will come. A finished RayJob whose submitter still
        follows the Ray job's log settles too (``_submitter_following``)."""
        where = self._find(job_id)
        if where is None:
            return False
        now, pods = dt.datetime.now(dt.UTC), self._pods(where[1], job_id)
        if job_id in self._stopped or job_id in self._ended:
            return any(_still_running(p, now) for p in pods)
        found = self._current(job_id) if where[0] == "RayJob" else None
        if found is None or found[3] is None or _finished("RayJob", found[3]) is None:
            return False
        return _submitter_following(found[3], kube_logs.driver_pods("RayJob", pods), now)

    def release_check(self, job_id: str) -> bool:
        """Kueue's quota released (no admitted Workload of it) and its pods gone."""
        found = self._current(job_id)
        if found is None:
            return True
        kind, ns, name, obj = found
        if obj is not None and _finished(kind, obj) is None:
            return False
        if obj is not None:
            wl = self._workload(ns, obj["metadata"].get("uid", ""))
            if wl is not None and _admitted(wl) and not _true(wl, "Finished"):
                return False
            # ended: its pods go now (KubeRay's ttlSecondsAfterFinished is a backstop for
            # an agent that is gone); the record keeps what the object said
            self.api.delete(kind, name, ns, obj["metadata"].get("uid"))
        elif job_id in self._uids:  # its Workload goes with it (owner references)
            uid = self._queued_uids.get(job_id) or self._uids[job_id]
            if any(_admitted(w) for w in self.api.list("Workload", ns, f"{_JOB_UID}={uid}")):
                return False
        return not self._pods(ns, job_id)

    # -- cluster state ------------------------------------------------------------------
    def inventory(self) -> base.ClusterInventory:
        self.apply_platform()  # the cluster's queues exist from the agent's first report
        nodes = self.api.list("Node")
        held: dict[str, float] = {}
        for pod in self.api.list("Pod"):
            node = pod["spec"].get("nodeName")
            if node and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                held[node] = held.get(node, 0.0) + _pod_gpus(pod)
        ours = [n for n in nodes if render_pods.selects(self.pods, n)]
        out = [self._node(n, held.get(n["metadata"]["name"], 0.0)) for n in ours]
        return base.ClusterInventory(nodes=out, remote_nodes=True, taken_at=dt.datetime.now(dt.UTC))

    def _node(self, node: dict[str, Any], gpus_held: float) -> base.NodeInventory:
        meta, alloc = node["metadata"], node.get("status", {}).get("allocatable", {})
        labels = dict(meta.get("labels") or {})
        gpus = float(alloc.get(naming.GPU_RESOURCE, 0))
        problem = _node_problem(node, self.pods)
        ips = [a["address"] for a in node.get("status", {}).get("addresses", []) or []]
        model = next((m for (k, v), m in self._models.items() if labels.get(k) == v), None)
        return base.NodeInventory(
            node_id=meta["name"],
            ip=ips[0] if ips else "",
            alive=_true(node, "Ready"),
            state_message=f"Node {meta['name']}: {problem}" if problem else None,
            cpu_total=_cpu(alloc.get("cpu", "0")),
            cpu_available=_cpu(alloc.get("cpu", "0")),
            gpu_total=gpus,
            gpu_available=0.0 if problem else max(gpus - gpus_held, 0.0),
            memory_total=units.parse_quantity_bytes(alloc.get("memory", "0")),
            memory_available=units.parse_quantity_bytes(alloc.get("memory", "0")),
            accelerator=model or labels.get("nvidia.com/gpu.product"),
            labels=labels,
            reclaim=_reclaim_notice(node),
        )

    def queue_usage(self) -> list[dict[str, Any]]:
        out = []
        for cq in self.api.list("ClusterQueue"):
            status = cq.get("status", {})
            gpus = {
                f["name"]: r.get("total", "0")
                for f in status.get("flavorsReservation", []) or []
                for r in f.get("resources", [])
                if r.get("name") == naming.GPU_RESOURCE
            }
            out.append(
                {
                    "cluster_queue": cq["metadata"]["name"],
                    "admitted": int(status.get("admittedWorkloads", 0)),
                    "pending": int(status.get("pendingWorkloads", 0)),
                    "gpus_reserved": gpus,
                }
            )
        return out


# -- mapping helpers ------------------------------------------------------------------------


def _signal(phase: ph.Phase, status: ph.PhaseStatus, source: str, reason: str) -> base.PhaseSignal:
    return base.PhaseSignal(phase=phase.value, status=status.value, source=source, reason=reason)


def _name(obj: dict[str, Any] | None) -> str:
    return str((obj or {}).get("metadata", {}).get("name", "?"))


KUBERAY_STOP_JOB_FINALIZER = "ray.io/rayjob-finalizer"
"""KubeRay's finalizer on a RayJob: on deletion it stops the Ray job through the head's
dashboard, and Ray then SIGTERMs the driver and every process under it at once and
SIGKILLs them 3 s later (``RAY_JOB_STOP_WAIT_TIME_S``): the job would get no notice and
its wrapper no time to store the checkpoint. ``stop`` removes it first."""
_CANNOT_START = (
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
)
"""Container waiting reasons that waiting does not cure (the kubelet's own words)."""
_PASSING = ("failed to sync secret cache", "failed to sync configmap cache")
"""Messages of a ``CreateContainerConfigError`` that waiting cures: a busy kubelet had not
yet read the pod's Secret or ConfigMap ("...: timed out waiting for the condition", found
in CI); a Secret that does not exist says so instead."""
CRASH_RESTARTS = 2
"""A container in ``CrashLoopBackOff`` is stuck once the kubelet has restarted it this
many times: a Ray node that exits once on a busy node (its client server gives the raylet
30 s to register) starts on the next try; one that keeps exiting never will."""


def _stuck(pods: list[dict[str, Any]]) -> str:
    """The first container of ``pods`` that cannot start (a crash loop: once restarted
    ``CRASH_RESTARTS`` times), as "<reason>: <message> (pod <ns>/<name>, container <c>)",
    then how it last exited (its exit code and the end of its log, which the kubelet keeps
    as our containers' termination message: ``FallbackToLogsOnError``); "" when none."""
    for pod in pods:
        status = pod.get("status") or {}
        for c in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]:
            waiting = (c.get("state") or {}).get("waiting") or {}
            looping = waiting.get("reason") == "CrashLoopBackOff"
            if looping and int(c.get("restartCount") or 0) < CRASH_RESTARTS:
                continue
            if any(m in str(waiting.get("message") or "") for m in _PASSING):
                continue  # the kubelet tries again by itself
            if waiting.get("reason") in _CANNOT_START:
                meta = pod["metadata"]
                where = f"pod {meta['namespace']}/{meta['name']}, container {c.get('name')}"
                said = f"{waiting['reason']}: {waiting.get('message') or 'no message'} ({where})"
                return said + _last_exit((c.get("lastState") or {}).get("terminated") or {})
    return ""


def _last_exit(terminated: dict[str, Any]) -> str:
    if not terminated:
        return ""
    why = f" ({terminated['reason']})" if terminated.get("reason") else ""
    out = str(terminated.get("message") or "").strip()
    return f"; it exited with code {terminated.get('exitCode')}{why}" + (f": {out}" if out else "")


def _preempted(wl: dict[str, Any] | None) -> str:
    """Kueue's message when it evicted ``wl`` to make room (else "")."""
    if wl is None:
        return ""
    c = _cond(wl, "Evicted") or {}
    if c.get("status") == "True" and c.get("reason") == "Preempted":
        return str(c.get("message") or "Preempted")
    return ""


def _admitted(wl: dict[str, Any]) -> bool:
    return _true(wl, "Admitted") or _true(wl, "QuotaReserved")


def _admission(wl: dict[str, Any] | None, ns: str) -> list[base.PhaseSignal]:
    if wl is None or not _admitted(wl):
        return []
    source = f"Kueue Workload {ns}/{wl['metadata']['name']}"
    cq = wl.get("status", {}).get("admission", {}).get("clusterQueue", "?")
    return [
        _signal(ph.Phase.ADMITTED, ph.PhaseStatus.DONE, source, f"admitted by ClusterQueue {cq}")
    ]


def _missing_pods(kind: str, obj: dict[str, Any], pods: list[dict[str, Any]]) -> int:
    """How many of the object's pods (a Ray cluster's head and workers, a Job's
    parallelism) its controller has not made yet (KubeRay makes workers after the head)."""
    spec = obj.get("spec") or {}
    if kind == "Job":
        return max(int(spec.get("parallelism") or 1) - len(pods), 0)
    cluster = {"RayJob": spec.get("rayClusterSpec"), "RayService": spec.get("rayClusterConfig")}
    groups = (cluster.get(kind, spec) or {}).get("workerGroupSpecs") or []
    want = 1 + sum(int(g.get("replicas") or 0) for g in groups)
    have = sum(1 for p in pods if _labels(p).get(_RAY_NODE_TYPE) in ("head", "worker"))
    return max(want - have, 0)


def _scheduling(
    wl: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    ns: str,
    made: tuple[str, str, int],
) -> list[base.PhaseSignal]:
    if wl is None:
        return []
    if not _admitted(wl):
        c = _cond(wl, "QuotaReserved") or {}
        source = f"Kueue Workload {ns}/{wl['metadata']['name']}"
        reason = str(c.get("message") or "waiting for Kueue to reserve quota")
        return [_signal(ph.Phase.SCHEDULED, ph.PhaseStatus.ACTIVE, source, reason)]
    kind, name, missing = made
    if missing:
        source = f"{'Job controller' if kind == 'Job' else 'KubeRay'} {kind} {ns}/{name}"
        reason = f"waiting for {missing} more pod(s) to be created"
        return [_signal(ph.Phase.SCHEDULED, ph.PhaseStatus.ACTIVE, source, reason)]
    unbound = [p for p in pods if not p["spec"].get("nodeName")]
    if unbound:
        pod = unbound[0]
        c = _cond(pod, "PodScheduled") or {}
        source = f"kube-scheduler Pod {ns}/{pod['metadata']['name']}"
        reason = str(c.get("message") or "waiting for kube-scheduler to bind it")
        return [_signal(ph.Phase.SCHEDULED, ph.PhaseStatus.ACTIVE, source, reason)]
    if not pods:
        return []
    source = f"kube-scheduler Pods {ns}/" + ",".join(p["metadata"]["name"] for p in pods)
    nodes = sorted({p["spec"]["nodeName"] for p in pods})
    return [
        _signal(ph.Phase.SCHEDULED, ph.PhaseStatus.DONE, source, f"bound to {', '.join(nodes)}")
    ]


def _finished(kind: str, obj: dict[str, Any]) -> tuple[base.JobState, str] | None:
    status = obj.get("status", {}) or {}
    if kind == "RayJob":
        deploy, job = status.get("jobDeploymentStatus"), status.get("jobStatus")
        message = str(status.get("message") or "")
        if job == "STOPPED":
            return base.JobState.STOPPED, message or "RayJob stopped"
        if deploy == "Complete" or job == "SUCCEEDED":
            return base.JobState.SUCCEEDED, message or "RayJob succeeded"
        if deploy == "Failed" or job == "FAILED":
            return base.JobState.FAILED, message or f"RayJob {status.get('reason') or 'failed'}"
        return None
    if kind == "Job":
        if _true(obj, "Complete"):
            return base.JobState.SUCCEEDED, "Job complete"
        if _true(obj, "Failed"):
            return base.JobState.FAILED, str((_cond(obj, "Failed") or {}).get("message", ""))
    return None


def _time(obj: dict[str, Any], key: str) -> dt.datetime | None:
    return _parse_time((obj.get("status") or {}).get(key))


def _parse_time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


SUBMITTER_GRACE_S = 30.0
"""How long after a RayJob's end the agent waits for its submitter to print the job's last
log lines and exit before it deletes the RayJob (and the submitter with it)."""


def _submitter_following(
    obj: dict[str, Any], submitters: list[dict[str, Any]], now: dt.datetime
) -> bool:
    """KubeRay read the Ray job's end from the dashboard, but the submitter pod (which
    follows the job's log, the run's log) still runs and none has exited: its last lines
    (a failed job's traceback) are still coming, for at most ``SUBMITTER_GRACE_S``."""
    ended = _time(obj, "endTime") or now
    if (now - ended).total_seconds() > SUBMITTER_GRACE_S:
        return False
    phases = {(p.get("status") or {}).get("phase") for p in submitters}
    exited = bool(phases & {"Succeeded", "Failed"})
    return not exited and any(_still_running(p, now) for p in submitters)


def _still_running(pod: dict[str, Any], now: dt.datetime) -> bool:
    """The pod's containers run and its deletion's grace period (if deleted) has not
    passed."""
    if (pod.get("status") or {}).get("phase") != "Running":
        return False
    deadline = _parse_time(pod["metadata"].get("deletionTimestamp"))
    return deadline is None or now < deadline


RECLAIM_TAINTS = (
    "taugrid.io/reclaim",
    "cloud.google.com/impending-node-termination",
    "aws-node-termination-handler/spot-itn",
    "karpenter.sh/disrupted",
)
"""Taints that announce a node is about to be taken away (a spot reclaim): the ones
GKE, the AWS node termination handler and Karpenter set, and TauGrid's own."""


def _reclaim_notice(node: dict[str, Any]) -> str | None:
    """``taint <key>`` when the node carries one of ``RECLAIM_TAINTS``."""
    for t in node.get("spec", {}).get("taints") or []:
        if t.get("key") in RECLAIM_TAINTS:
            return f"taint {t['key']}"
    return None


def _node_problem(node: dict[str, Any], pods: pm.PodSettings) -> str:
    """What keeps new GPU pods off ``node``: Ready not True (the kubelet's, or the node
    lifecycle controller's, condition: "not Ready (NodeStatusUnknown: Kubelet stopped
    posting node status.)") and its NoSchedule/NoExecute taints that the cluster's
    ``pods`` settings do not tolerate; "" when none."""
    problems = []
    if not _true(node, "Ready"):
        ready = _cond(node, "Ready") or {}
        why = ": ".join(str(ready[k]) for k in ("reason", "message") if ready.get(k))
        problems.append(f"not Ready ({why})" if why else "not Ready")
    taints = [
        f"{t['key']}={t.get('value', '')}:{t['effect']}"
        for t in node.get("spec", {}).get("taints") or []
        if t.get("effect") in _BAD_TAINT_EFFECTS and not render_pods.tolerated(pods, t)
    ]
    if taints:
        problems.append(f"tainted {', '.join(taints)}")
    return "; ".join(problems)


def _cpu(value: str) -> float:
    """A Kubernetes CPU quantity ("64", "500m") in cores."""
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def _pod_gpus(pod: dict[str, Any]) -> float:
    return render_pods.gpus(pod["spec"])

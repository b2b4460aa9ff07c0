"""RunSpec → KubeRay objects (RayJob, RayCluster, RayService, ray.io/v1) or a batch Job.

Owns the Kubernetes shape of one run. Every object:

- is named after the run ID (``naming.object_name``) in the workspace namespace, and
  carries the labels ``taugrid.io/run-id``, ``taugrid.io/workspace``, ``taugrid.io/team``,
  ``taugrid.io/name`` and Kueue's ``queue-name``/``priority-class``, plus the
  provenance annotations (config hash, profile hash, profile, per-field sources);
- labels its pod templates (head, workers, submitter, Job pods) with
  ``taugrid.io/run-id`` too, so every pod of the run is found by that label;
- is created suspended where Kueue manages it (RayJob, RayCluster, Job): Kueue admits
  it by un-suspending it once the team's ClusterQueue has quota;
- mounts the workspace's data PVC at ``/data`` in every pod and gets ``TAU_RUN_ID``,
  ``TAU_OUTPUT_DIR`` and ``CHECKPOINT_PATH`` (``/data/<ws>/runs/<id>/...``).

A spanning run (``render_span``; ``scheduling.spanning``) is one Ray cluster across
member clusters: the head's member gets the RayJob, its worker group sized to the
workers placed there, and a headless Service ``<name>-head`` selecting the head pod;
every other member gets its workers as one Kueue *pod group* (plain Pods labelled
``kueue.x-k8s.io/pod-group-name``, annotated with the group's size), each running
``ray start --block --address=<head>:6379``. Ray needs every node to reach every other,
so the members must share a routable pod network (a multi-cluster network such as
Cilium ClusterMesh or Submariner); the head is addressed by its Multi-Cluster Services
name, ``<name>-head.<namespace>.svc.clusterset.local``, unless the caller passes one.
A guest pod that dies is not replaced (``restartPolicy: Never``): an async run shrinks.

Ray clusters have a CPU-only head and one worker group of ``workers`` replicas with
``nvidia.com/gpu`` limits and the GPU model's node selector. Ray workers advertise the
``accelerator_type:<model>`` resource so that entrypoint requests land on them. The
code is expected at ``/data/<ws>/runs/<id>/code`` unless a ``working_dir`` is given;
the RayJob submitter pod mounts ``/data`` so ``ray job submit`` can upload it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from taugrid import errors
from taugrid.record import jobenv, layout
from taugrid.render import command, naming, resolve, runspec
from taugrid.spec import models as spec_models

__all__ = [
    "render_job",
    "render_raycluster",
    "render_rayjob",
    "render_rayservice",
    "render_span",
    "span_head_address",
]

API_RAY = "ray.io/v1"
TTL_AFTER_FINISHED_S = 600
SUBMITTER_BACKOFF_LIMIT = 5
"""A RayJob's submitter pod is tried this many more times (KubeRay's default: 2)."""
_GI, _MI = 2**30, 2**20
_HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}
_SERVE_PORT = 8000


def _cpu(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{round(value * 1000)}m"


def _memory(value: int) -> str:
    for unit, size in (("Gi", _GI), ("Mi", _MI)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def _metadata(spec: runspec.RunSpec, run_id: str, *, queued: bool = True) -> dict[str, Any]:
    labels = {
        naming.LABEL_RUN_ID: naming.label_value(run_id),
        naming.LABEL_WORKSPACE: naming.label_value(spec.workspace),
        naming.LABEL_TEAM: naming.label_value(spec.team),
        naming.LABEL_NAME: naming.label_value(spec.name),
        naming.LABEL_MANAGED_BY: "taugrid",
    }
    if queued:
        labels[naming.QUEUE_LABEL] = spec.queue
        if spec.priority:
            labels[naming.PRIORITY_LABEL] = spec.priority
    annotations = {
        naming.ANNOTATION_CONFIG_HASH: spec.config_hash,
        naming.ANNOTATION_PROFILE_HASH: spec.profile_hash,
        naming.ANNOTATION_PROFILE: spec.profile or "",
        naming.ANNOTATION_PROVENANCE: json.dumps(spec.provenance, separators=(",", ":")),
    }
    return {
        "name": naming.object_name(run_id),
        "namespace": spec.namespace,
        "labels": labels,
        "annotations": annotations,
    }


def _label_pods(obj: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Puts the run-id label on every pod template of ``obj`` (returned)."""
    spec = obj["spec"]
    cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec
    templates = [spec.get("template"), spec.get("submitterPodTemplate")]
    if "headGroupSpec" in cluster:
        templates.append(cluster["headGroupSpec"]["template"])
        templates += [g["template"] for g in cluster.get("workerGroupSpecs", [])]
    for tpl in templates:
        if tpl is not None:
            labels = tpl.setdefault("metadata", {}).setdefault("labels", {})
            labels[naming.LABEL_RUN_ID] = naming.label_value(run_id)
    return obj


def _env(spec: runspec.RunSpec, run_id: str) -> dict[str, str]:
    rdir = naming.run_dir(spec.workspace, run_id)
    ckpt = f"{rdir}/{layout.CHECKPOINTS_DIR}"
    env = command.run_env(spec, run_id, run_dir=rdir, checkpoint_default=ckpt)
    model = env.pop(jobenv.MODEL_RECORD, None)
    if model:  # a serving run's model, as the pods see the data root
        env[jobenv.MODEL_PATH] = f"{naming.DATA_MOUNT}/{model}"
    return env


def _container_env(spec: runspec.RunSpec, env: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
    secret = naming.secrets_name(env[jobenv.RUN_ID])  # the run's values, from the hub
    out += [
        {"name": s.env, "valueFrom": {"secretKeyRef": {"name": secret, "key": s.env}}}
        for s in spec.secrets
    ]
    return out


def _ray_node_env(spec: runspec.RunSpec, env: dict[str, str]) -> list[dict[str, Any]]:
    """A Ray node container's environment: the run's, and how long its raylet may take."""
    ray = [{"name": k, "value": v} for k, v in command.RAY_NODE_ENV.items()]
    return [*_container_env(spec, env), *ray]


def _resources(cpus: float, memory: int, gpus: int = 0) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": _cpu(cpus), "memory": _memory(memory)}
    limits = dict(requests)
    if gpus > 0:
        requests[naming.GPU_RESOURCE] = gpus
        limits[naming.GPU_RESOURCE] = gpus
    return {"requests": requests, "limits": limits}


def _pod_spec(
    spec: runspec.RunSpec, container: dict[str, Any], *, gpus: bool, restart: str | None = None
) -> dict[str, Any]:
    container = {
        **container,
        "volumeMounts": [{"name": "data", "mountPath": naming.DATA_MOUNT}],
        # a container that fails keeps the end of its log as its termination message,
        # so the reason of a crash loop says why (``backends.kube.kubernetes._stuck``)
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pod: dict[str, Any] = {
        "serviceAccountName": naming.WORKLOAD_SERVICE_ACCOUNT,
        "containers": [container],
        "volumes": [
            {
                "name": "data",
                "persistentVolumeClaim": {"claimName": naming.data_claim(spec.workspace)},
            }
        ],
    }
    if restart:
        pod["restartPolicy"] = restart
    if gpus:
        if spec.node_selector:
            pod["nodeSelector"] = dict(spec.node_selector)
        pod["tolerations"] = [
            {"key": naming.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
        ]
    return pod


def _head_group(spec: runspec.RunSpec, env: dict[str, str], serve: bool) -> dict[str, Any]:
    ports = dict(_HEAD_PORTS, **({"serve": _SERVE_PORT} if serve else {}))
    container = {
        "name": "ray-head",
        "image": spec.image,
        "resources": _resources(spec.head_cpus, spec.head_memory_bytes),
        "env": _ray_node_env(spec, env),
        "ports": [{"name": n, "containerPort": p} for n, p in ports.items()],
    }
    # A CPU-only head: no GPU limit, so Ray sees 0 GPUs there and GPU work goes to workers;
    # a serving head none of its CPUs either, so Serve's replicas run on the workers only.
    params = {"num-gpus": "0", **({"num-cpus": "0"} if serve else {})}
    return {
        "rayStartParams": params,
        "template": {"spec": _pod_spec(spec, container, gpus=False)},
    }


def _whole_gpus(spec: runspec.RunSpec) -> int:
    """GPUs per worker pod: Kubernetes device plugins hand out whole GPUs only."""
    if spec.shared_gpu:
        raise errors.UserError(
            f"compute.gpus is {spec.gpus_per_worker:g}: a share of one GPU runs only in Ray "
            "regions; Kubernetes allocates whole GPUs (nvidia.com/gpu)",
            hint="ask for 1 GPU, or restrict the run to Ray regions with placement.regions",
        )
    return int(spec.gpus_per_worker)


def _worker_group(spec: runspec.RunSpec, env: dict[str, str]) -> dict[str, Any]:
    gpus = _whole_gpus(spec)
    params: dict[str, str] = {}
    if spec.gpu_model and gpus > 0:
        # KubeRay pastes rayStartParams into a shell command: the JSON is single-quoted,
        # as KubeRay quotes the resources it writes itself
        accelerator = json.dumps({command.accelerator_resource(spec.gpu_model): gpus})
        params["resources"] = f"'{accelerator}'"
    container = {
        "name": "ray-worker",
        "image": spec.image,
        "resources": _resources(spec.cpus_per_worker, spec.memory_per_worker_bytes, gpus),
        "env": _ray_node_env(spec, env),
    }
    return {
        "groupName": "gpu-workers" if gpus > 0 else "workers",
        "replicas": spec.workers,
        "minReplicas": spec.workers,
        "maxReplicas": spec.workers,
        "rayStartParams": params,
        "template": {"spec": _pod_spec(spec, container, gpus=gpus > 0)},
    }


def _cluster_spec(
    spec: runspec.RunSpec, env: dict[str, str], serve: bool = False
) -> dict[str, Any]:
    return {
        "rayVersion": resolve.RAY_VERSION,
        "enableInTreeAutoscaling": False,
        "headGroupSpec": _head_group(spec, env, serve),
        "workerGroupSpecs": [_worker_group(spec, env)],
    }


def _submitter(spec: runspec.RunSpec) -> dict[str, Any]:
    container = {
        "name": "ray-job-submitter",
        "image": spec.image,
        "resources": _resources(0.5, 1 * _GI),
    }
    return {"spec": _pod_spec(spec, container, gpus=False, restart="Never")}


def render_rayjob(
    spec: runspec.RunSpec, run_id: str, *, working_dir: str | None = None
) -> dict[str, Any]:
    """A suspended RayJob for Kueue; ``working_dir`` defaults to the run's code dir."""
    env = _env(spec, run_id)
    entry = command.plan(spec)
    workdir = working_dir or naming.code_dir(spec.workspace, run_id)
    job: dict[str, Any] = {
        "entrypoint": entry.command,
        "runtimeEnvYAML": yaml.safe_dump(
            command.runtime_env(spec, env, workdir), sort_keys=True, default_flow_style=False
        ),
        "suspend": True,
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
        # TauGrid's hub owns retries (attempts, fencing); KubeRay must not retry on its own.
        "backoffLimit": 0,
        "rayClusterSpec": _cluster_spec(spec, env),
        "submitterPodTemplate": _submitter(spec),
        # the submitter only reaches the head's dashboard; on a loaded node the head's name
        # or dashboard may answer a little after the head is Ready: its pod is tried again
        # (the Job's backoff: 10 s, 20 s, 40 s, ...) before the attempt fails
        "submitterConfig": {"backoffLimit": SUBMITTER_BACKOFF_LIMIT},
    }
    # A driver-only entrypoint runs on the head with no reservation, so that it never
    # takes CPUs the workers' placement group needs.
    if entry.num_cpus and not entry.driver_only:
        job["entrypointNumCpus"] = entry.num_cpus
    if entry.num_gpus:
        job["entrypointNumGpus"] = entry.num_gpus
    if entry.resources:
        job["entrypointResources"] = json.dumps(entry.resources, sort_keys=True)
    if spec.max_runtime_s is not None:
        job["activeDeadlineSeconds"] = max(1, round(spec.max_runtime_s))
    return _label_pods(
        {
            "apiVersion": API_RAY,
            "kind": "RayJob",
            "metadata": _metadata(spec, run_id),
            "spec": job,
        },
        run_id,
    )


def render_raycluster(spec: runspec.RunSpec, run_id: str) -> dict[str, Any]:
    """A suspended interactive RayCluster for Kueue (no entrypoint; attach with ray.init)."""
    cluster = {**_cluster_spec(spec, _env(spec, run_id)), "suspend": True}
    return _label_pods(
        {
            "apiVersion": API_RAY,
            "kind": "RayCluster",
            "metadata": _metadata(spec, run_id),
            "spec": cluster,
        },
        run_id,
    )


def _serve_config(spec: runspec.RunSpec, env: dict[str, str], working_dir: str | None) -> str:
    serve = spec.serve
    if serve is None:
        raise ValueError(
            "render_rayservice needs a RunSpec with 'serve' (workload_kind rayservice)"
        )
    env = {**env, jobenv.SERVE_REPLICAS: str(serve.replicas)}
    if serve.autoscaling is not None:
        env[jobenv.SERVE_AUTOSCALING] = serve.autoscaling.model_dump_json()
    if working_dir is None:
        # Serve needs a URI for working_dir; the code on the data volume is importable instead.
        env["PYTHONPATH"] = env.get("PYTHONPATH") or naming.code_dir(
            spec.workspace, env[jobenv.RUN_ID]
        )
    app = {
        "name": spec.name,
        "import_path": serve.import_path,
        "route_prefix": serve.route_prefix,
        "runtime_env": command.runtime_env(spec, env, working_dir),
    }
    return yaml.safe_dump({"applications": [app]}, sort_keys=True, default_flow_style=False)


def render_rayservice(
    spec: runspec.RunSpec, run_id: str, *, working_dir: str | None = None
) -> dict[str, Any]:
    """A RayService whose serveConfigV2 runs ``serve.import_path`` (``working_dir``: a URI)."""
    env = _env(spec, run_id)
    service = {
        "serveConfigV2": _serve_config(spec, env, working_dir),
        "rayClusterConfig": _cluster_spec(spec, env, serve=True),
    }
    return _label_pods(
        {
            "apiVersion": API_RAY,
            "kind": "RayService",
            "metadata": _metadata(spec, run_id),
            "spec": service,
        },
        run_id,
    )


def render_job(spec: runspec.RunSpec, run_id: str) -> dict[str, Any]:
    """A suspended batch/v1 Job for Kueue: ``workers`` indexed pods running the command."""
    env = _env(spec, run_id)
    container = {
        "name": "main",
        "image": spec.image,
        "command": command.user_command(spec),
        "workingDir": naming.code_dir(spec.workspace, run_id),
        "resources": _resources(
            spec.cpus_per_worker, spec.memory_per_worker_bytes, _whole_gpus(spec)
        ),
        "env": _container_env(spec, env),
    }
    job: dict[str, Any] = {
        "suspend": True,
        "parallelism": spec.workers,
        "completions": spec.workers,
        "completionMode": "Indexed" if spec.workers > 1 else "NonIndexed",
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
        "template": {
            "metadata": {"labels": {naming.LABEL_RUN_ID: naming.label_value(run_id)}},
            "spec": _pod_spec(spec, container, gpus=spec.gpus_per_worker > 0, restart="Never"),
        },
    }
    if spec.max_runtime_s is not None:
        job["activeDeadlineSeconds"] = max(1, round(spec.max_runtime_s))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(spec, run_id),
        "spec": job,
    }


SPAN_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
SPAN_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
SPAN_MEMBER_LABEL = "taugrid.io/span-member"


def span_head_address(spec: runspec.RunSpec, run_id: str) -> str:
    """The head Service's Multi-Cluster Services name, as other member clusters see it."""
    return f"{naming.object_name(run_id)}-head.{spec.namespace}.svc.clusterset.local"


def _head_service(spec: runspec.RunSpec, run_id: str) -> dict[str, Any]:
    meta = _metadata(spec, run_id, queued=False)
    meta["name"] = f"{meta['name']}-head"
    selector = {naming.LABEL_RUN_ID: naming.label_value(run_id), "ray.io/node-type": "head"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",  # headless: the name resolves to the head pod itself
            "selector": selector,
            "ports": [{"name": n, "port": p} for n, p in _HEAD_PORTS.items()],
        },
    }


def _guest_pod(
    spec: runspec.RunSpec, run_id: str, member: str, index: int, count: int, address: str
) -> dict[str, Any]:
    """One worker of ``member``'s group: a Kueue pod-group member joining the head."""
    gpus = _whole_gpus(spec)
    group = naming.object_name(f"{run_id}-{member}")
    meta = _metadata(spec, run_id)
    meta["name"] = naming.object_name(f"{run_id}-{member}-{index}")
    meta["labels"] |= {SPAN_GROUP_LABEL: group, SPAN_MEMBER_LABEL: naming.label_value(member)}
    meta["annotations"][SPAN_COUNT_ANNOTATION] = str(count)
    start = ["ray", "start", "--block", f"--address={address}:{_HEAD_PORTS['gcs-server']}"]
    start.append(f"--num-gpus={gpus}")
    if spec.gpu_model and gpus > 0:
        resources = {command.accelerator_resource(spec.gpu_model): gpus}
        start.append(f"--resources={json.dumps(resources)}")
    container = {
        "name": "ray-worker",
        "image": spec.image,
        "command": start,
        "resources": _resources(spec.cpus_per_worker, spec.memory_per_worker_bytes, gpus),
        "env": _ray_node_env(spec, _env(spec, run_id)),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": _pod_spec(spec, container, gpus=gpus > 0, restart="Never"),
    }


def render_span(
    spec: runspec.RunSpec,
    run_id: str,
    members: Sequence[tuple[str, int]],
    *,
    head_address: str | None = None,
    working_dir: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Per member cluster, the objects a spanning run creates there (the head's first).

    ``members``: ``(cluster, workers)``, the head's member first, as a spanning
    ``Decision`` places them; their workers add up to the run's.
    """
    if spec.communication is spec_models.Communication.SYNC:
        raise errors.UserError(
            f"run {spec.name} is placement.communication: sync; sync runs never span clusters",
            hint="declare communication: async (or none) if its workers do not synchronise",
        )
    if len(members) < 2 or sum(w for _, w in members) != spec.workers:
        raise ValueError(f"a span needs 2+ members whose workers add up to {spec.workers}")
    (head, head_workers), guests = members[0], members[1:]
    job = render_rayjob(
        spec.model_copy(update={"workers": head_workers}), run_id, working_dir=working_dir
    )
    address = head_address or span_head_address(spec, run_id)
    out = {head: [job, _head_service(spec, run_id)]}
    for member, count in guests:
        out[member] = [_guest_pod(spec, run_id, member, i, count, address) for i in range(count)]
    return out

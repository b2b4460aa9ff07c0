"""What a run's pods get from their agent besides the run's shape.

``render.kuberay`` renders a run as the cluster should run it anywhere, and
``render.pods`` adds the cluster's ``pods:`` settings; this module adds, at submission,
what only the agent knows:

- ``PodAttempt`` (``agent.records.podsync``): the run's command wrapped by it, its
  environment, the record store's credentials from the namespace's Secret
  ``RECORDS_SECRET`` (applied by the agent from its own environment), and an emptyDir at
  ``PodAttempt.root`` for the code and outputs. The working directory the renderer names
  (the data volume's code dir) is dropped: the code comes from the record.

  A batch Job: the wrapper is its pods' main process. A RayJob: the wrapper is the Ray
  job's entrypoint (the driver, on whichever Ray node the entrypoint's resources place
  it), and every Ray node's container has its environment and scratch volume, and the
  wrapper's ``--notice`` as its preStop hook (the driver's notice when the pods are
  deleted: the kubelet's SIGTERM would reach ``ray start`` only); the submitter pod is
  left as rendered. A RayService or a RayCluster: no command to wrap
  (Serve's replicas import the app; an interactive cluster's jobs come later), so every
  Ray node gets an init container running the wrapper's ``--prepare`` (code, and a
  serving run's model, from the record into scratch) and its Ray container imports from
  there (``PYTHONPATH``, ``TAU_MODEL_PATH``), as do the Serve apps' runtime envs.
"""

from __future__ import annotations

import base64
import shlex
from typing import Any

import yaml

from taugrid.backends import base
from taugrid.record import jobenv
from taugrid.render import pods
from taugrid.spec import models as sm

__all__ = [
    "RECORDS_SECRET",
    "SCRATCH_VOLUME",
    "records_secret",
    "wrap",
    "wraps",
]

RECORDS_SECRET = "taugrid-records"
SCRATCH_VOLUME = "tau-scratch"
_WRAPPED = frozenset(
    {
        sm.WorkloadKind.JOB,
        sm.WorkloadKind.RAYJOB,
        sm.WorkloadKind.RAYSERVICE,
        sm.WorkloadKind.RAYCLUSTER,
    }
)
_PREPARE = "tau-prepare"


def wrap(obj: dict[str, Any], pod: base.PodAttempt) -> bool:
    """``pod``'s wrapper around the command of ``obj``'s pods (a Job) or its Ray job's
    entrypoint (a RayJob), or before every Ray node of a RayService or RayCluster (see the
    module docstring); False when ``obj`` is a kind not wrapped (left as rendered)."""
    if obj.get("kind") == "Job":
        for spec in pods.pod_specs(obj):
            for c in spec["containers"]:
                c["command"] = [*pod.command, "--", *c.get("command", [])]
                c.pop("workingDir", None)
            _equip(spec, pod)
        return True
    if obj.get("kind") == "RayJob":
        job = obj["spec"]
        job["entrypoint"] = f"{shlex.join(pod.command)} -- {job['entrypoint']}"
        runtime_env = yaml.safe_load(job.get("runtimeEnvYAML") or "{}") or {}
        for key in ("working_dir", "excludes"):  # the code comes from the record
            runtime_env.pop(key, None)
        job["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=True)
        cluster = job["rayClusterSpec"]
        for group in (cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])):
            _equip(group["template"]["spec"], pod)
            if pod.notice:  # the driver's notice before its Ray node stops
                hook = {"preStop": {"exec": {"command": list(pod.notice)}}}
                group["template"]["spec"]["containers"][0]["lifecycle"] = hook
        return True
    if obj.get("kind") == "RayService":
        _serve_from_scratch(obj["spec"], pod)
        return True
    if obj.get("kind") == "RayCluster":
        _prepared(obj["spec"], pod)
        return True
    return False


def _prepared(cluster: dict[str, Any], pod: base.PodAttempt) -> dict[str, str]:
    """Every Ray node of ``cluster`` (a RayCluster's or RayService's spec) prepared by
    ``pod``'s wrapper (an init container: code and model into scratch), its Ray
    container importing from there; returns that environment (``PYTHONPATH``,
    ``TAU_MODEL_PATH``)."""
    own = {"PYTHONPATH": f"{pod.root}/code"}
    if pod.model_path:
        own[jobenv.MODEL_PATH] = pod.model_path
    for group in (cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])):
        spec = group["template"]["spec"]
        _equip(spec, pod)
        ray = spec["containers"][0]
        kept = [e for e in ray["env"] if e["name"] not in own]
        ray["env"] = kept + [{"name": k, "value": v} for k, v in own.items()]
        prepare = {
            "name": _PREPARE,
            "image": ray["image"],
            "command": list(pod.prepare),
            "env": _env(pod),
            "volumeMounts": [{"name": SCRATCH_VOLUME, "mountPath": pod.root}],
            "terminationMessagePolicy": "FallbackToLogsOnError",  # its reason, if it fails
        }
        spec.setdefault("initContainers", []).append(prepare)
    return own


def _serve_from_scratch(service: dict[str, Any], pod: base.PodAttempt) -> None:
    """A RayService's Ray nodes prepared (``_prepared``) and its apps importing from
    scratch (see the module docstring)."""
    own = _prepared(service["rayClusterConfig"], pod)
    config = yaml.safe_load(service["serveConfigV2"])
    for app in config.get("applications", []):
        runtime_env = app.setdefault("runtime_env", {})
        for key in ("working_dir", "excludes"):  # the code comes from the record
            runtime_env.pop(key, None)
        runtime_env.setdefault("env_vars", {}).update(own)
    service["serveConfigV2"] = yaml.safe_dump(config, sort_keys=True, default_flow_style=False)


def _equip(spec: dict[str, Any], pod: base.PodAttempt) -> None:
    """The wrapper's environment and scratch volume on every container of ``spec``."""
    for c in spec["containers"]:
        c.setdefault("env", []).extend(_env(pod))
        mount = {"name": SCRATCH_VOLUME, "mountPath": pod.root}
        c.setdefault("volumeMounts", []).append(mount)
    spec.setdefault("volumes", []).append({"name": SCRATCH_VOLUME, "emptyDir": {}})
    spec["terminationGracePeriodSeconds"] = pod.grace_s


def _env(pod: base.PodAttempt) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in pod.env.items()]
    out += [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": RECORDS_SECRET, "key": k}}}
        for k in pod.secret_env
    ]
    return out


def wraps(kind: sm.WorkloadKind) -> bool:
    """Whether the pods of a run of workload ``kind`` are wrapped (``wrap``)."""
    return kind in _WRAPPED


def records_secret(namespace: str, values: dict[str, str]) -> dict[str, Any]:
    """The namespace's Secret of record store credentials, keyed by variable name."""
    return opaque_secret(namespace, RECORDS_SECRET, values)


def opaque_secret(
    namespace: str, name: str, values: dict[str, str], owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A Secret of ``values`` (keyed by variable name); with ``owner`` (an applied
    object), Kubernetes deletes it with that object."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }

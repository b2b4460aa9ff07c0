"""What a run's pods get from their cluster and their agent besides the run's shape.

``render.kuberay`` renders a run as the cluster should run it anywhere; this module
adds, at submission, what only the agent knows:

- the cluster's ``pods`` settings from platform.yaml (``platform.models.PodSettings``):
  host networking, tolerations and a node selector, on every pod template of the run;
- ``PodAttempt`` (``agent.podsync`` as the main process of a batch Job's pods): the
  run's command wrapped by it, its environment, the record store's credentials from
  the namespace's Secret ``RECORDS_SECRET`` (applied by the agent from its own
  environment), and an emptyDir at ``PodAttempt.root`` for the code and outputs. The
  working directory the renderer names (the data volume's code dir) is dropped: the code
  comes from the record.

Ray objects (RayJob, RayCluster, RayService) are not wrapped yet: their code still comes
from the workspace's data volume (docs/kubernetes.md says what runs where).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from taugrid.backends import base
from taugrid.platform import models as pm
from taugrid.render import naming
from taugrid.spec import models as sm

__all__ = [
    "RECORDS_SECRET",
    "SCRATCH_VOLUME",
    "pod_specs",
    "pod_templates",
    "records_secret",
    "selects",
    "settle",
    "tolerated",
    "wrap",
    "wraps",
]

RECORDS_SECRET = "taugrid-records"
SCRATCH_VOLUME = "tau-scratch"
_WRAPPED = {sm.WorkloadKind.JOB: "Job"}


def pod_templates(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every pod template of ``obj`` (those carrying the run-id label)."""

    def walk(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            labels = node.get("metadata", {}).get("labels") if "spec" in node else None
            if isinstance(labels, dict) and naming.LABEL_RUN_ID in labels:
                yield node
                return
            for child in node.values():
                yield from walk(child)
        elif isinstance(node, list):
            for child in node:
                yield from walk(child)

    yield from walk(obj.get("spec"))


def pod_specs(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod specs of ``obj``'s pod templates."""
    return (t["spec"] for t in pod_templates(obj))


def settle(obj: dict[str, Any], pods: pm.PodSettings) -> None:
    """The cluster's pod settings on every pod template of ``obj`` (in place)."""
    for spec in pod_specs(obj):
        if pods.host_network:
            spec["hostNetwork"] = True
            spec["dnsPolicy"] = "ClusterFirstWithHostNet"
        if pods.tolerations:
            own = spec.setdefault("tolerations", [])
            own += [{k: v for k, v in t.model_dump().items() if v} for t in pods.tolerations]
        if pods.node_selector:
            spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **pods.node_selector}


def tolerated(pods: pm.PodSettings, taint: dict[str, Any]) -> bool:
    """Whether the cluster's pods tolerate ``taint`` (a Node's ``spec.taints`` entry)."""
    return any(
        t.key == taint.get("key")
        and (t.operator == "Exists" or t.value == taint.get("value", ""))
        and t.effect in ("", taint.get("effect"))
        for t in pods.tolerations
    )


def selects(pods: pm.PodSettings, node: dict[str, Any]) -> bool:
    """Whether the cluster's pods may run on ``node`` by their node selector."""
    labels = node.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in pods.node_selector.items())


def wrap(obj: dict[str, Any], pod: base.PodAttempt) -> bool:
    """``pod``'s wrapper around the command of ``obj``'s pods; False when ``obj`` is a
    kind whose pods are not wrapped (left as rendered)."""
    if obj.get("kind") not in _WRAPPED.values():
        return False
    for spec in pod_specs(obj):
        for c in spec["containers"]:
            c["command"] = [*pod.command, "--", *c.get("command", [])]
            c.pop("workingDir", None)
            c.setdefault("env", []).extend(_env(pod))
            mount = {"name": SCRATCH_VOLUME, "mountPath": pod.root}
            c.setdefault("volumeMounts", []).append(mount)
        spec.setdefault("volumes", []).append({"name": SCRATCH_VOLUME, "emptyDir": {}})
    return True


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
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": RECORDS_SECRET, "namespace": namespace},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }

"""A cluster's ``pods:`` settings (platform.yaml, ``platform.models.PodSettings``) on the
pods TauGrid renders for it: host networking, tolerations and a node selector on every
pod template of a run (the agent applies them at submission) and of TauGrid's own
Deployments (``tau cluster install --platform``); on host networking, the addresses and
ports of a run's Ray nodes (``ray_on_host_network``); the capacity the hub placed a run on
(spot or on-demand node pools, as a node affinity on the ``taugrid.io/pool`` label); and
the two questions they answer about a Node: is its taint tolerated, does the selector
pick it."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import yaml

from taugrid.platform import models as pm
from taugrid.render import naming
from taugrid.spec import models as sm

__all__ = [
    "gpus",
    "keep_to_capacity",
    "pod_specs",
    "pod_templates",
    "ray_on_host_network",
    "selects",
    "settle",
    "settle_spec",
    "tolerated",
]

_SPOT, _ON_DEMAND = sm.Capacity.SPOT.value, sm.Capacity.ON_DEMAND.value

POD_IP_ENV = "TAU_POD_IP"
"""A Ray container's own address (``status.podIP``: the node's, on host networking)."""
HOST_PORTS = (20000, 1000, 8)
"""On host networking, a Ray cluster's ports: a block of 8 from 20000, one of 1000
blocks, chosen by its object's name (``ray_on_host_network``)."""
_HEAD_PORTS = ("gcs-server", "dashboard", "client", "serve", "metrics")
"""The block's first ports, the head's; then each worker group's metrics port."""
_METRICS = "metrics"
HEAD_READY_PATH = "/api/gcs_healthz"
"""The Ray dashboard's health check of the GCS (what KubeRay's own head probe asks)."""
_DYNAMIC = ("dashboard-agent-listen-port", "min-worker-port", "max-worker-port")


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
        settle_spec(spec, pods)
    if pods.host_network:
        ray_on_host_network(obj)


def ray_on_host_network(obj: dict[str, Any]) -> None:
    """The Ray nodes of ``obj`` (a RayJob, RayCluster or RayService) as host-network pods
    (in place). They share their node's addresses and ports with every other pod there
    (the head and a worker of one run, two runs' clusters), so:

    - each node says its address (``--node-ip-address``, and the head's dashboard host)
      is its pod's (``POD_IP_ENV`` from ``status.podIP``, the node's), never the one Ray
      guesses by routing;
    - the ports only Ray needs to know (dashboard agent, workers) are picked by Ray when
      it starts (0);
    - the named ports come from a block of ``HOST_PORTS`` chosen by the object's name:
      the head's GCS, dashboard, client, Serve and metrics ports, then each worker
      group's metrics port (KubeRay declares one on every Ray container, 8080 unless
      named). Container ports of host-network pods are host ports: kube-scheduler never
      binds two pods that would share one to a node (two heads of runs whose blocks
      meet, a retry's head before the last attempt's is gone, two workers of one group).

    KubeRay's injected probes name fixed ports on ``localhost`` (52365, 8265): an
    operator for host-network Ray pods runs with ``ENABLE_PROBES_INJECTION=false``
    (docs/kubernetes.md), and the head gets its own readiness probe instead: Ray's GCS
    health through the head's dashboard port (``HEAD_READY_PATH``). Without it the head
    is Ready as soon as its container starts, KubeRay starts a RayJob's submitter then,
    and on a loaded node the submitter finds no dashboard yet and fails."""
    cluster = _ray_cluster(obj)
    if cluster is None:
        return
    base, blocks, size = HOST_PORTS
    first = base + zlib.crc32(obj["metadata"]["name"].encode()) % blocks * size
    ports = {name: first + i for i, name in enumerate(_HEAD_PORTS)}
    head, workers = cluster["headGroupSpec"], cluster.get("workerGroupSpecs", [])
    metrics = [ports[_METRICS]] + [first + len(_HEAD_PORTS) + i for i in range(len(workers))]
    for group, metrics_port in zip((head, *workers), metrics, strict=False):
        params = group.setdefault("rayStartParams", {})
        params["node-ip-address"] = f"${POD_IP_ENV}"
        params["metrics-export-port"] = str(metrics_port)
        params.update({k: "0" for k in _DYNAMIC})
        ray = group["template"]["spec"]["containers"][0]
        ip = {"fieldRef": {"fieldPath": "status.podIP"}}
        ray.setdefault("env", []).append({"name": POD_IP_ENV, "valueFrom": ip})
        own = [p for p in ray.get("ports", []) if p["name"] != _METRICS]
        ray["ports"] = [*own, {"name": _METRICS, "containerPort": metrics_port}]
    head["rayStartParams"] |= {
        "port": str(ports["gcs-server"]),
        "dashboard-port": str(ports["dashboard"]),
        "ray-client-server-port": str(ports["client"]),
        "dashboard-host": f"${POD_IP_ENV}",
    }
    head_ray = head["template"]["spec"]["containers"][0]
    for port in head_ray["ports"]:
        port["containerPort"] = ports.get(port["name"], port["containerPort"])
    check = {"path": HEAD_READY_PATH, "port": ports["dashboard"]}
    head_ray["readinessProbe"] = {"httpGet": check, "periodSeconds": 2, "timeoutSeconds": 2}
    if obj.get("kind") == "RayService":
        _serve_on_host_network(obj["spec"], ports["serve"])


def _serve_on_host_network(service: dict[str, Any], port: int) -> None:
    """A RayService's Serve proxy on host networking: one, on the head (``HeadOnly``:
    a proxy on every node would take one port on each), on the block's ``serve`` port
    (the head container declares it: a host port), on every address of the node: the
    config is one for all nodes and cannot name the head's, which is where the hub
    reaches it (``backends.kube.kube_serve``)."""
    config = yaml.safe_load(service["serveConfigV2"])
    config["proxy_location"] = "HeadOnly"
    config["http_options"] = {"host": "0.0.0.0", "port": port}
    service["serveConfigV2"] = yaml.safe_dump(config, sort_keys=True, default_flow_style=False)


def _ray_cluster(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = obj.get("spec") or {}
    cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec
    return cluster if "headGroupSpec" in cluster else None


def settle_spec(spec: dict[str, Any], pods: pm.PodSettings) -> None:
    """The cluster's pod settings on one pod spec (in place)."""
    if pods.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if pods.tolerations:
        own = spec.setdefault("tolerations", [])
        own += [{k: v for k, v in t.model_dump().items() if v} for t in pods.tolerations]
    if pods.node_selector:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **pods.node_selector}


def keep_to_capacity(obj: dict[str, Any], spot_pools: list[str], capacity: str | None) -> None:
    """Keeps ``obj``'s pods to the node pools of the capacity the hub placed it on (in
    place), on a cluster with spot pools (a node without the pool label is on-demand):

    - spot: its GPU pods require a node of a spot pool (a CPU-only Ray head may go
      anywhere, on-demand being the safer place for it);
    - on-demand: every pod requires a node of no spot pool, so a reclaim never takes it.

    Nothing for a cluster without spot pools, or a placement of no single capacity."""
    if not spot_pools or capacity not in (_SPOT, _ON_DEMAND):
        return
    operator = "In" if capacity == _SPOT else "NotIn"
    term = {"key": naming.POOL_LABEL, "operator": operator, "values": list(spot_pools)}
    for spec in pod_specs(obj):
        if capacity == _SPOT and not gpus(spec):
            continue
        required = (
            spec.setdefault("affinity", {})
            .setdefault("nodeAffinity", {})
            .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        )
        terms = required.setdefault("nodeSelectorTerms", [{}])
        for t in terms:  # terms are ORed: the pool requirement goes into each
            t.setdefault("matchExpressions", []).append(dict(term))


def gpus(spec: dict[str, Any]) -> float:
    """The GPUs a pod spec's containers ask for (their ``nvidia.com/gpu`` limits)."""
    limits = [(c.get("resources") or {}).get("limits") or {} for c in spec.get("containers", [])]
    return sum(float(lim.get(naming.GPU_RESOURCE, 0)) for lim in limits)


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

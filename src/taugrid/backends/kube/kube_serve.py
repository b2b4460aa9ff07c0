"""A serving run on Kubernetes: its RayService's Ray cluster and Serve status.

KubeRay runs a RayService through a RayCluster it creates (named in the service's
``status.activeServiceStatus.rayClusterName``, or ``pendingServiceStatus`` while the
first cluster or an upgrade comes up), and Kueue queues that RayCluster, not the
service: the queue label is copied onto it, and its Workload is the RayCluster's. So
``workload_owner`` is the RayCluster whose Workload admits the service.

``serve_doc`` turns the RayService's status into the document a Ray region's serve
driver writes (``serve/status.json``: ``status``, ``message``, ``deployments``,
``endpoint``), so the hub derives a deployment's phases the same way for both:

    applicationStatuses[app].status     → ``status`` (Ray Serve's own values: RUNNING,
                                          DEPLOYING, DEPLOY_FAILED, UNHEALTHY, ...)
    no application status yet           → ``NOT_STARTED``, with the Ready condition's
                                          reason (KubeRay is starting the cluster)
    serveDeploymentStatuses             → ``deployments`` (status and message each)
    ``<service>-serve-svc`` (port 8000)   → ``endpoint`` (the cluster-internal Service
                                          KubeRay makes once the app serves), with
                                          the app's route prefix; on host networking
                                          the head pod's address and the Serve port
                                          its config names (``render.pods``): what the
                                          hub forwards to from outside the cluster
    Running worker pods while RUNNING   → ``ready_replicas`` (one replica per worker)

The active cluster's status wins over the pending one's: during an upgrade the old
cluster keeps serving.
"""

from __future__ import annotations

from typing import Any

import yaml

from taugrid.backends.kube import kube_api

__all__ = ["SERVE_PORT", "serve_doc", "workload_owner"]

SERVE_PORT = 8000
_RAY_NODE_TYPE = "ray.io/node-type"


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("status") or {}


def _cluster_name(obj: dict[str, Any]) -> str | None:
    status = _status(obj)
    for key in ("activeServiceStatus", "pendingServiceStatus"):
        name = (status.get(key) or {}).get("rayClusterName")
        if name:
            return str(name)
    return None


def workload_owner(
    api: kube_api.KubeApi, kind: str, obj: dict[str, Any], selector: str
) -> dict[str, Any]:
    """The object whose Kueue Workload admits ``obj``: itself, or for a RayService the
    RayCluster KubeRay made for it (by the status's name, else by the attempt's label,
    which KubeRay copies from the service); the service itself until one exists."""
    if kind != "RayService":
        return obj
    ns = obj["metadata"]["namespace"]
    name = _cluster_name(obj)
    cluster = api.get("RayCluster", name, ns) if name else None
    if cluster is None:
        found = api.list("RayCluster", ns, selector)
        cluster = found[0] if found else None
    return cluster if cluster is not None else obj


def _config(obj: dict[str, Any]) -> dict[str, Any]:
    try:
        config = yaml.safe_load((obj.get("spec") or {}).get("serveConfigV2") or "") or {}
    except yaml.YAMLError:
        return {}
    return config if isinstance(config, dict) else {}


def _app(config: dict[str, Any]) -> dict[str, Any]:
    apps = config.get("applications") or []
    return apps[0] if apps and isinstance(apps[0], dict) else {}


def _endpoint(obj: dict[str, Any], pods: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """Where the app answers (see the module docstring): on host networking the head
    pod's address once it has one, else KubeRay's Service."""
    meta = obj["metadata"]
    prefix = str(_app(config).get("route_prefix") or "/").rstrip("/")
    on_host = [p for p in pods if (p.get("spec") or {}).get("hostNetwork")]
    heads = [p for p in on_host if _node_type(p) == "head"]
    ip = (heads[0].get("status") or {}).get("podIP") if heads else None
    port = (config.get("http_options") or {}).get("port")
    if ip and port:
        return f"http://{ip}:{port}{prefix}"
    return f"http://{meta['name']}-serve-svc.{meta['namespace']}.svc:{SERVE_PORT}{prefix}"


def _node_type(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(_RAY_NODE_TYPE)


def _app_status(obj: dict[str, Any], app: str | None) -> dict[str, Any] | None:
    status = _status(obj)
    for key in ("activeServiceStatus", "pendingServiceStatus"):
        apps = (status.get(key) or {}).get("applicationStatuses") or {}
        if app in apps:
            return dict(apps[app])
        if app is None and apps:
            return dict(next(iter(apps.values())))
    return None


def _ready_reason(obj: dict[str, Any]) -> str:
    for c in _status(obj).get("conditions") or []:
        if c.get("type") == "Ready":
            text = c.get("message") or c.get("reason") or ""
            return f"KubeRay: {text}" if text else ""
    return "waiting for KubeRay to start the RayService's Ray cluster"


def serve_doc(obj: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The RayService's Serve status as ``serve/status.json`` (see the module docstring)."""
    meta = obj["metadata"]
    config = _config(obj)
    name = _app(config).get("name")
    app = str(name) if name else None
    source = f"RayService {meta['namespace']}/{meta['name']}"
    endpoint = _endpoint(obj, pods, config)
    doc: dict[str, Any] = {"app": app, "endpoint": endpoint, "source": source}
    found = _app_status(obj, app)
    if found is None:
        return {**doc, "status": "NOT_STARTED", "message": _ready_reason(obj), "deployments": {}}
    deployments = {
        str(name): {"status": str(d.get("status", "")), "message": str(d.get("message", ""))}
        for name, d in (found.get("serveDeploymentStatuses") or {}).items()
    }
    status = str(found.get("status") or "NOT_STARTED")
    workers = [
        p
        for p in pods
        if _node_type(p) == "worker" and (p.get("status") or {}).get("phase") == "Running"
    ]
    return {
        **doc,
        "status": status,
        "message": str(found.get("message") or ""),
        "deployments": deployments,
        "ready_replicas": len(workers) if status == "RUNNING" else 0,
    }

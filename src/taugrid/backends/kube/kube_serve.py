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
                                          KubeRay makes once the app serves)
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


def _app_name(obj: dict[str, Any]) -> str | None:
    try:
        config = yaml.safe_load((obj.get("spec") or {}).get("serveConfigV2") or "") or {}
    except yaml.YAMLError:
        return None
    apps = config.get("applications") or [] if isinstance(config, dict) else []
    return str(apps[0].get("name")) if apps and isinstance(apps[0], dict) else None


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
    app = _app_name(obj)
    endpoint = f"http://{meta['name']}-serve-svc.{meta['namespace']}.svc:{SERVE_PORT}"
    source = f"RayService {meta['namespace']}/{meta['name']}"
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
        if (p["metadata"].get("labels") or {}).get(_RAY_NODE_TYPE) == "worker"
        and (p.get("status") or {}).get("phase") == "Running"
    ]
    return {
        **doc,
        "status": status,
        "message": str(found.get("message") or ""),
        "deployments": deployments,
        "ready_replicas": len(workers) if status == "RUNNING" else 0,
    }

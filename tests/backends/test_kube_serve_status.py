"""``backends.kube.kube_serve``: a RayService's status as KubeRay v1.5 writes it becomes the
serve document the hub reads (the same shape a Ray region's serve driver writes), and
the hub's phases follow from it.

The status documents are shaped as KubeRay's RayService controller writes them
(``activeServiceStatus``/``pendingServiceStatus`` with ``applicationStatuses`` keyed by
app name, the ``Ready`` condition); the live RayService path on the test control plane
is in ``tests/k8s/test_kube_serve.py``, where kwok runs no Ray, so Serve never answers.
"""

from __future__ import annotations

from typing import Any

from taugrid.backends.kube import kube_serve
from taugrid.hub.serving import serving

CONFIG = "applications:\n- name: digits\n  import_path: serve_app:app\n  route_prefix: /digits\n"


def _service(status: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "r-1", "namespace": "ml"}
    return {"metadata": meta, "spec": {"serveConfigV2": CONFIG}, "status": status}


def _app(status: str, deployment: str = "HEALTHY", message: str = "") -> dict[str, Any]:
    deps = {"Digits": {"status": deployment, "message": message}}
    return {"applicationStatuses": {"digits": {"status": status, "serveDeploymentStatuses": deps}}}


def _worker(phase: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"ray.io/node-type": "worker"}}, "status": {"phase": phase}}


def _phase(doc: dict[str, Any], run_state: str = "running") -> tuple[str, str]:
    dep = {"state": "active"}
    run = {"id": "r-1", "state": run_state, "reason": "queued"}
    return serving._phase(dep, run, doc, None)


def test_a_service_kuberay_is_still_starting_is_deploying_with_kuberays_reason() -> None:
    cond = {"type": "Ready", "status": "False", "reason": "Initializing", "message": ""}
    doc = kube_serve.serve_doc(_service({"conditions": [cond]}), [])
    assert doc["status"] == "NOT_STARTED" and doc["message"] == "KubeRay: Initializing"
    assert doc["endpoint"] == "http://r-1-serve-svc.ml.svc:8000/digits" and doc["app"] == "digits"
    assert _phase(doc) == ("Deploying", "KubeRay: Initializing")
    assert serving._running(doc) == 0


def test_a_running_app_is_ready_with_its_running_workers_as_replicas() -> None:
    svc = _service({"activeServiceStatus": {"rayClusterName": "r-1-abc", **_app("RUNNING")}})
    doc = kube_serve.serve_doc(svc, [_worker("Running"), _worker("Running"), _worker("Pending")])
    assert doc["status"] == "RUNNING" and doc["deployments"]["Digits"]["status"] == "HEALTHY"
    assert _phase(doc)[0] == "Ready" and serving._running(doc) == 2


def test_failed_and_unhealthy_apps_map_to_failed_and_degraded() -> None:
    failed = _app("DEPLOY_FAILED", "DEPLOY_FAILED", "ImportError: no module serve_app")
    failed["applicationStatuses"]["digits"]["message"] = "Deploying app 'digits' failed"
    doc = kube_serve.serve_doc(_service({"activeServiceStatus": failed}), [])
    assert _phase(doc) == ("Failed", "Deploying app 'digits' failed")
    assert "ImportError" in doc["deployments"]["Digits"]["message"]
    doc = kube_serve.serve_doc(_service({"activeServiceStatus": _app("UNHEALTHY")}), [])
    assert _phase(doc)[0] == "Degraded" and serving._running(doc) == 0


def test_the_active_cluster_speaks_for_the_service_during_an_upgrade() -> None:
    status = {
        "activeServiceStatus": {"rayClusterName": "old", **_app("RUNNING")},
        "pendingServiceStatus": {"rayClusterName": "new", **_app("DEPLOYING")},
    }
    doc = kube_serve.serve_doc(_service(status), [_worker("Running")])
    assert doc["status"] == "RUNNING" and serving._running(doc) == 1
    # the first cluster coming up is only pending
    doc = kube_serve.serve_doc(_service({"pendingServiceStatus": _app("DEPLOYING")}), [])
    assert doc["status"] == "DEPLOYING" and _phase(doc)[0] == "Deploying"


def test_on_host_networking_the_endpoint_is_the_head_pods_address_and_serve_port() -> None:
    svc = _service({"activeServiceStatus": {"rayClusterName": "r-1-abc", **_app("RUNNING")}})
    svc["spec"]["serveConfigV2"] = CONFIG + "http_options: {host: 0.0.0.0, port: 20403}\n"
    head = {
        "metadata": {"labels": {"ray.io/node-type": "head"}},
        "spec": {"hostNetwork": True},
        "status": {"phase": "Running", "podIP": "127.0.0.30"},
    }
    doc = kube_serve.serve_doc(svc, [head, _worker("Running")])
    assert doc["endpoint"] == "http://127.0.0.30:20403/digits"  # what the hub forwards to
    starting = {**head, "status": {"phase": "Pending"}}  # no address yet: the Service's
    assert kube_serve.serve_doc(svc, [starting])["endpoint"].startswith("http://r-1-serve-svc")

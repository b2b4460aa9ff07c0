"""``tau serve`` on a ``backend: kubernetes`` region: a deployment becomes a RayService,
queued by Kueue through the RayCluster KubeRay makes for it, and deleting the
deployment removes every object and releases the quota (issue 18 item 5).

As far as kwok allows: kwok's pods run no containers, so no Ray head answers KubeRay and
Serve never reports the app; the deployment stays Deploying with KubeRay's reason. The
mapping of a RayService's Serve status (RUNNING, DEPLOY_FAILED, UNHEALTHY, upgrades) to
phases is tested on KubeRay-shaped status documents in
``tests/backends/test_kube_serve_status.py``. Admission, binding, garbage collection and
release here are the real controllers'.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client

from taugrid.hub.runs import runs as hub_runs
from taugrid.render import naming
from tests.hub import harness, serve_regions
from tests.k8s import kube_region

pytestmark = pytest.mark.k8s

WS = kube_region.WORKSPACE
SERVE_YAML = """\
schema_version: 1
name: digits
run:
  entrypoint: serve_app.py
  workload_kind: rayservice
compute:
  gpus: 1
  gpu_model: H100
  cpus: 1
  memory: 1Gi
serve:
  import_path: serve_app:app
  replicas: 2
"""


def _trained_run(server: harness.HubServer, kube: client.ApiClient) -> str:
    """A finished source run with a model in its record, set up as KubeRay and the job
    would leave it (kwok runs no code): this module's subject is a two-replica
    RayService's objects, queueing and deletion on kwok's GPU nodes; a model trained in
    a pod and served from pods runs for real in ``test_serve_in_pods.py``."""
    run_id = kube_region.submit(server, kube_region.tau_yaml("train-digits", gpus=1))
    kube_region.wait_bound(server, run_id)
    kube_region.succeed_as_kuberay_would(kube, run_id)
    with server.http() as c:
        kube_region.wait("trained", c, run_id, lambda r: r["state"] == "succeeded")
    run = server.hub.runs.get_run(run_id)
    assert run is not None
    record = hub_runs.record_of(server.hub, run).dir
    assert record is not None
    (record / "artifacts").mkdir(parents=True, exist_ok=True)
    (record / "artifacts" / "model.npz").write_bytes(b"weights")
    return run_id


def _until(what: str, get: Callable[[], Any], timeout_s: float = 180) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = get()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: timed out")
        time.sleep(0.5)


def _custom(kube: client.ApiClient, plural: str, selector: str) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(kube)
    found = custom.list_namespaced_custom_object(
        "ray.io", "v1", WS, plural, label_selector=selector
    )
    return list(found["items"])


def test_a_deployment_is_a_rayservice_queued_by_kueue_and_deleting_it_releases_everything(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    source = _trained_run(server, kube)
    with server.http() as c:
        dep = serve_regions.deploy(
            c, "digits", source, [], tau_yaml=SERVE_YAML, artifact="model.npz"
        )
        run_id = dep["run_id"]
        selector = f"{naming.LABEL_RUN_ID}={naming.label_value(run_id)}"
        try:
            (service,) = _until("RayService", lambda: _custom(kube, "rayservices", selector))
            app = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]
            env = app["runtime_env"]["env_vars"]
            assert env["TAU_MODEL_PATH"] == f"/data/{WS}/runs/{source}/artifacts/model.npz"
            assert app["name"] == "digits" and app["import_path"] == "serve_app:app"
            # KubeRay makes the Ray cluster; Kueue admits it (the RayService's queue label
            # is copied onto it) and both replicas' workers are bound like a run's
            (cluster,) = _until("RayCluster", lambda: _custom(kube, "rayclusters", selector))
            owners = cluster["metadata"].get("ownerReferences") or []
            assert [o["kind"] for o in owners] == ["RayService"]
            kube_region.wait_bound(server, run_id)
            wl = _workload_of(kube, cluster)
            assert wl is not None and "admission" in wl["status"], wl
            # two worker pods bound (on one node or two: kube-scheduler's default scoring
            # weighs CPU and memory, not GPUs, so where the head went decides)
            pods = kube_region.bound(kube, run_id)
            assert len([p for p in pods if "gpu-workers" in p]) == 2, pods
            dep = _until("deploying with KubeRay's word", lambda: _status(c, "Deploying"))
            svc = f"{service['metadata']['name']}-serve-svc.{WS}.svc:8000"
            assert dep["endpoint"] == f"http://{svc}/digits"  # with the app's route prefix
            assert dep["serve_status"] == "NOT_STARTED" and dep["replicas"]["desired"] == 2
            assert dep["gpus"] == 2 and dep["cluster_id"] == kube_region.CLUSTER
        finally:
            r = c.delete("/v1/serve/digits")
        assert r.status_code == 200, r.text
        kube_region.wait(
            "serving run released",
            c,
            run_id,
            lambda r: (
                r["state"] == "cancelled" and kube_region.phase(r, "released")["status"] == "done"
            ),
        )
        assert c.get("/v1/serve/digits").json()["phase"] == "Deleted"
    # every object went: the service, the cluster KubeRay made, its Workload and pods
    assert _custom(kube, "rayservices", selector) == []
    _until("RayCluster collected", lambda: _custom(kube, "rayclusters", selector) == [])
    assert _workload_of(kube, cluster) is None
    assert kube_region.run_pods(kube, run_id) == []


def _status(c: httpx.Client, phase: str) -> dict[str, Any] | None:
    dep: dict[str, Any] = c.get("/v1/serve/digits").json()
    return dep if dep["phase"] == phase and dep["reason"].startswith("KubeRay") else None


def _workload_of(kube: client.ApiClient, owner: dict[str, Any]) -> dict[str, Any] | None:
    custom = client.CustomObjectsApi(kube)
    for wl in custom.list_namespaced_custom_object(*kube_region.KUEUE, WS, "workloads")["items"]:
        refs = wl["metadata"].get("ownerReferences") or []
        if any(o["uid"] == owner["metadata"]["uid"] for o in refs):
            return dict(wl)
    return None

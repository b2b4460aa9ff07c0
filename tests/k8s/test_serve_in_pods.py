"""Serving on Kubernetes answers from pods on the real node (issue 31 item 4).

The region of ``test_rayjob_in_pods.py`` (a real hub on SQLite, the region's agent
outside the cluster, records in S3 on the real SeaweedFS, host-network pods on the real
node, KubeRay's operator):

- the quickstart trains as a batch Job in a pod; its model lands in the record in S3;
- ``tau serve deploy`` of it (the quickstart's serve.yaml on the project image) makes a
  RayService; Kueue admits its Ray cluster, KubeRay starts a head and a GPU worker on the
  node; each pod's init container (``podsync --prepare``) fetches the serving run's code
  and the trained model from S3 into its scratch; the head runs Serve's one proxy on the
  run's serve port (host networking) and the replica runs on the worker;
- the deployment becomes Ready from KubeRay's status of the app, and a request to the
  hub's endpoint (``/v1/endpoints/<ws>/<name>``) is answered by the replica with the
  trained classifier's answer;
- ``tau serve delete`` cancels the serving run: its pods and Workload are gone.

GPUs are emulated: ``nvidia.com/gpu`` is an extended resource of the real node.
"""

from __future__ import annotations

import base64
import time

import httpx
import pytest
from kubernetes import client
from sklearn.datasets import load_digits

from taugrid.render import naming
from taugrid.sdk.client import submit
from tests.hub import region as rg
from tests.hub import serve_regions as sr
from tests.k8s import kube_region, pod_region, realnode

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(900), pytest.mark.usefixtures("kuberay")]

NAME = "digits"


def _serve_yaml(image: str) -> str:
    """The quickstart's serve.yaml on ``image``: a CPU-only head (half a CPU) and one GPU
    worker (one CPU), within the real node's two CPUs."""
    return f"""\
schema_version: 1
name: {NAME}
run:
  entrypoint: serve_app.py
  workload_kind: rayservice
runtime:
  image: {image}
compute:
  gpus: 1
  gpu_model: EMU
  cpus: 1
  memory: 2Gi
  head: {{cpus: 0.5, memory: 2Gi}}
serve:
  import_path: serve_app:app
  replicas: 1
"""


def _deploy(c: httpx.Client, image: str, run_id: str) -> httpx.Response:
    code = submit.zip_dir(rg.QUICKSTART, [])
    body = {
        "name": NAME,
        "source_run": run_id,
        "submit": {
            "tau_yaml": _serve_yaml(image),
            "filename": "serve.yaml",
            "code_zip_b64": base64.b64encode(code).decode(),
        },
    }
    return c.post("/v1/serve", json=body)


def _pods(kube: client.ApiClient, run_id: str) -> dict[str, tuple[str, str]]:
    """The serving run's pods: name → (Ray node type, node)."""
    label = f"{naming.LABEL_RUN_ID}={naming.label_value(run_id)}"
    pods = client.CoreV1Api(kube).list_namespaced_pod(kube_region.WORKSPACE, label_selector=label)
    return {
        p.metadata.name: ((p.metadata.labels or {}).get("ray.io/node-type", ""), p.spec.node_name)
        for p in pods.items
    }


def test_a_model_trained_in_a_pod_is_served_from_pods_through_the_hub(
    region: pod_region.PodRegion, kube: client.ApiClient
) -> None:
    server, ref = region.server, region.ref
    with server.http() as c:
        trained = rg.submit_run(c, pod_region.tau_yaml(ref, "--steps 30 --checkpoint-every 10"))
        done = rg.wait_run(c, trained["id"], rg.finished, timeout=300)
        assert done["state"] == "succeeded", (done["reason"], done["attempts"])
        r = _deploy(c, ref, trained["id"])
        assert r.status_code == 201, r.text
        assert r.json()["source"]["stored"], r.json()["source"]  # the model is in S3
        dep = sr.wait(c, NAME, lambda d: d["phase"] in ("Ready", "Failed"), timeout_s=480)
        assert dep["phase"] == "Ready", dep
        run_id = dep["run_id"]
        on_node = [("head", realnode.NAME), ("worker", realnode.NAME)]
        assert sorted(_pods(kube, run_id).values()) == on_node, _pods(kube, run_id)
        digit = load_digits()
        url = f"/v1/endpoints/{kube_region.WORKSPACE}/{NAME}"
        answer = c.post(url, json={"pixels": digit.data[0].tolist()}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["class"] == digit.target[0], answer.json()  # the trained model
        gone = c.delete(f"/v1/serve/{NAME}")
        assert gone.status_code == 200, gone.text
        rg.wait_run(c, run_id, lambda r: rg.phases(r).get("released") == "done", timeout=120)
    deadline = time.monotonic() + 120
    while _pods(kube, run_id):
        assert time.monotonic() < deadline, f"pods of {run_id} left: {_pods(kube, run_id)}"
        time.sleep(1)

"""A run executes in pods on the real node and comes back (issue 31 item 3, batch Jobs).

The hub (real server, SQLite) has one ``backend: kubernetes`` region on the session's
control plane, whose pods use the host network, tolerate the real node's taint and
select it (platform.yaml ``pods:``), and an S3 record store (the real SeaweedFS). Its
agent runs outside the cluster, as a platform team may run it. A ``workload_kind: job``
run of the quickstart, on the project image pulled from the tier's registry:

- Kueue admits the Job, kube-scheduler binds its pod to the real node, the kubelet runs
  it; in the pod ``agent.podsync`` fetches the code from the record in S3, runs the
  command and stores metrics, checkpoints and artifacts there; the first attempt crashes
  on purpose after its checkpoint at step 20, the retry resumes from it (a new pod);
  ``tau run logs`` shows the pod's log, the metrics the hub reports come from the
  record (the agent's mirror), the run ends succeeded with its artifacts saved;
- a cancel deletes the Job: its pod and Kueue's admission go, the run is cancelled;
- an image the registry does not have fails the run with the kubelet's reason
  (``ImagePullBackOff: …``), not a hung phase.

GPUs are emulated: ``nvidia.com/gpu`` is an extended resource of the real node.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from taugrid.render import naming
from taugrid.store import db
from tests import weed_s3 as ws
from tests.hub import harness
from tests.hub import region as rg
from tests.k8s import controlplane, kube_region, project_image, realnode, registry

pytestmark = pytest.mark.k8s

BUCKET = "pod-runs"
PRODUCT = "emulated-gpu"


def _platform(kubeconfig: Path, server: ws.WeedS3, url: str) -> str:
    return f"""\
schema_version: 1
gpu_types:
  - {{name: EMU, node_label_value: {PRODUCT}}}
regions:
  - name: k8s-east
    clusters:
      - name: {kube_region.CLUSTER}
        backend: kubernetes
        kubeconfig: {kubeconfig}
        pods:
          host_network: true
          tolerations: [{{key: {realnode.TAINT["key"]}, value: "true", effect: NoSchedule}}]
          node_selector: {{kubernetes.io/hostname: {realnode.NAME}}}
        node_pools:
          - {{name: real, gpu_model: EMU, gpus_per_node: 4, cpus_per_node: 2,
             memory_per_node: 8Gi, nodes: 1}}
teams:
  - name: {kube_region.TEAM}
    cpu_quota: 8
    memory_quota: 32Gi
    quotas: [{{gpu_model: EMU, nominal: 4}}]
workspaces:
  - name: {kube_region.WORKSPACE}
    team: {kube_region.TEAM}
    data: {{size: 10Gi}}
default_workspace: {kube_region.WORKSPACE}
records:
  url: {url}
  endpoint_url: {server.endpoint}
  region: us-east-1
  access_key_env: TAU_TEST_S3_KEY
  secret_key_env: TAU_TEST_S3_SECRET
"""


def _tau_yaml(image: str, args: str, retries: int = 0) -> str:
    retry = "\n  retry_on: [exit_nonzero]" if retries else ""
    return f"""\
schema_version: 1
name: pods-quickstart
run:
  entrypoint: train.py
  workload_kind: job
  args: {args.split()!r}
runtime:
  image: {image}
compute:
  gpus: 1
  gpu_model: EMU
  workers: 1
  cpus: 1
  memory: 2Gi
resilience:
  max_retries: {retries}{retry}
  backoff: {{initial: 1s}}
data:
  outputs:
    - {{name: model, path: model.npz}}
""".replace("'", '"')


@pytest.fixture(scope="module")
def region(
    control_plane: controlplane.ControlPlane,
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    images: registry.Registry,
    node: realnode.RealNode,
    weed_s3: ws.WeedS3,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[harness.HubServer, str, str]]:
    """The hub, its agent, the image's reference in the registry and the record prefix."""
    archive = project_image.archive()
    ref = images.push(archive, project_image.name(archive).split("/", 1)[1])
    labels = {"metadata": {"labels": {"nvidia.com/gpu.product": PRODUCT}}}
    client.CoreV1Api(kube).patch_node(realnode.NAME, labels)
    kube_region.data_volume(kube)
    Path(f"/tmp/taugrid-test-pv-{kube_region.WORKSPACE}").mkdir(exist_ok=True)
    weed_s3.make_bucket(BUCKET)
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    tmp = Path(tmp_path_factory.mktemp("pods-hub"))
    engine = db.create_engine(f"sqlite:///{tmp / 'hub.db'}")
    db.migrate(engine)
    text = _platform(kueue.kubeconfig, weed_s3, f"s3://{prefix}")
    with (
        pytest.MonkeyPatch.context() as mp,
        harness.platform_hub(engine, tmp, text) as server,
    ):
        mp.setenv("TAU_TEST_S3_KEY", ws.KEY)
        mp.setenv("TAU_TEST_S3_SECRET", ws.SECRET)
        agent = kube_region.KubeAgent(server, tmp / "platform.yaml", tmp / "agent")
        try:
            yield server, ref, prefix
        finally:
            agent.stop()
            kube_region.sweep(kube)
    engine.dispose()


def _wait(c: httpx.Client, run_id: str, pred: Any) -> dict[str, Any]:
    return rg.wait_run(c, run_id, pred, timeout=240)


def test_a_job_runs_in_a_pod_resumes_in_a_new_one_and_its_outputs_come_back(
    region: tuple[harness.HubServer, str, str], weed_s3: ws.WeedS3
) -> None:
    server, ref, prefix = region
    args = "--steps 40 --checkpoint-every 10 --fail-at-step 25 --fail-attempts 1"
    with server.http() as c:
        run = rg.submit_run(c, _tau_yaml(ref, args, retries=1))
        done = _wait(c, run["id"], rg.finished)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    assert done["state"] == "succeeded", (done["reason"], done["attempts"], log[-3000:])
    assert rg.phases(done)["artifacts_saved"] == "done"
    first, second = done["attempts"]
    assert first["failure_kind"] == "exit_nonzero", first
    assert (second["resumed_from"] or "").endswith("step-00000020"), second
    assert realnode.NAME in json.dumps(second)  # it ran on the real node
    steps2 = [m["step"] for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    assert min(steps2) == 21 and max(steps2) == 40, steps2  # from the record's checkpoint
    # the pods' logs: the first's crash on purpose, the second's resume and summary
    assert "attempt 1: failing at step 25" in log, log[-3000:]
    assert "attempt 2: resuming from step-00000020" in log, log[-3000:]
    fs = weed_s3.filesystem()
    base = f"{prefix}/{kube_region.WORKSPACE}/runs/{run['id']}"
    assert fs.exists(f"{base}/artifacts/model.npz") and fs.exists(f"{base}/COMPLETE")


def test_cancel_deletes_the_pod_and_kueue_releases(
    region: tuple[harness.HubServer, str, str], kube: client.ApiClient
) -> None:
    server, ref, _prefix = region
    args = "--steps 100000 --checkpoint-every 50 --step-sleep 0.2"
    with server.http() as c:
        run = rg.submit_run(c, _tau_yaml(ref, args))

        def stepping(r: dict[str, Any]) -> bool:
            got = c.get(f"/v1/runs/{run['id']}/metrics").json()
            return r["state"] == "running" and bool(got)

        _wait(c, run["id"], stepping)
        assert c.post(f"/v1/runs/{run['id']}/cancel").status_code == 200
        done = _wait(c, run["id"], rg.finished)
    assert done["state"] == "cancelled", done["reason"]
    label = f"{naming.LABEL_RUN_ID}={naming.label_value(run['id'])}"
    pods = client.CoreV1Api(kube).list_namespaced_pod(kube_region.WORKSPACE, label_selector=label)
    assert [p.metadata.name for p in pods.items] == []
    wls = client.CustomObjectsApi(kube).list_namespaced_custom_object(
        *kube_region.KUEUE, kube_region.WORKSPACE, "workloads"
    )["items"]
    assert not [w for w in wls if run["id"] in json.dumps(w["metadata"].get("labels", {}))]


def test_an_image_the_registry_lacks_fails_the_run_with_the_kubelets_reason(
    region: tuple[harness.HubServer, str, str], images: registry.Registry
) -> None:
    server, _ref, _prefix = region
    absent = f"{images.host}/taugrid/absent:0.0"
    with server.http() as c:
        run = rg.submit_run(c, _tau_yaml(absent, "--steps 5"))
        done = _wait(c, run["id"], rg.finished)
    assert done["state"] == "failed"
    assert "ImagePullBackOff" in done["reason"] and absent in done["reason"], done["reason"]

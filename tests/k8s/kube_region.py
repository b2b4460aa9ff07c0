"""A TauGrid hub with one ``backend: kubernetes`` region on the test control plane: the
platform file (its kubeconfig, GPU models labelled as the kwok nodes are), a real hub
server on SQLite, and the agent (``agent.Agent`` with ``KubernetesBackend``) in a
thread, as ``python -m taugrid.agent.daemon`` builds it for such a cluster."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from taugrid.agent import agent, hubclient
from taugrid.agent.nodes import nodecheck
from taugrid.backends.kube import kube_marks
from taugrid.backends.kube import kubernetes as kbackend
from taugrid.platform import load as platform_load
from taugrid.render import naming
from taugrid.store import db
from tests.hub import harness
from tests.hub import region as hub_region
from tests.k8s import controlplane, nodes

CLUSTER = "kube"
WORKSPACE = "ml"
TEAM = "research"
KUEUE = ("kueue.x-k8s.io", "v1beta2")


RAY_REGION = "ray-west"
"""The Ray region of a mixed platform (``platform_yaml(..., ray=True)``): one node of
two emulated L4 GPUs, a model no kwok node has."""


SPOT_NODE = nodes.GpuNode(
    "a100-spot-0", pool="a100-spot", product=nodes.DEFAULT_NODES[2].product, gpus=4
)
"""The spot pool's node of a platform with ``spot=True`` (its module creates it)."""


def platform_yaml(
    kubeconfig: Path, h100_quota: int = 16, ray: bool = False, spot: bool = False
) -> str:
    h100 = next(n for n in nodes.DEFAULT_NODES if n.pool == "h100")
    a100 = next(n for n in nodes.DEFAULT_NODES if n.pool == "a100")
    spot_pool = (
        f"          - {{name: {SPOT_NODE.pool}, gpu_model: A100-80G, gpus_per_node: 4,\n"
        "             cpus_per_node: 64, memory_per_node: 512Gi, nodes: 1, capacity: spot,\n"
        "             cost_per_gpu_hour: 0.9}\n"
        if spot
        else ""
    )
    ray_region = f"""\
  - name: {RAY_REGION}
    clusters:
      - name: {RAY_REGION}
        emulated_gpus: true
        node_pools:
          - {{name: l4, gpu_model: L4, gpus_per_node: 2, cpus_per_node: 4,
             memory_per_node: 16Gi, nodes: 1}}
"""
    return f"""\
schema_version: 1
gpu_types:
  - {{name: H100, node_label_value: {h100.product}}}
  - {{name: A100-80G, node_label_value: {a100.product}}}
  - {{name: L4}}
regions:
{ray_region if ray else ""}  - name: k8s-east
    clusters:
      - name: {CLUSTER}
        backend: kubernetes
        kubeconfig: {kubeconfig}
        node_pools:
          - {{name: h100, gpu_model: H100, gpus_per_node: 8, cpus_per_node: 64,
             memory_per_node: 512Gi, nodes: 2}}
          - {{name: a100, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 64,
             memory_per_node: 512Gi, nodes: 2}}
{spot_pool}priority_classes: [{{name: low, value: 100}}, {{name: high, value: 10000}}]
teams:
  - name: {TEAM}
    cpu_quota: 256
    memory_quota: 2Ti
    quotas:
      - {{gpu_model: H100, nominal: {h100_quota}}}
      - {{gpu_model: A100-80G, nominal: 8}}
      - {{gpu_model: L4, nominal: 2}}
workspaces:
  - name: {WORKSPACE}
    team: {TEAM}
    data: {{size: 10Gi}}
default_workspace: {WORKSPACE}
"""


def data_volume(kube: client.ApiClient) -> None:
    """The workspace's data PV, pre-bound to its claim (the storage a platform team
    provides; the test control plane has no provisioner)."""
    pv = {
        "metadata": {"name": f"pv-{WORKSPACE}"},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteMany"],
            "hostPath": {"path": f"/tmp/taugrid-test-pv-{WORKSPACE}"},
            "claimRef": {"namespace": WORKSPACE, "name": naming.data_claim(WORKSPACE)},
            "persistentVolumeReclaimPolicy": "Retain",
        },
    }
    try:
        client.CoreV1Api(kube).create_persistent_volume(pv)
    except client.ApiException as exc:  # another module's hub made it already
        if exc.status != 409:
            raise


class KubeAgent:
    """The region's agent in a thread; ``stop`` ends it and closes its clients."""

    def __init__(self, server: harness.HubServer, platform_file: Path, state_dir: Path) -> None:
        platform = platform_load.load_platform(platform_file)
        spec = next(c for r in platform.regions for c in r.clusters if c.name == CLUSTER)
        self.backend = kbackend.KubernetesBackend(platform, spec)
        self.hub = hubclient.HubClient(server.url, server.agent_token(CLUSTER), CLUSTER)
        cfg = agent.AgentConfig(
            CLUSTER,
            "k8s-east",
            state_dir,
            sync_s=0.3,
            report_s=1.0,
            prewarm=False,
            health=nodecheck.CheckerConfig(every_s=3.0),  # a notice acted on within seconds
        )
        marks = kube_marks.NodeMarks(self.backend.api)
        self.agent = agent.Agent(cfg, self.backend, self.hub, marks)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.agent.run, args=(self.stop_event,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)
        self.hub.close()
        self.backend.close()


@contextlib.contextmanager
def region(
    tmp: Path, kubeconfig: Path, ray: bool = False, spot: bool = False
) -> Iterator[tuple[harness.HubServer, KubeAgent]]:
    """A hub on SQLite with the kubernetes region (``ray``: and the Ray region, whose
    agent the caller starts; ``spot``: and the spot pool of ``SPOT_NODE``), and its agent;
    both stopped after."""
    engine = db.create_engine(f"sqlite:///{tmp / 'hub.db'}")
    db.migrate(engine)
    yaml_text = platform_yaml(kubeconfig, ray=ray, spot=spot)
    with harness.platform_hub(engine, tmp, yaml_text) as server:
        the_agent = KubeAgent(server, tmp / "platform.yaml", tmp / "agent")
        try:
            yield server, the_agent
        finally:
            the_agent.stop()
    engine.dispose()


RAY_PLURALS = ("rayjobs", "rayservices", "rayclusters")


def sweep(kube: client.ApiClient) -> None:
    """Delete the Ray objects and Jobs a failed test left in the workspace and wait for their pods
    and Kueue admissions to go, so the next module starts on free nodes and quota (one
    failure must not fail every later test on the session's control plane)."""
    custom = client.CustomObjectsApi(kube)
    batch = client.BatchV1Api(kube)
    for job in batch.list_namespaced_job(WORKSPACE, label_selector=naming.LABEL_RUN_ID).items:
        with contextlib.suppress(client.ApiException):
            batch.delete_namespaced_job(
                job.metadata.name, WORKSPACE, propagation_policy="Background"
            )
    for plural in RAY_PLURALS:
        for obj in custom.list_namespaced_custom_object("ray.io", "v1", WORKSPACE, plural)["items"]:
            with contextlib.suppress(client.ApiException):
                custom.delete_namespaced_custom_object(
                    "ray.io", "v1", WORKSPACE, plural, obj["metadata"]["name"]
                )

    def gone() -> bool:
        pods = client.CoreV1Api(kube).list_namespaced_pod(
            WORKSPACE, label_selector=naming.LABEL_RUN_ID
        )
        wls = custom.list_namespaced_custom_object(*KUEUE, WORKSPACE, "workloads")["items"]
        return not pods.items and not [w for w in wls if "admission" in w.get("status", {})]

    controlplane.wait_until("leftover runs swept from the workspace", gone)


def tau_yaml(
    name: str,
    gpus: int,
    model: str = "H100",
    priority: str | None = None,
    capacity: str = "on-demand",
) -> str:
    policy = f"policy: {{priority: {priority}}}\n" if priority else ""
    return f"""\
schema_version: 1
name: {name}
{policy}run:
  entrypoint: train.py
  workload_kind: rayjob
compute:
  gpus: {gpus}
  gpu_model: {model}
  workers: 1
  cpus: 1
  memory: 2Gi
resilience:
  max_retries: 0
  capacity: {capacity}
"""


def wait(
    what: str, c: httpx.Client, run_id: str, pred: Callable[[dict[str, Any]], object]
) -> dict[str, Any]:
    """The run once ``pred`` holds (bounded: 180 s on a loaded machine)."""
    deadline = time.monotonic() + 180
    run: dict[str, Any] = c.get(f"/v1/runs/{run_id}").json()
    while not pred(run):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: timed out; run is {run['state']}: {run['phases']}")
        time.sleep(0.5)
        run = c.get(f"/v1/runs/{run_id}").json()
    return run


def phase(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in run["phases"] if p["phase"] == name)


def run_pods(kube: client.ApiClient, run_id: str) -> list[client.V1Pod]:
    selector = f"{naming.LABEL_RUN_ID}={naming.label_value(run_id)}"
    return list(
        client.CoreV1Api(kube).list_namespaced_pod(WORKSPACE, label_selector=selector).items
    )


def bound(kube: client.ApiClient, run_id: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in run_pods(kube, run_id) if p.spec.node_name}


def workload(kube: client.ApiClient, run_id: str) -> dict[str, Any] | None:
    custom = client.CustomObjectsApi(kube)
    for wl in custom.list_namespaced_custom_object(*KUEUE, WORKSPACE, "workloads")["items"]:
        owners = wl["metadata"].get("ownerReferences") or []
        if any(o["name"] == naming.object_name(run_id) for o in owners):
            return dict(wl)
    return None


def cancel_and_wait_released(
    server: harness.HubServer,
    kube: client.ApiClient,
    run_id: str,
    ended: tuple[str, ...] = ("cancelled",),
) -> dict[str, Any]:
    """Cancel ``run_id`` and wait until it is released in a state of ``ended``
    (a test whose run may already have failed on its own passes ``failed`` too)."""
    with server.http() as c:
        r = c.post(f"/v1/runs/{run_id}/cancel", json={})
        assert r.status_code in (200, 202), r.text
        run = wait(
            "cancel released",
            c,
            run_id,
            lambda r: r["state"] in ended and phase(r, "released")["status"] == "done",
        )
    # both release lines, seen on the cluster: Kueue's quota and the pods
    left = workload(kube, run_id)
    assert left is None or "admission" not in left["status"]
    assert run_pods(kube, run_id) == []
    return run


def submit(server: harness.HubServer, tau_yaml: str) -> str:
    with server.http() as c:
        return str(hub_region.submit_run(c, tau_yaml, hub_region.QUICKSTART)["id"])


def wait_bound(server: harness.HubServer, run_id: str) -> dict[str, Any]:
    with server.http() as c:
        return wait(
            "bound by kube-scheduler and running",
            c,
            run_id,
            lambda r: phase(r, "scheduled")["status"] == "done" and r["state"] == "running",
        )


def workers(kube: client.ApiClient, run_id: str) -> set[str]:
    return {n for pod, n in bound(kube, run_id).items() if "gpu-workers" in pod}


def rayjob(kube: client.ApiClient, run_id: str) -> dict[str, Any] | None:
    try:
        return dict(
            client.CustomObjectsApi(kube).get_namespaced_custom_object(
                "ray.io", "v1", WORKSPACE, "rayjobs", naming.object_name(run_id)
            )
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def succeed_as_kuberay_would(kube: client.ApiClient, run_id: str) -> None:
    """The status KubeRay writes once the Ray job's driver exits 0 (no container runs on
    kwok, so no Ray head answers KubeRay; the test writes it on the status subresource)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "jobStatus": "SUCCEEDED",
        "jobDeploymentStatus": "Complete",
        "message": "Job finished successfully.",
        "endTime": now,
        "rayJobInfo": {"endTime": now},
    }
    client.CustomObjectsApi(kube).patch_namespaced_custom_object_status(
        "ray.io", "v1", WORKSPACE, "rayjobs", naming.object_name(run_id), {"status": status}
    )

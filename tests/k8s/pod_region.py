"""A hub whose ``backend: kubernetes`` region runs its pods on the real node, with an S3
record store (the real SeaweedFS): the setting of ``tests/k8s/test_run_in_pods.py`` and
``benchmarks/bench_k8s_first_log.py``.

``pod_region`` pushes the project image to the tier's registry, labels the real node
with the emulated GPU model, makes the workspace's data volume and a bucket prefix of its
own, starts a real hub (SQLite) and the region's agent in a thread (outside the cluster,
as a platform team may run it), with the store's credentials in the environment; after,
it stops the agent and sweeps what the runs left in the workspace. The region's pods use
the host network, tolerate the real node's taint and select it (platform.yaml ``pods:``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from kubernetes import client

from taugrid.store import db
from tests import weed_s3 as ws
from tests.hub import harness
from tests.hub import region as rg
from tests.k8s import kube_region, project_image, realnode, registry

__all__ = [
    "CRASH_AND_RESUME",
    "PodCluster",
    "PodRegion",
    "check_crash_and_resume",
    "platform_yaml",
    "pod_region",
    "tau_yaml",
]

BUCKET = "pod-runs"
PRODUCT = "emulated-gpu"


RAY_REGION = kube_region.RAY_REGION
_RAY_REGION = f"""\
  - name: {RAY_REGION}
    clusters:
      - name: {RAY_REGION}
        emulated_gpus: true
        node_pools:
          - {{name: emu, gpu_model: EMU, gpus_per_node: 2, cpus_per_node: 4,
             memory_per_node: 16Gi, nodes: 1}}
"""


def platform_yaml(kubeconfig: Path, server: ws.WeedS3, url: str, ray: bool = False) -> str:
    """The platform; ``ray``: with a Ray region (``RAY_REGION``) of the same GPU model."""
    return f"""\
schema_version: 1
gpu_types:
  - {{name: EMU, node_label_value: {PRODUCT}}}
regions:
{_RAY_REGION if ray else ""}  - name: k8s-east
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
priority_classes: [{{name: low, value: 100}}, {{name: high, value: 10000}}]
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
{server.records_yaml(url)}"""


def tau_yaml(
    image: str,
    args: str,
    retries: int = 0,
    gpus: int = 1,
    priority: str = "low",
    retry_on: str = "exit_nonzero",
    kind: str = "job",
) -> str:
    """The quickstart on ``image``; ``kind`` ``rayjob``: a RayJob whose head (half a CPU),
    GPU worker (one) and submitter (half) fit the real node's two CPUs (a RayCluster's
    head likewise)."""
    retry = f"\n  retry_on: [{retry_on}]" if retries else ""
    head = "\n  head: {cpus: 0.5, memory: 2Gi}" if kind in ("rayjob", "raycluster") else ""
    return f"""\
schema_version: 1
name: pods-quickstart
policy: {{priority: {priority}}}
run:
  entrypoint: train.py
  workload_kind: {kind}
  args: {args.split()!r}
runtime:
  image: {image}
compute:
  gpus: {gpus}
  gpu_model: EMU
  workers: 1
  cpus: 1
  memory: 2Gi{head}
resilience:
  max_retries: {retries}{retry}
  backoff: {{initial: 1s}}
data:
  outputs:
    - {{name: model, path: model.npz}}
""".replace("'", '"')


CRASH_AND_RESUME = "--steps 40 --checkpoint-every 10 --fail-at-step 25 --fail-attempts 1"
"""The quickstart's arguments for a first attempt that crashes after its step-20
checkpoint and a retry that resumes from it (``check_crash_and_resume``)."""


def check_crash_and_resume(
    done: dict[str, Any], metrics: list[dict[str, Any]], log: str, fs: Any, base: str
) -> None:
    """A run of ``CRASH_AND_RESUME`` ended as it should: succeeded with its artifacts
    saved, its first attempt failed with its exit code, the retry resumed from the step-20
    checkpoint and trained steps 21-40, its log has both attempts' words, and its record
    (``base`` in the store ``fs``) has the output and COMPLETE."""
    assert done["state"] == "succeeded", (done["reason"], done["attempts"], log[-3000:])
    assert rg.phases(done)["artifacts_saved"] == "done"
    first, second = done["attempts"]
    assert first["failure_kind"] == "exit_nonzero", first
    assert (second["resumed_from"] or "").endswith("step-00000020"), second
    steps2 = [m["step"] for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    assert min(steps2) == 21 and max(steps2) == 40, steps2  # from the record's checkpoint
    assert "attempt 1: failing at step 25" in log, log[-3000:]  # the crash on purpose
    assert "attempt 2: resuming from step-00000020" in log, log[-3000:]
    assert fs.exists(f"{base}/artifacts/model.npz") and fs.exists(f"{base}/COMPLETE")


@dataclass(frozen=True)
class PodRegion:
    """The running hub, the kubernetes region's agent, the image's reference in the
    registry and the record prefix."""

    server: harness.HubServer
    agent: kube_region.KubeAgent
    ref: str
    prefix: str


@dataclass(frozen=True)
class PodCluster:
    """What a region on the real node is made of: the control plane's client and
    kubeconfig, the tier's registry and the S3 record store (``conftest.pod_cluster``)."""

    kube: client.ApiClient
    kubeconfig: Path
    images: registry.Registry
    weed: ws.WeedS3


@contextlib.contextmanager
def pod_region(
    cluster: PodCluster, tmp: Path, ray: bool = False, **hub_cfg: float
) -> Iterator[PodRegion]:
    """The hub and agent of the region (see the module docstring); stopped after.
    ``ray``: the platform has a Ray region too, whose agent the caller starts;
    ``hub_cfg``: the hub's settings (``grace_s``, ``lease_s``)."""
    kube, kubeconfig, images, weed = cluster.kube, cluster.kubeconfig, cluster.images, cluster.weed
    archive = project_image.archive()
    ref = images.push(archive, project_image.name(archive).split("/", 1)[1])
    labels = {"metadata": {"labels": {"nvidia.com/gpu.product": PRODUCT}}}
    client.CoreV1Api(kube).patch_node(realnode.NAME, labels)
    kube_region.data_volume(kube)
    Path(f"/tmp/taugrid-test-pv-{kube_region.WORKSPACE}").mkdir(exist_ok=True)
    weed.make_bucket(BUCKET)
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    engine = db.create_engine(f"sqlite:///{tmp / 'hub.db'}")
    db.migrate(engine)
    creds = {ws.KEY_ENV: ws.KEY, ws.SECRET_ENV: ws.SECRET}
    text = platform_yaml(kubeconfig, weed, f"s3://{prefix}", ray)
    with (
        mock.patch.dict(os.environ, creds),
        harness.platform_hub(engine, tmp, text, **hub_cfg) as server,
    ):
        agent = kube_region.KubeAgent(server, tmp / "platform.yaml", tmp / "agent")
        try:
            yield PodRegion(server, agent, ref, prefix)
        finally:
            agent.stop()
            kube_region.sweep(kube)
    engine.dispose()

"""A mixed platform through one hub: a Ray region (a real local Ray cluster on
127.0.21.253 with emulated L4 GPUs, its agent on the Ray backend) and a Kubernetes
region (the test control plane with Kueue, KubeRay and kwok H100 nodes, its agent on
the kubernetes backend). Each run goes where its GPU model is."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from taugrid.backends.ray import ray_local
from tests.hub import region as hub_region
from tests.k8s import controlplane, kube_region, nodes

pytestmark = pytest.mark.k8s

RAY_IP = "127.0.21.253"  # outside the control plane's 127.0.21.2-250


def test_one_hub_places_runs_on_a_ray_region_and_a_kubernetes_region(
    tmp_path: Path,
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    kuberay: controlplane.ControlPlane,
    gpu_nodes: tuple[nodes.GpuNode, ...],
) -> None:
    kube_region.data_volume(kube)
    shape = ray_local.NodeShape(ip=RAY_IP, num_gpus=2, num_cpus=4, accelerator="L4")
    ray = hub_region.start_ray([RAY_IP], tmp_path / "ray", [shape])
    try:
        with kube_region.region(tmp_path, kueue.kubeconfig, ray=True) as (server, _):
            ray_agent = hub_region.AgentThread(
                server, ray, tmp_path / "ray-agent", cluster_id=kube_region.RAY_REGION
            ).start()
            try:
                with server.http() as c:
                    on_ray = hub_region.submit_run(
                        c, kube_region.tau_yaml("on-ray", gpus=1, model="L4")
                    )["id"]
                    on_kube = hub_region.submit_run(
                        c, kube_region.tau_yaml("on-kube", gpus=1, model="H100")
                    )["id"]
                    done = kube_region.wait(
                        "the L4 run done on Ray", c, on_ray, lambda r: r["state"] == "succeeded"
                    )
                    bound = kube_region.wait(
                        "the H100 run bound on Kubernetes",
                        c,
                        on_kube,
                        lambda r: r["state"] == "running",
                    )
                assert done["attempts"][-1]["cluster_id"] == kube_region.RAY_REGION
                assert bound["attempts"][-1]["cluster_id"] == kube_region.CLUSTER
                h100 = {n.name for n in nodes.DEFAULT_NODES if n.pool == "h100"}
                assert set(kube_region.bound(kube, on_kube).values()) & h100
                kube_region.cancel_and_wait_released(server, kube, on_kube)
            finally:
                ray_agent.stop()
    finally:
        ray.stop()
        kube_region.sweep(kube)  # what a failure left on the session's control plane

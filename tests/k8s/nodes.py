"""Fake GPU nodes for the test control plane: Node objects kwok manages (its annotation),
with ``nvidia.com/gpu`` capacity, the GPU-model labels the NVIDIA GPU feature discovery
puts on real nodes, a pool label, and optional taints."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from tests.k8s import controlplane

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
POOL_LABEL = "taugrid.io/pool"


@dataclass(frozen=True)
class GpuNode:
    name: str
    pool: str
    product: str
    gpus: int = 8
    taints: list[dict[str, str]] = field(default_factory=list)

    def manifest(self) -> dict[str, Any]:
        resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU_RESOURCE: str(self.gpus)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {controlplane.KWOK_NODE_ANNOTATION: "fake"},
                "labels": {
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    GPU_PRODUCT_LABEL: self.product,
                    "nvidia.com/gpu.count": str(self.gpus),
                    POOL_LABEL: self.pool,
                },
            },
            "spec": {"taints": self.taints},
            "status": {"capacity": resources, "allocatable": resources},
        }


UNHEALTHY_TAINT = {"key": "taugrid.io/gpu-unhealthy", "value": "true", "effect": "NoSchedule"}

# The default test platform: two pools of two GPU models, one node of the second tainted.
DEFAULT_NODES = (
    GpuNode("h100-0", pool="h100", product="NVIDIA-H100-80GB-HBM3"),
    GpuNode("h100-1", pool="h100", product="NVIDIA-H100-80GB-HBM3"),
    GpuNode("a100-0", pool="a100", product="NVIDIA-A100-SXM4-80GB", gpus=4),
    GpuNode(
        "a100-bad",
        pool="a100",
        product="NVIDIA-A100-SXM4-80GB",
        gpus=4,
        taints=[UNHEALTHY_TAINT],
    ),
)


def namespace(kube: client.ApiClient) -> str:
    """A new namespace whose default service account exists (pods need it)."""
    core = client.CoreV1Api(kube)
    name = f"t-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    # the controller-manager's service-account controller makes "default"; pods need it
    controlplane.wait_until(
        f"service account default in {name}",
        lambda: [
            sa
            for sa in core.list_namespaced_service_account(name).items
            if sa.metadata.name == "default"
        ],
    )
    return name


def gpu_pod(name: str, gpus: int, selector: dict[str, str]) -> dict[str, Any]:
    """A pod that asks for ``gpus`` GPUs on nodes matching ``selector``."""
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": selector,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/trainer:never-pulled",
                    "resources": {"limits": {GPU_RESOURCE: str(gpus)}},
                }
            ],
        },
    }

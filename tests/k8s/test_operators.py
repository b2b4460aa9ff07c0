"""Kueue's manager and KubeRay's ray-operator, built from source, working on the test
control plane with the real kube-scheduler and kwok GPU nodes."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.k8s import controlplane, nodes

pytestmark = pytest.mark.k8s

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _queue_objects(custom: client.CustomObjectsApi, ns: str, gpus: int) -> None:
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "h100-q"},
        "spec": {"nodeLabels": {nodes.POOL_LABEL: "h100"}},
    }
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [nodes.GPU_RESOURCE],
                    "flavors": [
                        {
                            "name": "h100-q",
                            "resources": [{"name": nodes.GPU_RESOURCE, "nominalQuota": gpus}],
                        }
                    ],
                }
            ],
        },
    }
    lq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "lq"},
        "spec": {"clusterQueue": "cq"},
    }
    custom.create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    custom.create_namespaced_custom_object(*KUEUE, ns, "localqueues", lq)


def _ray_queue_objects(custom: client.CustomObjectsApi, ns: str) -> None:
    """A ClusterQueue covering CPU and memory too (a RayJob's head and KubeRay's
    submitter pod ask for them) on a label-less flavor, GPUs on the h100 pool's."""
    api = f"{KUEUE[0]}/{KUEUE[1]}"
    for name, labels in (("rj-cpu", {}), ("rj-h100", {nodes.POOL_LABEL: "h100"})):
        flavor = {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": name}}
        flavor["spec"] = {"nodeLabels": labels} if labels else {}
        custom.create_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
    cpu = [{"name": "cpu", "nominalQuota": 64}, {"name": "memory", "nominalQuota": "256Gi"}]
    gpu = [{"name": nodes.GPU_RESOURCE, "nominalQuota": 8}]
    groups = [
        {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "rj-cpu", "resources": cpu}]},
        {
            "coveredResources": [nodes.GPU_RESOURCE],
            "flavors": [{"name": "rj-h100", "resources": gpu}],
        },
    ]
    cq = {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": "rj-cq"}}
    cq["spec"] = {"namespaceSelector": {}, "resourceGroups": groups}
    custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    lq = {"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": "lq"}}
    lq["spec"] = {"clusterQueue": "rj-cq"}
    custom.create_namespaced_custom_object(*KUEUE, ns, "localqueues", lq)


def _active(obj: dict[str, Any]) -> bool:
    conds = obj.get("status", {}).get("conditions", [])
    return any(c["type"] == "Active" and c["status"] == "True" for c in conds)


def test_kueue_admits_a_suspended_gpu_job_and_the_scheduler_binds_it_to_the_flavor(
    kube: client.ApiClient, kueue: controlplane.ControlPlane, gpu_nodes: tuple[nodes.GpuNode, ...]
) -> None:
    custom = client.CustomObjectsApi(kube)
    core = client.CoreV1Api(kube)
    ns = nodes.namespace(kube)
    _queue_objects(custom, ns, gpus=8)
    controlplane.wait_until(
        "ClusterQueue Active",
        lambda: _active(custom.get_cluster_custom_object(*KUEUE, "clusterqueues", "cq")),
    )
    # created unsuspended: Kueue's mutating webhook (called by URL) suspends it
    job: dict[str, Any] = {
        "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"template": nodes.gpu_pod("train", 2, {})},
    }
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    client.BatchV1Api(kube).create_namespaced_job(ns, job)

    def bound() -> list[str]:
        pods = core.list_namespaced_pod(ns, label_selector="job-name=train").items
        return [p.spec.node_name for p in pods if p.spec.node_name]

    # admission unsuspends the job, the job controller makes the pod, Kueue's flavor
    # node labels steer it, kube-scheduler binds it
    placed = controlplane.wait_until("Kueue-admitted job's pod bound", bound)
    assert set(placed) <= {n.name for n in gpu_nodes if n.pool == "h100"}
    workloads = custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    assert len(workloads) == 1
    admission = workloads[0]["status"]["admission"]
    assert admission["clusterQueue"] == "cq"


def test_kuberay_operator_makes_a_head_pod_the_scheduler_binds(
    kube: client.ApiClient, kuberay: controlplane.ControlPlane, gpu_nodes: tuple[nodes.GpuNode, ...]
) -> None:
    custom = client.CustomObjectsApi(kube)
    core = client.CoreV1Api(kube)
    ns = nodes.namespace(kube)
    head = {"containers": [{"name": "ray-head", "image": "registry.invalid/ray:never-pulled"}]}
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": head}}},
    }
    custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", cluster)

    def head_bound() -> str:
        pods = core.list_namespaced_pod(ns, label_selector="ray.io/cluster=rc").items
        return next((p.spec.node_name for p in pods if p.spec.node_name), "")

    node = controlplane.wait_until("ray-operator's head pod bound", head_bound)
    assert node in {n.name for n in gpu_nodes}


def test_kueue_admits_a_suspended_rayjob_and_kuberay_pods_are_bound_to_gpu_nodes(
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    kuberay: controlplane.ControlPlane,
    gpu_nodes: tuple[nodes.GpuNode, ...],
) -> None:
    custom = client.CustomObjectsApi(kube)
    core = client.CoreV1Api(kube)
    ns = nodes.namespace(kube)
    _ray_queue_objects(custom, ns)
    worker = nodes.gpu_pod("w", 2, {})["spec"]
    head = {"containers": [{"name": "ray-head", "image": "registry.invalid/ray:never-pulled"}]}
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "entrypoint": "python train.py",
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": head}},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 1,
                        "rayStartParams": {},
                        "template": {"spec": worker},
                    }
                ],
            },
        },
    }
    custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayjobs", rayjob)

    def worker_bound() -> str:
        pods = core.list_namespaced_pod(ns, label_selector="ray.io/group=gpu").items
        return next((p.spec.node_name for p in pods if p.spec.node_name), "")

    # Kueue admits the Workload and unsuspends the RayJob; KubeRay makes the RayCluster's
    # pods; Kueue's flavor node labels steer the worker; kube-scheduler binds it
    node = controlplane.wait_until("RayJob's GPU worker bound", worker_bound)
    assert node in {n.name for n in gpu_nodes if n.pool == "h100"}
    got = custom.get_namespaced_custom_object("ray.io", "v1", ns, "rayjobs", "rj")
    assert not got["spec"].get("suspend")
    workloads = custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    assert [w["status"]["admission"]["clusterQueue"] for w in workloads] == ["rj-cq"]

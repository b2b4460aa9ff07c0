"""The test control plane itself: the real kube-apiserver (pinned version), kube-scheduler,
kube-controller-manager and kwok GPU nodes built from source by k8s/build.sh."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.k8s import controlplane, nodes

pytestmark = pytest.mark.k8s

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def _pinned_kubernetes_version() -> str:
    env = (controlplane.REPO / "k8s" / "versions.env").read_text().splitlines()
    values = dict(line.split("=", 1) for line in env if "=" in line and not line.startswith("#"))
    return values["KUBERNETES_VERSION"]


def test_apiserver_reports_the_pinned_kubernetes_version(kube: client.ApiClient) -> None:
    info = client.VersionApi(kube).get_code()
    assert info.git_version == _pinned_kubernetes_version()
    assert info.git_version.startswith("v1.36.")


def test_kwok_gpu_nodes_are_ready_with_gpu_capacity_and_no_not_ready_taint(
    kube: client.ApiClient, gpu_nodes: tuple[nodes.GpuNode, ...]
) -> None:
    core = client.CoreV1Api(kube)

    def settled() -> list[client.V1Node]:
        listed = core.list_node(label_selector="type=kwok").items
        tainted = [n for n in listed for t in (n.spec.taints or []) if t.key == NOT_READY_TAINT]
        return listed if len(listed) == len(gpu_nodes) and not tainted else []

    # kube-controller-manager's node lifecycle controller removes the not-ready taint
    listed = controlplane.wait_until("kwok nodes without the not-ready taint", settled)
    by_name = {n.metadata.name: n for n in listed}
    for want in gpu_nodes:
        node = by_name[want.name]
        assert node.status.allocatable[nodes.GPU_RESOURCE] == str(want.gpus)
        assert node.metadata.labels[nodes.GPU_PRODUCT_LABEL] == want.product
        keys = [t.key for t in node.spec.taints or []]
        assert keys == [t["key"] for t in want.taints]


def test_scheduler_binds_a_gpu_pod_to_a_node_of_the_requested_model(
    kube: client.ApiClient, gpu_nodes: tuple[nodes.GpuNode, ...]
) -> None:
    core = client.CoreV1Api(kube)
    ns = nodes.namespace(kube)
    h100 = {n.name for n in gpu_nodes if n.pool == "h100"}
    product = next(n.product for n in gpu_nodes if n.pool == "h100")
    core.create_namespaced_pod(ns, nodes.gpu_pod("train", 2, {nodes.GPU_PRODUCT_LABEL: product}))
    bound = controlplane.wait_until(
        "pod bound by kube-scheduler", lambda: core.read_namespaced_pod("train", ns).spec.node_name
    )
    assert bound in h100
    # kwok's pod stages play the kubelet: the bound pod is reported Running
    controlplane.wait_until(
        "pod Running on the kwok node",
        lambda: core.read_namespaced_pod("train", ns).status.phase == "Running",
    )
    # its GPUs back for later tests (kwok, as the kubelet, finishes the deletion)
    core.delete_namespaced_pod("train", ns)
    controlplane.wait_until("pod deleted", lambda: not core.list_namespaced_pod(ns).items)


def test_a_pod_only_a_tainted_gpu_node_could_take_stays_unschedulable(
    kube: client.ApiClient, gpu_nodes: tuple[nodes.GpuNode, ...]
) -> None:
    core = client.CoreV1Api(kube)
    ns = nodes.namespace(kube)
    bad = next(n for n in gpu_nodes if n.taints)
    core.create_namespaced_pod(ns, nodes.gpu_pod("stuck", 1, {"kubernetes.io/hostname": bad.name}))

    def unschedulable() -> str:
        pod = core.read_namespaced_pod("stuck", ns)
        for cond in pod.status.conditions or []:
            if cond.type == "PodScheduled" and cond.reason == "Unschedulable":
                return str(cond.message)
        return ""

    message = str(controlplane.wait_until("scheduler marks the pod Unschedulable", unschedulable))
    # the one node the selector allows is excluded by its taint, and only by that
    assert "1 node(s) had untolerated taint" in message
    assert core.read_namespaced_pod("stuck", ns).spec.node_name is None


def test_kueue_and_kuberay_crds_from_their_modules_are_served(
    kube: client.ApiClient, kueue_and_kuberay_crds: dict[str, list[str]]
) -> None:
    assert "clusterqueues.kueue.x-k8s.io" in kueue_and_kuberay_crds["kueue"]
    assert "rayjobs.ray.io" in kueue_and_kuberay_crds["kuberay"]
    custom = client.CustomObjectsApi(kube)
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {nodes.POOL_LABEL: "h100"}},
    }
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", flavor)
    got = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", "h100")
    assert got["spec"]["nodeLabels"] == {nodes.POOL_LABEL: "h100"}
    # the API server validates against KubeRay's schema: a RayCluster without headGroupSpec
    # is rejected with the schema's message
    ns = nodes.namespace(kube)
    bad = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"}, "spec": {}}
    with pytest.raises(client.ApiException) as err:
        custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", bad)
    assert err.value.status == 422 and "headGroupSpec" in str(err.value.body)

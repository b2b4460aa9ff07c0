"""Fixtures for tests on the real test control plane (``make test-k8s``).

Skipped unless ``TAU_TEST_K8S=1`` is set and ``k8s/build.sh`` has built the binaries;
``make test-k8s`` does both. One control plane (with kwok GPU nodes) serves the session.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests import weed_s3 as weed_s3_server
from tests.hub import harness
from tests.k8s import (
    controlplane,
    crds,
    kube_region,
    nodes,
    operators,
    pod_region,
    realnode,
    registry,
)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    if os.environ.get("TAU_TEST_K8S") != "1":
        pytest.skip(
            "Kubernetes control-plane tests need TAU_TEST_K8S=1 and the binaries from "
            "k8s/build.sh; run `make test-k8s` (builds or reuses them, then runs these)"
        )
    bindir = controlplane.bin_dir()
    absent = controlplane.missing(bindir)
    if absent:
        pytest.skip(
            f"TAU_TEST_K8S=1 but {', '.join(absent)} not built in {bindir}; "
            "run k8s/build.sh (or `make test-k8s`)"
        )
    work = Path(tmp_path_factory.mktemp("k8s"))
    with controlplane.ControlPlane(bindir=bindir, workdir=work) as cp:
        yield cp
    assert cp.alive() == [], "control-plane processes left running after stop"


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary ``k8s/build.sh helm`` built (skipped, saying how, when absent)."""
    out = subprocess.run(
        [str(controlplane.BUILD_SCRIPT), "--print-bin", "helm"],
        check=True,
        capture_output=True,
        text=True,
    )
    binary = Path(out.stdout.strip()) / "helm"
    if not binary.is_file():
        pytest.skip(f"helm not built in {binary.parent}; run `k8s/build.sh helm` (make k8s-build)")
    return binary


@pytest.fixture(scope="session")
def kube(control_plane: controlplane.ControlPlane) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def gpu_nodes(kube: client.ApiClient) -> tuple[nodes.GpuNode, ...]:
    """The default kwok GPU nodes, created once and waited for until Ready."""
    core = client.CoreV1Api(kube)
    for node in nodes.DEFAULT_NODES:
        core.create_node(node.manifest())
    for node in nodes.DEFAULT_NODES:
        controlplane.wait_until(
            f"kwok node {node.name} Ready", functools.partial(_node_ready, core, node.name)
        )
    return nodes.DEFAULT_NODES


def _node_ready(core: client.CoreV1Api, name: str) -> bool:
    return _ready(core.read_node(name))


def _ready(node: client.V1Node) -> bool:
    conds = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conds)


@pytest.fixture(scope="session")
def kueue_and_kuberay_crds(
    control_plane: controlplane.ControlPlane, kube: client.ApiClient
) -> dict[str, list[str]]:
    """Kueue's and KubeRay's CRDs (from their source modules) installed and served."""
    installed: dict[str, list[str]] = {}
    for name in ("kueue", "kuberay"):
        directory = crds.crd_dir(control_plane.bindir, name)
        if not any(directory.glob("*.yaml")):
            pytest.fail(
                f"no {name} CRDs in {directory}; run `k8s/build.sh --share-only kueue kuberay` "
                "(make test-k8s does)"
            )
        installed[name] = crds.install(kube, directory)
    return installed


def _need(cp: controlplane.ControlPlane, name: str) -> None:
    if controlplane.missing(cp.bindir, (name,)):
        pytest.skip(f"{name} not built in {cp.bindir}; run `k8s/build.sh {name}`")


@pytest.fixture(scope="session")
def kueue(
    control_plane: controlplane.ControlPlane,
    kube: client.ApiClient,
    kueue_and_kuberay_crds: dict[str, list[str]],
) -> controlplane.ControlPlane:
    """Kueue's manager running (after the CRDs, so its Ray integrations are on)."""
    _need(control_plane, "kueue")
    operators.start_kueue(control_plane, kube)
    return control_plane


@pytest.fixture(scope="session")
def kuberay(
    control_plane: controlplane.ControlPlane, kueue_and_kuberay_crds: dict[str, list[str]]
) -> controlplane.ControlPlane:
    """KubeRay's ray-operator running."""
    _need(control_plane, "kuberay")
    operators.start_kuberay(control_plane)
    return control_plane


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory,
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    kuberay: controlplane.ControlPlane,
    gpu_nodes: tuple[nodes.GpuNode, ...],
) -> Iterator[tuple[harness.HubServer, kube_region.KubeAgent]]:
    """A hub and the agent of its ``backend: kubernetes`` region (one per test module);
    after the module, what its failed tests left in the workspace is swept."""
    kube_region.data_volume(kube)
    tmp = Path(tmp_path_factory.mktemp("kube-hub"))
    try:
        with kube_region.region(tmp, kueue.kubeconfig) as both:
            yield both
    finally:
        kube_region.sweep(kube)


@pytest.fixture(scope="session")
def tau_crds(kube: client.ApiClient) -> list[str]:
    """TauGrid's own CRDs (``platform.crds.crd_definitions``) installed and served."""
    from taugrid.platform import crds as tau_crds

    return crds.create(kube, tau_crds.crd_definitions())


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry.Registry]:
    """The tier's image registry (Debian's docker-registry) on the real node's address."""
    if registry.missing():
        pytest.fail(f"the tier needs: {', '.join(registry.missing())} (.ci/run installs it)")
    with registry.Registry(realnode.IP, Path(tmp_path_factory.mktemp("registry"))) as r:
        yield r


@pytest.fixture(scope="module")
def node(
    control_plane: controlplane.ControlPlane,
    images: registry.Registry,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[realnode.RealNode]:
    """A real node (kubelet, containerd, runc) joined to the session's control plane for
    one module; it pulls from ``images``."""
    absent = realnode.missing(control_plane.bindir)
    if absent:
        pytest.fail(f"a real node needs: {', '.join(absent)} (.ci/run installs and builds them)")
    workdir = Path(tmp_path_factory.mktemp("node"))
    with realnode.RealNode(control_plane, workdir, registries=(images.host,)) as n:
        yield n


@pytest.fixture(scope="module")
def pod_cluster(
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    images: registry.Registry,
    node: realnode.RealNode,
    weed_s3: weed_s3_server.WeedS3,
) -> pod_region.PodCluster:
    """The real node joined for this module, with Kueue, the registry and S3: what
    ``pod_region.pod_region`` builds a region on."""
    return pod_region.PodCluster(kube, kueue.kubeconfig, images, weed_s3)


@pytest.fixture(scope="module")
def region(
    pod_cluster: pod_region.PodCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[pod_region.PodRegion]:
    """A hub and its region on the real node, for one module (``pod_region.pod_region``);
    a module whose runs are Ray objects also asks for ``kuberay``."""
    with pod_region.pod_region(pod_cluster, Path(tmp_path_factory.mktemp("pods-hub"))) as r:
        yield r

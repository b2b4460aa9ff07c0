"""``tau cluster install / validate / uninstall`` and ``tau platform manifests`` on a
fresh control plane of its own (nothing of TauGrid's, no Kueue, no KubeRay at first),
through the real ``tau`` script. Tests run in file order: missing → installed → nodes →
manifests → uninstalled."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from taugrid.backends.kube import kube_api
from tests.cli import platform_env
from tests.k8s import controlplane, crds, nodes, operators

pytestmark = pytest.mark.k8s

PLATFORM = """\
schema_version: 1
gpu_types:
  - name: H100
    node_label_value: NVIDIA-H100-80GB-HBM3
regions:
  - name: mf
    clusters:
      - name: mf-k8s
        backend: kubernetes
teams:
  - name: mf-team
    cohort: mf-cohort
    quotas:
      - gpu_model: H100
        nominal: 8
        borrowing_limit: 4
workspaces:
  - name: mf-ws
    team: mf-team
    members: [erin]
"""
UNLABELLED = nodes.GpuNode("kwok-gpu-nolabel", "h100", "")


@pytest.fixture(scope="module")
def fresh(
    tmp_path_factory: pytest.TempPathFactory, control_plane: controlplane.ControlPlane
) -> Iterator[tuple[controlplane.ControlPlane, client.ApiClient]]:
    """A second control plane (the session's one has other tests' objects), with the
    default kwok GPU nodes."""
    work = Path(tmp_path_factory.mktemp("k8s-fresh"))
    with controlplane.ControlPlane(bindir=control_plane.bindir, workdir=work) as cp:
        api = config.new_client_from_config(config_file=str(cp.kubeconfig))
        core = client.CoreV1Api(api)
        for node in nodes.DEFAULT_NODES:
            core.create_node(node.manifest())
        try:
            yield cp, api
        finally:
            api.close()
    assert cp.alive() == []


def _tau(cp: controlplane.ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return platform_env.tau(dict(os.environ), *args, "--kubeconfig", str(cp.kubeconfig))


def test_validate_installation_says_kueue_and_kuberay_are_missing_and_how_to_fix(
    fresh: tuple[controlplane.ControlPlane, client.ApiClient],
) -> None:
    cp, _ = fresh
    done = _tau(cp, "cluster", "validate", "installation")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "FAIL  Kueue: CRDs not installed: clusterqueues.kueue.x-k8s.io" in out
    assert "fix: install Kueue v0.17" in out
    assert "FAIL  KubeRay: CRDs not installed: rayjobs.ray.io" in out
    assert "fix: install KubeRay v1.5" in out
    assert "FAIL  TauGrid: CRDs not installed: tauclusters.taugrid.io" in out
    assert "fix: run tau cluster install" in out
    assert "Traceback" not in out + done.stderr


def test_install_then_validate_installation_passes(
    fresh: tuple[controlplane.ControlPlane, client.ApiClient], tmp_path: Path
) -> None:
    cp, api = fresh
    for name in ("kueue", "kuberay"):
        crds.install(api, crds.crd_dir(cp.bindir, name))
    # Kueue's CRDs alone: its manager is missing, and validate says so
    done = _tau(cp, "cluster", "validate", "installation")
    assert done.returncode == 1
    assert "FAIL  Kueue: Kueue's CRDs are there but its admission webhooks are not" in (done.stdout)
    assert "ok    KubeRay: CRDs served" in done.stdout
    operators.start_kueue(cp, api)
    operators.start_kuberay(cp)
    dry = _tau(cp, "cluster", "install", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(dry.stdout) if d]
    assert kinds.count("CustomResourceDefinition") == 4 and kinds.count("Deployment") == 2
    assert (
        client.ApiextensionsV1Api(api)
        .list_custom_resource_definition(label_selector="app.kubernetes.io/part-of=taugrid")
        .items
        == []
    )  # --dry-run applied nothing
    done = _tau(cp, "cluster", "install")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied ClusterRole taugrid-agent" in done.stdout
    # without the agent's token and platform file its pod cannot start: validate says so
    done = _tau(cp, "cluster", "validate", "installation")
    assert done.returncode == 1
    assert (
        "FAIL  TauGrid: Secret taugrid-system/taugrid-agent-token missing: "
        "the agent's pod cannot start" in done.stdout
    ), done.stdout
    assert "kubectl -n taugrid-system create configmap taugrid-platform" in done.stdout
    token, platform = tmp_path / "agent.token", tmp_path / "platform.yaml"
    token.write_text("a-token")
    platform.write_text(PLATFORM)
    creds = ["--agent-token-file", str(token), "--platform", str(platform)]
    done = _tau(cp, "cluster", "install", *creds, "--cluster", "mf-k8s")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied Secret taugrid-agent-token" in done.stdout
    assert "a-token" not in done.stdout + done.stderr

    seen: list[subprocess.CompletedProcess[str]] = []

    def passes() -> bool:
        seen.append(_tau(cp, "cluster", "validate", "installation"))
        return seen[-1].returncode == 0

    # the Deployments' pods are bound to kwok nodes and become Ready there
    try:
        controlplane.wait_until("validate installation passes", passes, timeout_s=180)
    except TimeoutError:
        pods = client.CoreV1Api(api).list_namespaced_pod("taugrid-system").items
        states = [(p.metadata.name, p.spec.node_name, p.status.phase) for p in pods]
        pytest.fail(f"{seen[-1].stdout}\npods: {states}")
    ok = seen[-1]
    assert "FAIL" not in ok.stdout
    assert "ok    TauGrid: Secret taugrid-system/taugrid-agent-token has token" in ok.stdout
    assert "ok    Kueue: admission webhook answers" in ok.stdout
    assert "Deployment taugrid-system/taugrid-operator available" in ok.stdout
    assert "warn  KubeRay: no kuberay-operator Deployment seen" in ok.stdout


def test_validate_nodes_names_an_unlabelled_gpu_node_and_missing_gpu_health_agents(
    fresh: tuple[controlplane.ControlPlane, client.ApiClient],
) -> None:
    cp, api = fresh
    core = client.CoreV1Api(api)
    manifest = UNLABELLED.manifest()
    manifest["metadata"]["labels"].pop(nodes.GPU_PRODUCT_LABEL, None)
    core.create_node(manifest)
    done = _tau(cp, "cluster", "validate", "nodes")
    assert done.returncode == 1, done.stdout
    assert f"FAIL  nodes: {UNLABELLED.name} has GPUs but no nvidia.com/gpu.product label" in (
        done.stdout
    )
    assert "warn  DCGM exporter: not seen" in done.stdout
    assert "warn  node-problem-detector: not seen" in done.stdout
    core.patch_node(
        UNLABELLED.name, {"metadata": {"labels": {nodes.GPU_PRODUCT_LABEL: "NVIDIA-H100"}}}
    )
    done = _tau(cp, "cluster", "validate", "nodes")
    assert done.returncode == 0, done.stdout
    assert f"ok    nodes: {UNLABELLED.name}: GPU model NVIDIA-H100" in done.stdout


def test_platform_manifests_apply_cleanly(
    tmp_path: Path, fresh: tuple[controlplane.ControlPlane, client.ApiClient]
) -> None:
    cp, _ = fresh
    path = tmp_path / "platform.yaml"
    path.write_text(PLATFORM)
    done = platform_env.tau(dict(os.environ), "platform", "manifests", "-f", str(path))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    api = kube_api.KubeApi(str(cp.kubeconfig), None)
    try:
        for doc in docs:  # every object as printed, in order, through Kueue's webhooks
            api.apply(doc)
        binding = api.get("RoleBinding", "taugrid-agent", "mf-ws")
        assert binding is not None
        assert api.get("ClusterRole", binding["roleRef"]["name"]) is not None
        assert api.get("TauWorkspace", "mf-ws") is not None
    finally:
        api.close()


def test_uninstall_leaves_nothing_of_ours(
    fresh: tuple[controlplane.ControlPlane, client.ApiClient],
) -> None:
    cp, api = fresh
    done = _tau(cp, "cluster", "uninstall")
    assert done.returncode == 0, done.stdout + done.stderr
    part_of = "app.kubernetes.io/part-of=taugrid"
    ext, rbac = client.ApiextensionsV1Api(api), client.RbacAuthorizationV1Api(api)
    assert [
        c.metadata.name
        for c in ext.list_custom_resource_definition().items
        if c.spec.group == "taugrid.io"
    ] == []
    assert rbac.list_cluster_role(label_selector=part_of).items == []
    assert rbac.list_cluster_role_binding(label_selector=part_of).items == []
    names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
    assert "taugrid-system" not in names
    assert (
        client.AppsV1Api(api).list_deployment_for_all_namespaces(label_selector=part_of).items == []
    )
    again = _tau(cp, "cluster", "validate", "installation")
    assert "FAIL  TauGrid: CRDs not installed" in again.stdout

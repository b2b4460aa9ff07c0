"""The TauGrid operator (``python -m taugrid.operator``, kopf) on the real control plane,
with Kueue's manager validating what it writes: TauTeam → ClusterQueue and Cohort,
TauWorkspace → Namespace, accounts, RBAC, PVC and LocalQueue; quota requests, drift,
deletion, an unknown team and objects the CRD schema refuses."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from taugrid.render import naming
from tests.cli import platform_env
from tests.k8s import controlplane, tau_operator

pytestmark = pytest.mark.k8s

PLATFORM = """\
schema_version: 1
gpu_types:
  - name: A100-80G
    node_label_value: NVIDIA-A100-SXM4-80GB
regions:
  - name: op
    clusters:
      - name: op-k8s
        backend: kubernetes
teams:
  - name: op-ml
    cohort: op-research
    quotas:
      - gpu_model: A100-80G
        nominal: 4
workspaces:
  - name: op-vision
    team: op-ml
    members: [alice@example.com]
"""
FLAVOR = naming.flavor_name("A100-80G")


@pytest.fixture(scope="module")
def operator(
    tmp_path_factory: pytest.TempPathFactory,
    control_plane: controlplane.ControlPlane,
    kueue: controlplane.ControlPlane,
    tau_crds: list[str],
) -> Iterator[subprocess.Popen[bytes]]:
    log = Path(tmp_path_factory.mktemp("tau-operator")) / "operator.log"
    with tau_operator.running(control_plane.kubeconfig, log) as proc:
        yield proc
    assert proc.returncode in (0, -15), log.read_text()[-3000:]


@pytest.fixture(scope="module")
def workspace(
    tmp_path_factory: pytest.TempPathFactory,
    kube: client.ApiClient,
    operator: subprocess.Popen[bytes],
) -> dict[str, Any]:
    """op-vision as ``tau platform manifests`` renders it (TauTeam, TauWorkspace), applied."""
    path = Path(tmp_path_factory.mktemp("op-platform")) / "platform.yaml"
    path.write_text(PLATFORM)
    out = platform_env.tau(dict(os.environ), "platform", "manifests", "-f", str(path))
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    for kind in ("TauTeam", "TauWorkspace"):
        for doc in docs:
            if doc["kind"] == kind:
                tau_operator.create(kube, doc)
    return tau_operator.phase(kube, "TauWorkspace", "op-vision")


def test_a_workspace_from_the_cli_becomes_ready_with_its_namespace_accounts_rbac_and_queue(
    kube: client.ApiClient, workspace: dict[str, Any]
) -> None:
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    assert workspace["namespace"] == "op-vision" and workspace["queue"] == "op-vision"
    ns = core.read_namespace("op-vision")
    assert ns.metadata.labels[naming.LABEL_TEAM] == "op-ml"
    assert ns.metadata.owner_references[0].kind == "TauWorkspace"
    core.read_namespaced_service_account(naming.WORKLOAD_SERVICE_ACCOUNT, "op-vision")
    core.read_namespaced_persistent_volume_claim(naming.data_claim("op-vision"), "op-vision")
    agent = rbac.read_namespaced_role_binding(naming.AGENT_ROLE, "op-vision")
    assert agent.role_ref.kind == "ClusterRole" and agent.role_ref.name == naming.AGENT_ROLE
    members = rbac.read_namespaced_role_binding("taugrid-members", "op-vision")
    assert [s.name for s in members.subjects] == ["alice@example.com"]
    lq = custom.get_namespaced_custom_object(
        *tau_operator.KUEUE, "op-vision", "localqueues", "op-vision"
    )
    assert lq["spec"]["clusterQueue"] == "op-ml"
    cq = tau_operator.cluster_queue(kube, "op-ml")
    assert cq is not None and cq["spec"]["cohortName"] == "op-research"
    assert tau_operator.gpu_nominal(cq, FLAVOR) == 4
    cohort = custom.get_cluster_custom_object(*tau_operator.KUEUE, "cohorts", "op-research")
    assert [o["name"] for o in cohort["metadata"]["ownerReferences"]] == ["op-ml"]
    assert tau_operator.phase(kube, "TauTeam", "op-ml")["clusterQueue"] == "op-ml"
    # RBAC as the API server enforces it
    assert tau_operator.can(kube, "alice@example.com", "create", "rayjobs", "op-vision")
    assert not tau_operator.can(kube, "bob@example.com", "create", "rayjobs", "op-vision")


def test_a_member_added_gets_access_and_a_removed_one_loses_it(
    kube: client.ApiClient, workspace: dict[str, Any]
) -> None:
    tau_operator.patch_spec(kube, "TauWorkspace", "op-vision", {"members": ["bob@example.com"]})
    controlplane.wait_until(
        "bob may create RayJobs in op-vision",
        lambda: tau_operator.can(kube, "bob@example.com", "create", "rayjobs", "op-vision"),
    )
    assert not tau_operator.can(kube, "alice@example.com", "create", "rayjobs", "op-vision")
    assert not tau_operator.can(kube, "alice@example.com", "list", "rayjobs", "op-vision")
    tau_operator.patch_spec(kube, "TauWorkspace", "op-vision", {"members": ["alice@example.com"]})
    controlplane.wait_until(
        "alice back",
        lambda: tau_operator.can(kube, "alice@example.com", "create", "rayjobs", "op-vision"),
    )


def test_an_approved_quota_request_changes_the_cluster_queue(
    kube: client.ApiClient, workspace: dict[str, Any]
) -> None:
    custom = client.CustomObjectsApi(kube)
    request = {
        "apiVersion": f"{tau_operator.GROUP}/{tau_operator.VERSION}",
        "kind": "TauQuotaRequest",
        "metadata": {"name": "more-a100", "namespace": "op-vision"},
        "spec": {"team": "op-ml", "gpu_model": "A100-80G", "nominal": 12, "reason": "sweep"},
    }
    tau_operator.create(kube, request)
    args = (tau_operator.GROUP, tau_operator.VERSION, "op-vision", "tauquotarequests")
    custom.patch_namespaced_custom_object_status(
        *args, "more-a100", {"status": {"state": "pending"}}
    )
    # a pending request changes nothing: the operator has answered a later event first
    tau_operator.patch_spec(kube, "TauTeam", "op-ml", {"cpu_quota": 999})
    controlplane.wait_until(
        "ClusterQueue has cpu 999",
        lambda: _cpu(tau_operator.cluster_queue(kube, "op-ml")) == "999",
    )
    assert tau_operator.gpu_nominal(tau_operator.cluster_queue(kube, "op-ml"), FLAVOR) == 4
    custom.patch_namespaced_custom_object_status(
        *args, "more-a100", {"status": {"state": "approved"}}
    )
    controlplane.wait_until(
        "ClusterQueue op-ml nominal A100 12",
        lambda: tau_operator.gpu_nominal(tau_operator.cluster_queue(kube, "op-ml"), FLAVOR) == 12,
    )
    controlplane.wait_until(
        "request status says applied",
        lambda: (
            "applied"
            in (
                custom.get_namespaced_custom_object(*args, "more-a100")
                .get("status", {})
                .get("message", "")
            )
        ),
    )
    # deleting the approved request gives the quota back
    custom.delete_namespaced_custom_object(*args, "more-a100")
    controlplane.wait_until(
        "ClusterQueue op-ml back to 4",
        lambda: tau_operator.gpu_nominal(tau_operator.cluster_queue(kube, "op-ml"), FLAVOR) == 4,
    )


def _cpu(cq: dict[str, Any] | None) -> str | None:
    for group in (cq or {}).get("spec", {}).get("resourceGroups", []):
        for fl in group["flavors"]:
            for r in fl["resources"]:
                if r["name"] == "cpu":
                    return str(r["nominalQuota"])
    return None


def test_a_hand_edit_of_a_managed_object_is_repaired(
    kube: client.ApiClient, workspace: dict[str, Any]
) -> None:
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    mallory = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}
    rbac.patch_namespaced_role_binding("taugrid-members", "op-vision", {"subjects": [mallory]})
    core.delete_namespaced_service_account(naming.WORKLOAD_SERVICE_ACCOUNT, "op-vision")
    assert tau_operator.can(kube, "mallory", "create", "rayjobs", "op-vision")
    controlplane.wait_until(
        "mallory's access taken back",
        lambda: not tau_operator.can(kube, "mallory", "create", "rayjobs", "op-vision"),
    )
    controlplane.wait_until(
        "service account made again",
        lambda: tau_operator.exists(
            core.read_namespaced_service_account, naming.WORKLOAD_SERVICE_ACCOUNT, "op-vision"
        ),
    )
    subjects = rbac.read_namespaced_role_binding("taugrid-members", "op-vision").subjects
    assert [s.name for s in subjects] == ["alice@example.com"]


def test_a_workspace_naming_an_unknown_team_says_so_and_creates_nothing(
    kube: client.ApiClient, operator: subprocess.Popen[bytes]
) -> None:
    core = client.CoreV1Api(kube)
    ws = _workspace("op-orphan", "op-nobody")
    tau_operator.create(kube, ws)
    status = tau_operator.phase(kube, "TauWorkspace", "op-orphan", want="Failed")
    assert "team op-nobody does not exist" in status["message"]
    assert not tau_operator.exists(core.read_namespace, "op-orphan")
    selector = f"{naming.LABEL_WORKSPACE}=op-orphan"
    assert core.list_namespace(label_selector=selector).items == []
    # the team appearing later is enough: the next pass makes the workspace
    team = {
        "apiVersion": f"{tau_operator.GROUP}/{tau_operator.VERSION}",
        "kind": "TauTeam",
        "metadata": {"name": "op-nobody"},
        "spec": {"quotas": []},
    }
    tau_operator.create(kube, team)
    tau_operator.phase(kube, "TauWorkspace", "op-orphan")
    assert tau_operator.exists(core.read_namespace, "op-orphan")


def _workspace(name: str, team: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{tau_operator.GROUP}/{tau_operator.VERSION}",
        "kind": "TauWorkspace",
        "metadata": {"name": name},
        "spec": {"team": team, **spec},
    }


def test_deleting_a_workspace_and_its_team_cleans_up(
    kube: client.ApiClient, operator: subprocess.Popen[bytes]
) -> None:
    core = client.CoreV1Api(kube)
    tau_operator.create(
        kube,
        {
            "apiVersion": f"{tau_operator.GROUP}/{tau_operator.VERSION}",
            "kind": "TauTeam",
            "metadata": {"name": "op-gone"},
            "spec": {"cohort": "op-gone-cohort"},
        },
    )
    tau_operator.create(kube, _workspace("op-gone-ws", "op-gone", members=["carol"]))
    tau_operator.phase(kube, "TauWorkspace", "op-gone-ws")
    tau_operator.delete(kube, "TauWorkspace", "op-gone-ws")
    controlplane.wait_until(
        "namespace op-gone-ws deleted",
        lambda: not tau_operator.exists(core.read_namespace, "op-gone-ws"),
        timeout_s=240,
    )
    tau_operator.delete(kube, "TauTeam", "op-gone")
    controlplane.wait_until(
        "ClusterQueue and Cohort of op-gone deleted",
        lambda: (
            tau_operator.cluster_queue(kube, "op-gone") is None
            and not _cohort(kube, "op-gone-cohort")
        ),
        timeout_s=240,
    )


def _cohort(kube: client.ApiClient, name: str) -> bool:
    custom = client.CustomObjectsApi(kube)
    return tau_operator.exists(
        custom.get_cluster_custom_object, *tau_operator.KUEUE, "cohorts", name
    )


@pytest.mark.parametrize(
    ("kind", "spec", "field"),
    [
        ("TauWorkspace", {"team": "Not_A_Name"}, "spec.team"),
        ("TauWorkspace", {"members": ["x"]}, "spec.team"),
        (
            "TauTeam",
            {"quotas": [{"gpu_model": "A100-80G", "nominal": -1}]},
            "spec.quotas[0].nominal",
        ),
        ("TauTeam", {"queueing_strategy": "Random"}, "spec.queueing_strategy"),
    ],
)
def test_an_invalid_tau_object_is_refused_by_the_crd_schema_naming_the_field(
    kube: client.ApiClient, tau_crds: list[str], kind: str, spec: dict[str, Any], field: str
) -> None:
    obj = {
        "apiVersion": f"{tau_operator.GROUP}/{tau_operator.VERSION}",
        "kind": kind,
        "metadata": {"name": "op-invalid"},
        "spec": spec,
    }
    with pytest.raises(client.ApiException) as refused:
        tau_operator.create(kube, obj)
    assert refused.value.status == 422
    message = json.loads(refused.value.body)["message"]
    assert field in message, message

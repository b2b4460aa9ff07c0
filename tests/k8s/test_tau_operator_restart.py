"""The operator killed mid-reconcile (its documented fault seam,
``TAU_OPERATOR_FAULT_EXIT_AFTER``: exit right after the N-th object of a workspace is
applied) and started again converges to one copy of everything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from taugrid.operator import reconcile
from taugrid.render import naming
from tests.k8s import controlplane, tau_operator

pytestmark = pytest.mark.k8s

API = f"{tau_operator.GROUP}/{tau_operator.VERSION}"


def _names(items: list[Any]) -> list[str]:
    return sorted(
        i.metadata.name if hasattr(i, "metadata") else i["metadata"]["name"] for i in items
    )


def test_an_operator_killed_mid_reconcile_converges_without_duplicates_when_restarted(
    tmp_path: Path,
    kube: client.ApiClient,
    control_plane: controlplane.ControlPlane,
    kueue: controlplane.ControlPlane,
    tau_crds: list[str],
) -> None:
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    team = {"apiVersion": API, "kind": "TauTeam", "metadata": {"name": "op-rs"}, "spec": {}}
    ws = {
        "apiVersion": API,
        "kind": "TauWorkspace",
        "metadata": {"name": "op-restart"},
        "spec": {"team": "op-rs", "members": ["dave"]},
    }
    tau_operator.create(kube, team)
    tau_operator.create(kube, ws)
    log = tmp_path / "operator.log"
    fault = {reconcile.FAULT_ENV: "2@op-restart"}  # its Namespace and ServiceAccount, then killed
    with tau_operator.running(control_plane.kubeconfig, log, env=fault) as proc:
        controlplane.wait_until("operator killed by the fault", lambda: proc.poll() is not None)
    assert proc.returncode == reconcile.FAULT_EXIT_CODE, log.read_text()[-3000:]
    assert tau_operator.exists(core.read_namespace, "op-restart")
    assert (tau_operator.get(kube, "TauWorkspace", "op-restart").get("status") or {}).get(
        "phase"
    ) != "Ready"
    lqs = custom.list_namespaced_custom_object(*tau_operator.KUEUE, "op-restart", "localqueues")
    assert lqs["items"] == []  # half made

    with tau_operator.running(control_plane.kubeconfig, log):
        tau_operator.phase(kube, "TauWorkspace", "op-restart")
        labelled = f"{naming.LABEL_WORKSPACE}=op-restart"
        assert _names(core.list_namespace(label_selector=labelled).items) == ["op-restart"]
        lqs = custom.list_namespaced_custom_object(*tau_operator.KUEUE, "op-restart", "localqueues")
        assert _names(lqs["items"]) == ["op-restart"]
        bindings = rbac.list_namespaced_role_binding("op-restart", label_selector=labelled)
        assert _names(bindings.items) == [naming.AGENT_ROLE, "taugrid-members"]
        accounts = core.list_namespaced_service_account("op-restart", label_selector=labelled)
        assert _names(accounts.items) == [naming.WORKLOAD_SERVICE_ACCOUNT]
        pvcs = core.list_namespaced_persistent_volume_claim("op-restart")
        assert _names(pvcs.items) == [naming.data_claim("op-restart")]
        cqs = custom.list_cluster_custom_object(*tau_operator.KUEUE, "clusterqueues")
        assert [n for n in _names(cqs["items"]) if n.startswith("op-rs")] == ["op-rs"]
        assert tau_operator.can(kube, "dave", "create", "rayjobs", "op-restart")

"""The operator's desired state (``operator.desired``), the CRD definitions' status and
printer columns, and ``tau cluster install --dry-run``: no cluster needed."""

from __future__ import annotations

import os
import pathlib
import subprocess

import yaml

from taugrid.operator import desired
from taugrid.platform import crds
from taugrid.platform import models as pm
from taugrid.render import cluster, naming
from tests.cli import platform_env

TEAM = pm.TeamSpec(name="ml", cohort="research", quotas=[pm.Quota(gpu_model="A100", nominal=4)])


def _owner(kind: str, name: str) -> dict[str, object]:
    return {"kind": kind, "metadata": {"name": name, "uid": f"uid-{name}"}}


def test_approved_requests_overlay_the_team_quota_latest_wins() -> None:
    requests = [
        pm.QuotaRequestSpec(team="ml", gpu_model="A100", nominal=8, reason="a"),
        pm.QuotaRequestSpec(team="ml", gpu_model="A100", nominal=6, reason="b"),
        pm.QuotaRequestSpec(team="ml", gpu_model="H100", nominal=2, reason="c"),
        pm.QuotaRequestSpec(team="other", gpu_model="A100", nominal=99, reason="d"),
    ]
    got = desired.with_approved(TEAM, requests)
    assert {q.gpu_model: q.nominal for q in got.quotas} == {"A100": 6, "H100": 2}
    assert desired.with_approved(TEAM, []) == TEAM


def test_team_objects_are_a_cohort_owned_by_every_team_and_a_cluster_queue_owned_by_one() -> None:
    owner = _owner("TauTeam", "ml")
    cohort, cq = desired.team_objects(TEAM, owner, [owner, _owner("TauTeam", "cv")])
    assert cohort["kind"] == "Cohort" and cq["kind"] == "ClusterQueue"
    assert [r["name"] for r in cohort["metadata"]["ownerReferences"]] == ["ml", "cv"]
    assert not any(r["controller"] for r in cohort["metadata"]["ownerReferences"])
    assert cq["metadata"]["ownerReferences"][0]["uid"] == "uid-ml"


def test_workspace_objects_are_owned_labelled_and_bind_every_member() -> None:
    ws = pm.WorkspaceSpec(name="vision", team="ml", members=["alice", "bob"])
    objs = desired.workspace_objects(ws, TEAM, _owner("TauWorkspace", "vision"))
    assert [o["kind"] for o in objs] == [
        "Namespace",
        "ServiceAccount",
        "RoleBinding",
        "PersistentVolumeClaim",
        "LocalQueue",
        "Role",
        "RoleBinding",
    ]
    for obj in objs:
        assert obj["metadata"]["labels"][naming.LABEL_WORKSPACE] == "vision"
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "TauWorkspace"
    assert [s["name"] for s in objs[-1]["subjects"]] == ["alice", "bob"]


def test_crds_have_a_status_subresource_and_printer_columns() -> None:
    for kind in crds.KINDS:
        version = crds.crd_definition(kind)["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        columns = [c["name"] for c in version["additionalPrinterColumns"]]
        assert columns[-1] == "Age" and ("Phase" in columns or "State" in columns)
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
        assert {"phase", "message"} <= set(status["properties"])


def test_install_dry_run_prints_the_crds_rbac_and_both_deployments() -> None:
    done: subprocess.CompletedProcess[str] = platform_env.tau(
        dict(os.environ), "cluster", "install", "--dry-run", "--hub-url", "http://h:1"
    )
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ClusterRole", naming.AGENT_ROLE) in names
    assert ("Deployment", cluster.OPERATOR) in names
    assert ("Namespace", naming.AGENT_NAMESPACE) in names
    agent = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] != cluster.OPERATOR
    )
    assert "http://h:1" in agent["spec"]["template"]["spec"]["containers"][0]["command"]
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "taugrid" for d in docs)


def test_validate_with_a_kubeconfig_that_does_not_load_says_so_without_a_traceback(
    tmp_path: pathlib.Path,
) -> None:
    missing = tmp_path / "nope.yaml"
    done = platform_env.tau(
        dict(os.environ), "cluster", "validate", "installation", "--kubeconfig", str(missing)
    )
    assert done.returncode == 2
    assert f"cannot load kubeconfig {missing}" in done.stderr
    assert "hint: pass --kubeconfig FILE" in done.stderr and "Traceback" not in done.stderr

"""The rest of a run's life on a ``backend: kubernetes`` region, through a real hub and
agent on the test control plane: Kueue preemption and the requeue from a checkpoint of a
RayJob, unhealthy nodes (a taint from outside, a mark from the hub) and an agent whose
credentials lack rights. (A RayJob that finishes and is released runs for real on the
real node: ``test_rayjob_in_pods.py``.)

Pods on kwok run no containers, so where a Ray job has to end, or to write a
checkpoint, the test does it the way KubeRay or the job would and the test's name says
so. Admission, preemption, binding, deletion and release are the real controllers'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from taugrid.backends.kube import kube_marks
from taugrid.hub.runs import runs as hub_runs
from taugrid.render import naming
from taugrid.sdk.job import injob_checkpoint
from tests.hub import harness
from tests.k8s import controlplane, kube_region, nodes

pytestmark = pytest.mark.k8s

WS = kube_region.WORKSPACE
H100 = tuple(n.name for n in nodes.DEFAULT_NODES if n.pool == "h100")


def _cancel(server: harness.HubServer, run_id: str) -> None:
    """Cancel (after a failed assertion, so that later tests find the GPUs free)."""
    with server.http() as c:
        c.post(f"/v1/runs/{run_id}/cancel", json={})


def _high_priority_job(kube: client.ApiClient, gpus: int) -> None:
    """Another tenant's batch Job in the same LocalQueue with the platform's ``high``
    WorkloadPriorityClass; its pods go nowhere (a selector no node has), so it only
    takes quota."""
    pod = nodes.gpu_pod("urgent", gpus, {"taugrid.io/nowhere": "true"})
    pod["spec"]["restartPolicy"] = "Never"
    labels = {naming.QUEUE_LABEL: WS, naming.PRIORITY_LABEL: "high"}
    job = {"metadata": {"name": "urgent", "labels": labels}, "spec": {"template": pod}}
    client.BatchV1Api(kube).create_namespaced_job(WS, job)


def _commit_checkpoint_as_the_job_would(
    server: harness.HubServer, run_id: str, step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the job's ``tau.checkpoint(step)`` does, with the attempt's environment,
    into the run's record (the job on kwok runs no code)."""
    run = server.hub.runs.get_run(run_id)
    assert run is not None
    record = hub_runs.record_of(server.hub, run).dir
    assert record is not None
    monkeypatch.setenv("TAU_RUN_ID", run_id)
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(record))
    monkeypatch.setenv("CHECKPOINT_PATH", str(record / "checkpoints"))
    monkeypatch.setenv("TAU_FENCING_TOKEN", str(run["current_token"]))
    with injob_checkpoint.checkpoint(step) as d:
        (Path(d) / "model.pt").write_bytes(b"weights")


def test_kueue_preempts_a_low_priority_run_which_is_requeued_and_resumes_from_a_checkpoint_the_test_commits_as_the_job_would(  # noqa: E501
    hub: tuple[harness.HubServer, kube_region.KubeAgent],
    kube: client.ApiClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _ = hub
    run_id = kube_region.submit(server, kube_region.tau_yaml("victim", gpus=8, priority="low"))
    kube_region.wait_bound(server, run_id)
    first = kube_region.rayjob(kube, run_id)
    assert first is not None
    assert first["metadata"]["labels"][naming.PRIORITY_LABEL] == "low"
    _commit_checkpoint_as_the_job_would(server, run_id, 5, monkeypatch)
    _high_priority_job(kube, 16)  # the whole H100 quota: Kueue must evict the victim
    try:
        with server.http() as c:
            run = kube_region.wait(
                "preempted, requeued and waiting for Kueue again",
                c,
                run_id,
                lambda r: (
                    len(r["attempts"]) >= 2
                    and "insufficient" in kube_region.phase(r, "scheduled")["reason"]
                ),
            )
        victim, retry = run["attempts"][0], run["attempts"][-1]
        assert victim["failure_kind"] == "preemption"
        assert "preempted by Kueue" in victim["reason"]
        assert "Preempted to accommodate a workload" in victim["reason"]  # Kueue's words
        assert retry["resumed_from"] == "step-00000005"
        assert kube_region.phase(run, "scheduled")["source"].startswith("Kueue Workload ml/")
    except BaseException:
        _cancel(server, run_id)
        raise
    finally:
        client.BatchV1Api(kube).delete_namespaced_job("urgent", WS, propagation_policy="Background")
    # the quota is back: Kueue admits the requeued attempt and it is bound again
    run = kube_region.wait_bound(server, run_id)
    assert run["attempts"][-1]["state"] == "running"
    # tau_yaml says max_retries: 0, so the second attempt shows the eviction used none
    assert len(run["attempts"]) == 2
    kube_region.cancel_and_wait_released(server, kube, run_id)


def test_a_tainted_gpu_node_is_avoided_and_shown_in_gpu_healthy(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    # a run bound to h100-1 while h100-0 is tainted: kube-scheduler had one choice
    core = client.CoreV1Api(kube)
    taint = {"key": "nvidia.com/gpu.health", "value": "xid-79", "effect": "NoSchedule"}
    core.patch_node(H100[0], {"spec": {"taints": [taint]}})
    first = kube_region.submit(server, kube_region.tau_yaml("avoids", gpus=8))
    try:
        kube_region.wait_bound(server, first)
        assert kube_region.workers(kube, first) == {H100[1]}
        # now h100-1 goes bad under it: GPU healthy fails, naming the Node and its taint
        core.patch_node(H100[1], {"spec": {"taints": [taint]}})
        with server.http() as c:
            run = kube_region.wait(
                "GPU healthy failed",
                c,
                first,
                lambda r: kube_region.phase(r, "gpu_healthy")["status"] == "failed",
            )
        healthy = kube_region.phase(run, "gpu_healthy")
        assert healthy["source"] == f"Node {H100[1]}"
        assert "nvidia.com/gpu.health=xid-79:NoSchedule" in healthy["reason"]
    finally:
        kube_region.cancel_and_wait_released(server, kube, first)
        for name in H100:
            core.patch_node(name, {"spec": {"taints": None}})


def _node(kube: client.ApiClient, name: str) -> client.V1Node:
    return client.CoreV1Api(kube).read_node(name)


def _has_mark(node: client.V1Node) -> bool:
    taints = node.spec.taints or []
    conds = {c.type: c for c in node.status.conditions or []}
    cond = conds.get(kube_marks.CONDITION)
    return any(
        t.key == kube_marks.TAINT_KEY and t.value == "ecc" and t.effect == "NoSchedule"
        for t in taints
    ) and (cond is not None and cond.status == "True")


def test_a_node_the_hub_marks_gets_a_condition_and_taint_and_new_pods_avoid_it(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    fault = {"cluster_id": kube_region.CLUSTER, "node_id": H100[0], "kind": "ecc"}
    with server.http() as c:
        r = c.post("/v1/admin/nodes/fault", json={**fault, "reason": "ECC errors"})
        assert r.status_code == 200, r.text
    controlplane.wait_until(
        "the mark on the Node as a condition and a taint", lambda: _has_mark(_node(kube, H100[0]))
    )
    cond = next(c for c in _node(kube, H100[0]).status.conditions if c.type == "TauGridNodeFault")
    assert cond.reason == "MarkedFaulty" and "ecc" in cond.message
    run_id = kube_region.submit(server, kube_region.tau_yaml("aside", gpus=8))
    try:
        kube_region.wait_bound(server, run_id)
        assert kube_region.workers(kube, run_id) == {H100[1]}
    finally:
        kube_region.cancel_and_wait_released(server, kube, run_id)
    with server.http() as c:
        r = c.post("/v1/admin/nodes/clear", json=fault)
        assert r.status_code == 200, r.text

    def cleared() -> bool:
        node = _node(kube, H100[0])
        taints = [t for t in node.spec.taints or [] if t.key == kube_marks.TAINT_KEY]
        cond = next(c for c in node.status.conditions if c.type == kube_marks.CONDITION)
        return not taints and cond.status == "False"

    controlplane.wait_until("the taint removed and the condition False", cleared)


def _kubeconfig_for(kube: client.ApiClient, admin: Path, tmp: Path, rules: list[Any]) -> Path:
    """A kubeconfig of a ServiceAccount allowed only ``rules`` (a token from the API
    server's TokenRequest), on the admin kubeconfig's server and CA."""
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    name = "taugrid-agent-readonly"
    core.create_namespaced_service_account("default", {"metadata": {"name": name}})
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    subject = {"kind": "ServiceAccount", "name": name, "namespace": "default"}
    rbac_group = "rbac.authorization.k8s.io"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": rbac_group, "kind": "ClusterRole", "name": name},
            "subjects": [subject],
        }
    )
    req = core.create_namespaced_service_account_token(
        name, "default", {"spec": {"expirationSeconds": 3600}}
    )
    cfg = yaml.safe_load(admin.read_text())
    cfg["users"] = [{"name": name, "user": {"token": req.status.token}}]
    cfg["contexts"][0]["context"]["user"] = name
    out = tmp / "readonly.kubeconfig"
    out.write_text(yaml.safe_dump(cfg))
    return out


def test_an_agent_whose_account_may_only_read_shows_the_forbidden_verb_and_resource(
    hub: tuple[harness.HubServer, kube_region.KubeAgent],
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    tmp_path: Path,
) -> None:
    read_only = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]
    kubeconfig = _kubeconfig_for(kube, kueue.kubeconfig, tmp_path, read_only)
    (tmp_path / "weak").mkdir()
    with kube_region.region(tmp_path / "weak", kubeconfig) as (server, _), server.http() as c:

        def reported() -> dict[str, Any]:
            rows = c.get("/v1/clusters").json()
            row = next((r for r in rows if r["id"] == kube_region.CLUSTER), None)
            return row if row and row.get("report") else {}

        row = controlplane.wait_until("a state report from the agent", reported)
    assert isinstance(row, dict)
    reason = row["report"]["health_reason"]
    assert row["report"]["health"] == "unavailable"
    # the API server's own words: the verb and the resource it refused
    assert 'cannot patch resource "resourceflavors"' in reason
    assert 'in API group "kueue.x-k8s.io"' in reason
    assert "system:serviceaccount:default:taugrid-agent-readonly" in reason
    assert "does not answer" not in reason

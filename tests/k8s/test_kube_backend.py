"""Runs through a TauGrid hub onto a ``backend: kubernetes`` region: the agent applies
the rendered objects to the real test control plane, where Kueue admits (or holds) the
RayJob, KubeRay makes its pods and kube-scheduler binds them to kwok GPU nodes; the
hub's run shows what those components said, naming their objects."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from kubernetes import client

from taugrid.render import naming
from tests.hub import harness
from tests.hub import region as hub_region
from tests.k8s import controlplane, kube_region, nodes

pytestmark = pytest.mark.k8s

QUICKSTART = hub_region.QUICKSTART


def test_a_run_is_admitted_by_kueue_and_bound_to_a_node_of_its_gpu_model(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    with server.http() as c:
        run = hub_region.submit_run(c, kube_region.tau_yaml("bound", gpus=2), QUICKSTART)
        run_id = run["id"]
        got = kube_region.wait(
            "scheduled by kube-scheduler and running",
            c,
            run_id,
            lambda r: (
                kube_region.phase(r, "scheduled")["status"] == "done" and r["state"] == "running"
            ),
        )
    # the RayJob exists in the workspace namespace, labelled down to its pods
    rayjob = client.CustomObjectsApi(kube).get_namespaced_custom_object(
        "ray.io", "v1", "ml", "rayjobs", naming.object_name(run_id)
    )
    assert rayjob["metadata"]["labels"][naming.LABEL_RUN_ID] == naming.label_value(run_id)
    assert not rayjob["spec"].get("suspend")  # Kueue admitted it (false is omitted)
    wl = kube_region.workload(kube, run_id)
    assert wl is not None and wl["status"]["admission"]["clusterQueue"] == "research"
    bound = kube_region.bound(kube, run_id)
    h100 = {n.name for n in nodes.DEFAULT_NODES if n.pool == "h100"}
    workers = [node for pod, node in bound.items() if "gpu-workers" in pod]
    assert workers and set(workers) <= h100
    admitted = kube_region.phase(got, "admitted")
    assert admitted["source"] == f"Kueue Workload ml/{wl['metadata']['name']}"
    scheduled = kube_region.phase(got, "scheduled")
    assert scheduled["source"].startswith("kube-scheduler Pods ml/")
    healthy = kube_region.phase(got, "gpu_healthy")
    assert healthy["status"] == "done" and healthy["source"].startswith("Node ")
    assert got["state"] == "running"
    kube_region.cancel_and_wait_released(server, kube, run_id)


def test_cancel_deletes_the_objects_and_releases_quota_then_pods(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    with server.http() as c:
        run_id = hub_region.submit_run(c, kube_region.tau_yaml("cancelme", gpus=1), QUICKSTART)[
            "id"
        ]
        kube_region.wait(
            "running", c, run_id, lambda r: kube_region.phase(r, "scheduled")["status"] == "done"
        )
    assert kube_region.bound(kube, run_id)
    run = kube_region.cancel_and_wait_released(server, kube, run_id)
    custom = client.CustomObjectsApi(kube)
    with pytest.raises(client.ApiException) as gone:
        custom.get_namespaced_custom_object(
            "ray.io", "v1", "ml", "rayjobs", naming.object_name(run_id)
        )
    assert gone.value.status == 404
    assert run["state"] == "cancelled"


def _hold_quota(kube: client.ApiClient, gpus: int) -> None:
    """Another tenant's Job in the same LocalQueue that Kueue admits but whose pods no
    node takes: it holds ``gpus`` H100s of the ClusterQueue's quota, none on a node. It has
    the runs' default priority class (the platform's lowest): a Job without one has
    priority 0, which the ClusterQueue's ``withinClusterQueue: LowerPriority`` lets any
    run preempt."""
    pod = nodes.gpu_pod("holder", gpus, {"taugrid.io/nowhere": "true"})
    pod["spec"]["restartPolicy"] = "Never"
    labels = {naming.QUEUE_LABEL: "ml", naming.PRIORITY_LABEL: "low"}
    job = {
        "metadata": {"name": "holder", "labels": labels},
        "spec": {"template": pod},
    }
    client.BatchV1Api(kube).create_namespaced_job("ml", job)
    # admitted before the run arrives: Kueue admits in arrival order, and under load the
    # run's RayJob could otherwise reach the queue first and take the quota itself
    custom = client.CustomObjectsApi(kube)
    controlplane.wait_until(
        "the holder's Workload admitted by Kueue",
        lambda: any(
            (wl.get("status") or {}).get("admission")
            for wl in custom.list_namespaced_custom_object(*kube_region.KUEUE, "ml", "workloads")[
                "items"
            ]
            if any(o["name"] == "holder" for o in wl["metadata"].get("ownerReferences") or [])
        ),
    )


def test_a_run_over_kueue_quota_stays_pending_with_kueues_reason(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    # the agent applies the platform's queues and namespaces with its first report
    controlplane.wait_until(
        "workspace namespace applied by the agent",
        lambda: "ml" in {n.metadata.name for n in client.CoreV1Api(kube).list_namespace().items},
    )
    _hold_quota(kube, 16)
    try:
        with server.http() as c:
            run_id = hub_region.submit_run(c, kube_region.tau_yaml("over", gpus=2), QUICKSTART)[
                "id"
            ]
            run = kube_region.wait(
                "Kueue's reason shown",
                c,
                run_id,
                lambda r: "insufficient" in kube_region.phase(r, "scheduled")["reason"],
            )
        scheduled = kube_region.phase(run, "scheduled")
        assert scheduled["status"] == "active"
        assert scheduled["source"].startswith("Kueue Workload ml/")
        assert "insufficient unused quota" in scheduled["reason"]
        assert run["state"] not in ("running", "succeeded")
        assert kube_region.bound(kube, run_id) == {}
        kube_region.cancel_and_wait_released(server, kube, run_id)
    finally:
        client.BatchV1Api(kube).delete_namespaced_job(
            "holder", "ml", propagation_policy="Background"
        )


def test_cluster_state_reports_nodes_gpu_models_and_kueue_usage(
    hub: tuple[harness.HubServer, kube_region.KubeAgent],
) -> None:
    server, _ = hub
    with server.http() as c:

        def reported() -> dict[str, Any]:
            rows = c.get("/v1/clusters").json()
            row = next((r for r in rows if r["id"] == kube_region.CLUSTER), None)
            return row if row and row.get("report", {}).get("queues") else {}

        row = controlplane.wait_until("a state report with Kueue usage", reported)
    assert isinstance(row, dict)
    report = row["report"]
    assert report["gpu_models"] == {"H100": 16, "A100-80G": 8}
    names = {n["node_id"] for n in report["nodes"]}
    assert {n.name for n in nodes.DEFAULT_NODES} <= names
    queues = {q["cluster_queue"]: q for q in report["queues"]}
    assert "research" in queues and "pending" in queues["research"]


def _refuse_rayjobs_named(kube: client.ApiClient, name: str) -> str:
    """A ValidatingAdmissionPolicy (the API server's own CEL admission) refusing RayJobs
    of TauGrid runs named ``name``; returns its message once the server enforces it."""
    message = f"RayJobs of runs named '{name}' are refused by this cluster's policy"
    label = naming.LABEL_NAME
    adm = client.AdmissionregistrationV1Api(kube)
    adm.create_validating_admission_policy(
        {
            "metadata": {"name": "refuse-runs"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["ray.io"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["rayjobs"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "!has(object.metadata.labels) || "
                        f"!('{label}' in object.metadata.labels) || "
                        f"object.metadata.labels['{label}'] != '{name}'",
                        "message": message,
                    }
                ],
            },
        }
    )
    adm.create_validating_admission_policy_binding(
        {
            "metadata": {"name": "refuse-runs"},
            "spec": {"policyName": "refuse-runs", "validationActions": ["Deny"]},
        }
    )
    probe = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "probe", "labels": {label: name}},
        "spec": {"entrypoint": "true"},
    }
    custom = client.CustomObjectsApi(kube)

    def enforced() -> bool:
        try:
            custom.create_namespaced_custom_object(
                "ray.io", "v1", "ml", "rayjobs", probe, dry_run="All"
            )
        except client.ApiException as exc:
            return message in str(exc.body)
        return False

    controlplane.wait_until("the admission policy enforced", enforced)
    return message


def test_an_object_the_api_server_rejects_fails_the_run_with_its_message(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = hub
    controlplane.wait_until(
        "workspace namespace applied by the agent",
        lambda: "ml" in {n.metadata.name for n in client.CoreV1Api(kube).list_namespace().items},
    )
    message = _refuse_rayjobs_named(kube, "rejected")
    with server.http() as c:
        run_id = hub_region.submit_run(c, kube_region.tau_yaml("rejected", gpus=1), QUICKSTART)[
            "id"
        ]
        run = kube_region.wait("failed", c, run_id, lambda r: r["state"] == "failed")
        detail = json.dumps(c.get(f"/v1/runs/{run_id}").json())
    assert message in detail
    # nothing half-applied: no run object, no Workload, no pods
    custom = client.CustomObjectsApi(kube)
    names = [
        o["metadata"]["name"]
        for o in custom.list_namespaced_custom_object("ray.io", "v1", "ml", "rayjobs")["items"]
    ]
    assert naming.object_name(run_id) not in names
    assert kube_region.workload(kube, run_id) is None
    assert kube_region.run_pods(kube, run_id) == []
    assert run["state"] == "failed"


def test_a_runs_secrets_become_its_own_secret_owned_by_its_rayjob(
    hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    """The hub's workspace secret reaches the pods through a per-run Secret (values by
    env name) that the RayJob owns: deleting the run's objects deletes it too."""
    server, _ = hub
    value = "hf_kube-s3cr3t"
    text = kube_region.tau_yaml("secret", gpus=1) + (
        "runtime:\n  secrets:\n    - {name: hf, key: token, env: HF_TOKEN}\n"
    )
    with server.http() as c:
        put = c.put("/v1/workspaces/ml/secrets/hf", json={"data": {"token": value}})
        assert put.status_code == 200, put.text
        run_id = hub_region.submit_run(c, text, QUICKSTART)["id"]
        kube_region.wait("running", c, run_id, lambda r: r["state"] == "running")
    core = client.CoreV1Api(kube)
    name = naming.secrets_name(run_id)
    secret = core.read_namespaced_secret(name, "ml")
    assert base64.b64decode(secret.data["HF_TOKEN"]).decode() == value
    owner = secret.metadata.owner_references[0]
    assert (owner.kind, owner.name) == ("RayJob", naming.object_name(run_id))
    pods = core.list_namespaced_pod("ml", label_selector=f"{naming.LABEL_RUN_ID}").items
    refs = [
        e.value_from.secret_key_ref
        for p in pods
        if p.metadata.labels.get(naming.LABEL_RUN_ID) == naming.label_value(run_id)
        for ct in p.spec.containers
        for e in ct.env or []
        if e.name == "HF_TOKEN"
    ]
    assert refs and all((r.name, r.key) == (name, "HF_TOKEN") for r in refs)
    kube_region.cancel_and_wait_released(server, kube, run_id)
    deadline = time.monotonic() + 60  # the garbage collector follows the owner
    while any(s.metadata.name == name for s in core.list_namespaced_secret("ml").items):
        assert time.monotonic() < deadline, f"Secret ml/{name} outlived its RayJob"
        time.sleep(0.5)

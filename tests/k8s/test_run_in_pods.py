"""A run executes in pods on the real node and comes back (issue 31 item 3, batch Jobs).

The hub (real server, SQLite) has one ``backend: kubernetes`` region on the session's
control plane, whose pods use the host network, tolerate the real node's taint and
select it (platform.yaml ``pods:``), and an S3 record store (the real SeaweedFS). Its
agent runs outside the cluster, as a platform team may run it. A ``workload_kind: job``
run of the quickstart, on the project image pulled from the tier's registry:

- Kueue admits the Job, kube-scheduler binds its pod to the real node, the kubelet runs
  it; in the pod ``agent.records.podsync`` fetches the code from the record in S3, runs the
  command and stores metrics, checkpoints and artifacts there; the first attempt crashes
  on purpose after its checkpoint at step 20, the retry resumes from it (a new pod);
  ``tau run logs`` shows the pod's log, the metrics the hub reports come from the
  record (the agent's mirror), the run ends succeeded with its artifacts saved;
- a pod killed mid-run (deleted with no grace, as a lost node would take it) fails its
  attempt; the retry resumes in a new pod from the checkpoint the first stored;
- a higher-priority run preempts a running one (the hub's admission decides, with Kueue's
  semantics, before the cluster's Kueue would): its Job is deleted, the run is requeued,
  and once the other has finished it resumes in a new pod from its checkpoint;
- a node tainted for termination (a spot reclaim notice) stops the attempt without using a
  retry, and the run resumes from its checkpoint once the node is back;
- a cancel deletes the Job: its pod and Kueue's admission go, the run is cancelled;
- an image the registry does not have fails the run with the kubelet's reason
  (``ImagePullBackOff: …``), not a hung phase.

GPUs are emulated: ``nvidia.com/gpu`` is an extended resource of the real node.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from kubernetes import client

from taugrid.render import naming
from tests import weed_s3 as ws
from tests.hub import region as rg
from tests.k8s import kube_region, pod_region, realnode, registry

pytestmark = pytest.mark.k8s


def _wait(c: httpx.Client, run_id: str, pred: Any) -> dict[str, Any]:
    return rg.wait_run(c, run_id, pred, timeout=240)


def test_a_job_runs_in_a_pod_resumes_in_a_new_one_and_its_outputs_come_back(
    region: pod_region.PodRegion, weed_s3: ws.WeedS3
) -> None:
    server, ref, prefix = region.server, region.ref, region.prefix
    with server.http() as c:
        text = pod_region.tau_yaml(ref, pod_region.CRASH_AND_RESUME, retries=1)
        run = rg.submit_run(c, text)
        done = _wait(c, run["id"], rg.finished)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
    base = f"{prefix}/{kube_region.WORKSPACE}/runs/{run['id']}"
    pod_region.check_crash_and_resume(done, metrics, log, weed_s3.filesystem(), base)
    assert realnode.NAME in json.dumps(done["attempts"][1])  # it ran on the real node


def test_a_node_tainted_for_termination_requeues_its_run_and_it_resumes_from_its_checkpoint(
    region: pod_region.PodRegion, kube: client.ApiClient
) -> None:
    """A reclaim notice on Kubernetes: the node termination taint GKE sets. The agent's
    checker marks the node ``reclaim``, the hub stops the attempt without using a retry
    (the agent deletes the Job; the pod's SIGTERM is the job's notice: podsync writes
    ``NOTICE``, the quickstart checkpoints on it), and once the node is back (the taint
    gone, the checker's mark cleared) the run resumes from the notice's checkpoint: no
    step is trained twice."""
    server, ref = region.server, region.ref
    core = client.CoreV1Api(kube)
    before = core.read_node(realnode.NAME).spec.taints or []
    notice = client.V1Taint(key="cloud.google.com/impending-node-termination", effect="NoSchedule")
    # long enough that the notice lands mid-run however late the hub sees the checkpoint
    args = "--steps 100 --checkpoint-every 10 --step-sleep 0.2"
    with server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(ref, args, retries=0))
        _wait(c, run["id"], _checkpointed)
        core.patch_node(realnode.NAME, {"spec": {"taints": [*before, notice]}})
        try:
            _wait(c, run["id"], lambda r: r["attempts"][0]["failure_kind"] == "reclaim")
        finally:
            core.patch_node(realnode.NAME, {"spec": {"taints": before}})
        done = _wait(c, run["id"], rg.finished)
        events = [e["kind"] for e in c.get(f"/v1/runs/{run['id']}/events").json()]
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
    assert done["state"] == "succeeded", (done["reason"], done["attempts"])
    first, second = done["attempts"]
    assert first["reason"].startswith("Reclaimed: spot reclaim notice: taint "), first
    assert "reclaim_notice" in events
    steps = [(m["attempt"], int(m["step"])) for m in metrics if m["name"] == "loss"]
    resumed = int((second["resumed_from"] or "-0").rsplit("-", 1)[1])
    # the notice's checkpoint is the first attempt's last step, and its metric line (which
    # the stopped pod stored in its grace period) reached the hub: nothing lost
    assert resumed == max(s for a, s in steps if a == 1), (second, steps)
    steps2 = [s for a, s in steps if a == 2]
    assert steps2 and min(steps2) == resumed + 1, (second, steps)  # no step trained twice
    assert max(steps2) == 100, steps2


def test_cancel_deletes_the_pod_and_kueue_releases(
    region: pod_region.PodRegion, kube: client.ApiClient
) -> None:
    server, ref = region.server, region.ref
    args = "--steps 100000 --checkpoint-every 50 --step-sleep 0.2"
    with server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(ref, args))

        def stepping(r: dict[str, Any]) -> bool:
            got = c.get(f"/v1/runs/{run['id']}/metrics").json()
            return r["state"] == "running" and bool(got)

        _wait(c, run["id"], stepping)
        assert c.post(f"/v1/runs/{run['id']}/cancel").status_code == 200
        done = _wait(c, run["id"], rg.finished)
    assert done["state"] == "cancelled", done["reason"]
    label = f"{naming.LABEL_RUN_ID}={naming.label_value(run['id'])}"
    pods = client.CoreV1Api(kube).list_namespaced_pod(kube_region.WORKSPACE, label_selector=label)
    assert [p.metadata.name for p in pods.items] == []
    wls = client.CustomObjectsApi(kube).list_namespaced_custom_object(
        *kube_region.KUEUE, kube_region.WORKSPACE, "workloads"
    )["items"]
    assert not [w for w in wls if run["id"] in json.dumps(w["metadata"].get("labels", {}))]


def test_an_image_the_registry_lacks_fails_the_run_with_the_kubelets_reason(
    region: pod_region.PodRegion, images: registry.Registry
) -> None:
    server = region.server
    absent = f"{images.host}/taugrid/absent:0.0"
    with server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(absent, "--steps 5"))
        done = _wait(c, run["id"], rg.finished)
    assert done["state"] == "failed"
    assert "ImagePullBackOff" in done["reason"] and absent in done["reason"], done["reason"]


def _pods_of(kube: client.ApiClient, run_id: str) -> list[Any]:
    label = f"{naming.LABEL_RUN_ID}={naming.label_value(run_id)}"
    core = client.CoreV1Api(kube)
    return list(core.list_namespaced_pod(kube_region.WORKSPACE, label_selector=label).items)


def _checkpointed(r: dict[str, Any]) -> bool:
    attempts = r["attempts"]
    return bool(attempts) and (attempts[-1]["checkpoint_step"] or 0) >= 10


def test_a_pod_killed_mid_run_is_retried_and_resumes_from_its_checkpoint(
    region: pod_region.PodRegion, kube: client.ApiClient
) -> None:
    server, ref = region.server, region.ref
    args = "--steps 60 --checkpoint-every 10 --step-sleep 0.2"
    with server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(ref, args, retries=1))
        _wait(c, run["id"], _checkpointed)
        for pod in _pods_of(kube, run["id"]):
            client.CoreV1Api(kube).delete_namespaced_pod(
                pod.metadata.name, kube_region.WORKSPACE, grace_period_seconds=0
            )
        done = _wait(c, run["id"], rg.finished)
    assert done["state"] == "succeeded", (done["reason"], done["attempts"])
    first, second = done["attempts"]
    assert first["state"] == "failed", first
    assert int((second["resumed_from"] or "-0").rsplit("-", 1)[1]) >= 10, second


def test_a_preempted_run_is_requeued_and_resumes_from_its_checkpoint(
    region: pod_region.PodRegion,
) -> None:
    server, ref = region.server, region.ref
    args = "--steps 60 --checkpoint-every 10 --step-sleep 0.2"
    with server.http() as c:
        low = rg.submit_run(c, pod_region.tau_yaml(ref, args, gpus=4))
        _wait(c, low["id"], _checkpointed)
        high = rg.submit_run(c, pod_region.tau_yaml(ref, "--steps 10", gpus=4, priority="high"))
        done_high = _wait(c, high["id"], rg.finished)
        done_low = _wait(c, low["id"], rg.finished)
    assert done_high["state"] == "succeeded", done_high["reason"]
    assert done_low["state"] == "succeeded", (done_low["reason"], done_low["attempts"])
    first, second = done_low["attempts"]
    # the hub's admission (Kueue's semantics, across regions) preempts before the
    # cluster's Kueue would: the agent stops the Job, its pod gets SIGTERM
    assert first["failure_kind"] == "preemption", first
    assert first["reason"].startswith("Preempted: quota for " + high["id"]), first
    assert int((second["resumed_from"] or "-0").rsplit("-", 1)[1]) >= 10, second

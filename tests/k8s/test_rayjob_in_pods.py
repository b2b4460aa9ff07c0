"""A RayJob executes on Ray in pods on the real node and comes back (issue 31 item 3,
Ray objects).

The region of ``test_run_in_pods.py`` (a real hub on SQLite, the region's agent outside
the cluster, an S3 record store on the real SeaweedFS, pods on the host network of the
real node), with KubeRay's operator. A ``tau run`` of the quickstart as a RayJob (the
default workload kind), on the project image pulled from the tier's registry:

- Kueue admits the RayJob; KubeRay makes its Ray cluster, a head and a GPU worker pod,
  which kube-scheduler binds to the real node; they start Ray on the node's address with
  the head's ports chosen for the run (``render.pods.ray_on_host_network``); the worker
  finds the head by the head Service's name (the tier's cluster DNS) and joins it;
- KubeRay's submitter pod submits the Ray job through the head's dashboard and follows
  its log (the run's log); Ray places the driver on the GPU worker, where
  ``agent.records.podsync`` fetches the code from the record in S3, runs it and stores
  metrics, checkpoints and artifacts there;
- the first attempt crashes on purpose after its checkpoint at step 20: the Ray job fails,
  the RayJob fails, the hub retries; the next attempt's Ray cluster (new pods, the same
  ports, bound once the old pods are gone) resumes from the record's checkpoint, and the
  run ends succeeded with its artifacts saved.

An interactive RayCluster of a run gets the run's code the same way: each Ray node's
init container (``podsync --prepare``) unpacks it from the record into the pod's scratch,
on the Ray processes' ``PYTHONPATH``; a Ray job submitted to the cluster's dashboard
imports the run's module from there.

When the RayJob's pods are deleted (a reclaim notice on the node), the driver gets its
notice from the Ray containers' preStop hook and its checkpoint is stored before Ray stops.

A RayJob on an image that pulls but cannot run Ray (the tier's busybox) crash-loops; the
run fails with the kubelet's ``CrashLoopBackOff`` and the container's exit.

GPUs are emulated: ``nvidia.com/gpu`` is an extended resource of the real node.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client

from taugrid.render import naming
from tests import weed_s3 as ws
from tests.hub import region as rg
from tests.k8s import controlplane, kube_region, oci, pod_region, realnode, registry

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(900), pytest.mark.usefixtures("kuberay")]


def _ray_pods(kube: client.ApiClient, run_id: str) -> dict[str, str]:
    """The run's Ray pods now: node type → node name."""
    label = f"{naming.LABEL_RUN_ID}={naming.label_value(run_id)}"
    pods = client.CoreV1Api(kube).list_namespaced_pod(kube_region.WORKSPACE, label_selector=label)
    return {
        p.metadata.labels["ray.io/node-type"]: p.spec.node_name
        for p in pods.items
        if "ray.io/node-type" in (p.metadata.labels or {}) and p.spec.node_name
    }


def test_a_rayjob_runs_on_ray_in_pods_resumes_and_its_outputs_come_back(
    region: pod_region.PodRegion, weed_s3: ws.WeedS3, kube: client.ApiClient
) -> None:
    server, ref, prefix = region.server, region.ref, region.prefix
    seen: dict[str, str] = {}
    with server.http() as c:
        text = pod_region.tau_yaml(ref, pod_region.CRASH_AND_RESUME, retries=1, kind="rayjob")
        run = rg.submit_run(c, text)

        def finished(r: dict[str, Any]) -> bool:
            seen.update(_ray_pods(kube, run["id"]))
            return rg.finished(r)

        # two Ray clusters one after the other on a loaded node: minutes each in CI
        done = rg.wait_run(c, run["id"], finished, timeout=600)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
        log = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]  # the submitter's: the job's
    base = f"{prefix}/{kube_region.WORKSPACE}/runs/{run['id']}"
    # the first attempt's crash line is in the run's log: the agent waits for the failed
    # RayJob's submitter to print the job's last lines before deleting it
    pod_region.check_crash_and_resume(done, metrics, log, weed_s3.filesystem(), base)
    assert seen == {"head": realnode.NAME, "worker": realnode.NAME}, seen
    _check_released(server, run["id"], kube)


def test_a_rayjobs_driver_gets_the_notice_when_its_pods_are_deleted(
    region: pod_region.PodRegion, weed_s3: ws.WeedS3, kube: client.ApiClient
) -> None:
    """The node tainted for termination (a spot reclaim): the agent deletes the RayJob.
    Its driver, the wrapper Ray placed on the GPU worker, is not the pod's main process:
    the Ray containers' preStop hook (``podsync --notice``) gives it the notice, the
    quickstart checkpoints on it and the wrapper stores that checkpoint before Ray stops.
    No checkpoint is periodic (every 100,000 steps): without the notice there is none."""
    server, ref, prefix = region.server, region.ref, region.prefix
    core = client.CoreV1Api(kube)
    before = core.read_node(realnode.NAME).spec.taints or []
    notice = client.V1Taint(key="cloud.google.com/impending-node-termination", effect="NoSchedule")
    args = "--steps 100000 --checkpoint-every 100000 --step-sleep 0.2"
    with server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(ref, args, kind="rayjob"))

        def stepping(r: dict[str, Any]) -> bool:
            return r["state"] == "running" and bool(c.get(f"/v1/runs/{r['id']}/metrics").json())

        rg.wait_run(c, run["id"], stepping, timeout=420)  # a Ray cluster in pods: minutes
        core.patch_node(realnode.NAME, {"spec": {"taints": [*before, notice]}})
        try:
            reclaimed = rg.wait_run(
                c, run["id"], lambda r: r["attempts"][0]["failure_kind"] == "reclaim", 240
            )
            base = f"{prefix}/{kube_region.WORKSPACE}/runs/{run['id']}"
            fs = weed_s3.filesystem()
            deadline = time.monotonic() + 120  # the wrapper stores it within the pod's grace
            while not fs.exists(f"{base}/checkpoints/latest"):
                assert time.monotonic() < deadline, (
                    reclaimed["attempts"],
                    _ray_pods(kube, run["id"]),
                )
                time.sleep(1)
        finally:
            core.patch_node(realnode.NAME, {"spec": {"taints": before}})
            c.post(f"/v1/runs/{run['id']}/cancel", json={})
    latest = fs.cat_file(f"{base}/checkpoints/latest").decode().strip()
    marker = json.loads(fs.cat_file(f"{base}/checkpoints/{latest}/_CHECKPOINT.json"))
    assert marker["attempt"] == 1 and int(latest.rsplit("-", 1)[1]) >= 1, marker
    _check_released(server, run["id"], kube)


def _check_released(server: Any, run_id: str, kube: client.ApiClient) -> None:
    """Once the run has released its GPUs, no pod of it is left (the agent deleted the
    finished RayJob; KubeRay's TTL is only a backstop) and its Kueue Workload goes with
    the RayJob (Kubernetes' garbage collector: bounded wait)."""
    with server.http() as c:
        rg.wait_run(c, run_id, lambda r: rg.phases(r).get("released") == "done", timeout=120)
    objects = client.CustomObjectsApi(kube)

    def gone() -> bool:
        wls = objects.list_namespaced_custom_object(
            *kube_region.KUEUE, kube_region.WORKSPACE, "workloads"
        )["items"]
        left = [w for w in wls if run_id in json.dumps(w["metadata"].get("labels", {}))]
        return not left and _ray_pods(kube, run_id) == {}

    deadline = time.monotonic() + 120
    while not gone():
        assert time.monotonic() < deadline, f"pods or a Workload of {run_id} left"
        time.sleep(1)


def test_a_rayclusters_ray_nodes_import_the_runs_code_from_the_record(
    region: pod_region.PodRegion, kube: client.ApiClient
) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    with region.server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(region.ref, "", kind="raycluster"))
        starting = ("queued", "admitted", "placed")
        up = rg.wait_run(c, run["id"], lambda r: r["state"] not in starting, timeout=300)
        assert up["state"] == "running", (up["state"], up["reason"])
        label = f"{naming.LABEL_RUN_ID}={naming.label_value(run['id'])}"
        core = client.CoreV1Api(kube)

        def head() -> Any:
            pods = core.list_namespaced_pod(kube_region.WORKSPACE, label_selector=label).items
            ready = [
                p
                for p in pods
                if (p.metadata.labels or {}).get("ray.io/node-type") == "head"
                and any(s.type == "Ready" and s.status == "True" for s in p.status.conditions or [])
            ]
            return ready[0] if ready else None

        pod = controlplane.wait_until("the RayCluster's head Ready", head, timeout_s=300)
        (ray,) = pod.spec.containers
        port = next(p.container_port for p in ray.ports if p.name == "dashboard")
        jobs = JobSubmissionClient(f"http://{pod.status.pod_ip}:{port}")
        code = "import train; print('tau-code-at', train.__file__)"
        job = _submit(jobs, f"python -c {code!r}")
        deadline = time.monotonic() + 180
        while jobs.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED):
            assert time.monotonic() < deadline, jobs.get_job_logs(job)
            time.sleep(1)
        logs = jobs.get_job_logs(job)
        assert "tau-code-at /tau/code/train.py" in logs, logs  # unpacked from the record
        assert c.post(f"/v1/runs/{run['id']}/cancel", json={}).status_code == 200
    _check_released(region.server, run["id"], kube)


def _submit(jobs: Any, entrypoint: str) -> str:
    """The Ray job's ID; while the head's job agent has not registered yet (a Ready head
    on a loaded node), Ray answers 500 "No available agent to submit job, please try again
    later": tried again, bounded."""
    deadline = time.monotonic() + 180
    while True:
        try:
            return str(jobs.submit_job(entrypoint=entrypoint))
        except RuntimeError as exc:
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(2)


def test_an_image_without_ray_crash_loops_and_fails_the_run_with_the_kubelets_reason(
    region: pod_region.PodRegion, images: registry.Registry
) -> None:
    """``runtime.image`` names an image that pulls but cannot run Ray (the tier's busybox:
    no ``bash``, ``python`` or ``ray``): the kubelet restarts the Ray head's container and
    backs off; once it has looped ``kubernetes.CRASH_RESTARTS`` times the run fails with the
    kubelet's ``CrashLoopBackOff``, the pod and container, and how it last exited,
    instead of a phase that never moves."""
    ref = images.push(oci.archives()[1], "taugrid/no-ray:test")
    with region.server.http() as c:
        run = rg.submit_run(c, pod_region.tau_yaml(ref, "--steps 5", kind="rayjob"))
        done = rg.wait_run(c, run["id"], rg.finished, timeout=360)
    reason = done["reason"]
    assert done["state"] == "failed", (done["state"], reason)
    assert "CrashLoopBackOff" in reason and f"pod {kube_region.WORKSPACE}/" in reason, reason
    # KubeRay starts Ray with /bin/bash, which busybox lacks: runc's own words come back
    assert "it exited with code 128 (StartError)" in reason, reason
    assert '"/bin/bash": stat /bin/bash: no such file or directory' in reason, reason

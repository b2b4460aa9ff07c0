"""A Kubernetes region that goes silent fails over to a Ray region, which resumes from
the checkpoint the pod stored in S3 (issue 31 item 6).

One hub (lease 3 s, grace 12 s), two regions of the same emulated GPU model and an S3
record store (the real SeaweedFS): ``k8s-east``, whose pods run on the real node
(``tests/k8s/pod_region.py``), and ``ray-west``, a real local Ray cluster on
``RAY_IP`` whose agent starts only once the run is on the real node (so the run goes
there first). The Kubernetes region's agent stops while the run's pod keeps running:
past the grace the hub ends the attempt as lost contact, moves the record's fence and
places the run on the Ray region, whose agent stages the checkpoint the pod uploaded;
the run ends succeeded there, from that step on. It is not *Released* while nobody has
seen the silent region's GPUs freed; when that region's agent comes back it stops the
fenced pod and the run is released. The pod, still running on a cluster no
agent watches, is fenced: its uploads are refused from then on (the record's
checkpoints of attempt 1 all predate the end of that attempt).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.backends.ray import ray_local
from tests import weed_s3 as ws
from tests.hub import region as rg
from tests.k8s import kube_region, pod_region

pytestmark = pytest.mark.k8s

RAY_IP = "127.0.21.252"  # outside the control plane's 127.0.21.2-250
ARGS = "--steps 300 --checkpoint-every 20 --step-sleep 0.1"
"""Long enough that the pod's job outlives the lease plus the grace after the agent stops."""


@pytest.fixture(scope="module")
def regions(
    pod_cluster: pod_region.PodCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[pod_region.PodRegion, ray_local.LocalRayCluster, Path]]:
    """The hub with both regions (the Kubernetes one's agent running) and the Ray
    cluster of the other, whose agent the test starts."""
    tmp = Path(tmp_path_factory.mktemp("failover"))
    shape = ray_local.NodeShape(ip=RAY_IP, num_gpus=2, num_cpus=4, accelerator="EMU")
    ray = rg.start_ray([RAY_IP], tmp / "ray", [shape])  # raylets wait 120 s: RAY_NODE_ENV
    try:
        (tmp / "hub").mkdir()
        cfg = {"lease_s": 3.0, "grace_s": 12.0}
        with pod_region.pod_region(pod_cluster, tmp / "hub", ray=True, **cfg) as r:
            yield r, ray, tmp
    finally:
        ray.stop()


def _on_kube_with_checkpoint(run: dict[str, object]) -> bool:
    attempts = run["attempts"]
    assert isinstance(attempts, list)
    a = attempts[0] if attempts else None
    return bool(a and a["cluster_id"] == kube_region.CLUSTER and (a["checkpoint_step"] or 0) >= 40)


def _ended(run: dict[str, object]) -> bool:
    return run["state"] in ("succeeded", "failed", "cancelled") and rg.phases(run)[
        "artifacts_saved"
    ] in ("done", "failed", "skipped")


@pytest.mark.timeout(600)  # the pod's first steps, the lease + grace, then Ray's resume
def test_a_silent_kubernetes_region_fails_over_to_ray_from_the_pods_checkpoint(
    regions: tuple[pod_region.PodRegion, ray_local.LocalRayCluster, Path], weed_s3: ws.WeedS3
) -> None:
    region, ray, tmp = regions
    text = pod_region.tau_yaml(region.ref, ARGS, 1, retry_on="lost_contact").replace(
        "name: pods-quickstart", "name: fo"
    )
    with region.server.http() as c:
        run = rg.submit_run(c, text)
        rg.wait_run(c, run["id"], _on_kube_with_checkpoint, timeout=240)
        ray_agent = rg.AgentThread(
            region.server, ray, tmp / "ray-agent", cluster_id=pod_region.RAY_REGION
        ).start()
        try:
            region.agent.stop()  # the Kubernetes region goes silent; its pod runs on
            done = rg.wait_run(c, run["id"], _ended, timeout=240)
            metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
            events = c.get(f"/v1/runs/{run['id']}/events").json()
        finally:
            ray_agent.stop()
        assert done["state"] == "succeeded", (done["reason"], done["attempts"])
        # nobody has seen the silent region's GPUs freed: the run is not Released ...
        assert rg.phases(done)["released"] == "active"
        back = kube_region.KubeAgent(
            region.server, tmp / "hub" / "platform.yaml", tmp / "hub" / "agent"
        )
        try:  # ... until its agent is back, stops the fenced pod and says so
            released = rg.wait_run(c, run["id"], rg.finished, timeout=120)
        finally:
            back.stop()
    assert released["attempts"][0]["released"], released["attempts"][0]
    first, second = done["attempts"][:2]
    assert first["cluster_id"] == kube_region.CLUSTER, first
    assert first["failure_kind"] == "lost_contact", first
    assert second["cluster_id"] == pod_region.RAY_REGION and second["resumed_from"], second
    # the image its pods ran is not used in the Ray region, and the run says so
    unused = [e["payload"]["cluster"] for e in events if e["kind"] == "image_not_used"]
    assert unused == [pod_region.RAY_REGION], unused
    fs = weed_s3.filesystem()
    base = f"{region.prefix}/{kube_region.WORKSPACE}/runs/{run['id']}"
    ckpt = f"{base}/checkpoints/{second['resumed_from']}/_CHECKPOINT.json"
    resumed = json.loads(fs.cat_file(ckpt))
    assert resumed["attempt"] == 1  # written in the pod, uploaded from the pod
    steps2 = [m["step"] for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    assert min(steps2) == resumed["step"] + 1  # the Ray region went on from there
    ended = float(first["ended_at"])
    for path in fs.glob(f"{base}/checkpoints/step-*/_CHECKPOINT.json"):
        marker = json.loads(fs.cat_file(path))
        assert marker["attempt"] != 1 or marker["created_at"] <= ended, marker

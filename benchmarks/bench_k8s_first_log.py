"""Kubernetes path (issue 31): time from ``tau run`` to the first line the run's command
prints in its pod on the real node, against applying the same Job (or RayJob) by hand.

The tier's real node (kubelet, containerd, runc; ``tests/k8s/realnode.py``) joins a test
control plane with Kueue; the project image is pulled from the tier's registry and the
record store is the real SeaweedFS (``tests/k8s/pod_region.py``, the setting of
``tests/k8s/test_run_in_pods.py``). The command is a script printing one line, then
sleeping.

- **through TauGrid**: ``POST /v1/runs`` (what ``tau run`` sends) to a real hub; its agent
  applies the Job (podsync around the command); the clock stops when the hub's
  ``/v1/runs/<id>/logs`` (what ``tau run logs`` reads) has the line;
- **by hand**: the same Job object (read back from the cluster, renamed, TauGrid's labels
  removed) created with the Kubernetes client after the record's fence is set to its
  attempt (as the hub does); the clock stops when the pod's log (``pods/log``, what
  ``kubectl logs`` reads) has the line.

Both include Kueue admission, kube-scheduler, the kubelet starting the container
(image already on the node) and podsync fetching the code from S3; the difference is the
hub (queue, placement), the agent (sync interval 0.3 s, applies, reading the pod log into
the record). Each sample is cancelled/deleted and its pod gone before the next.

``--kind rayjob``: the run is a RayJob (the default workload kind): KubeRay starts a Ray
head and a GPU worker on the real node, its submitter pod submits the Ray job and follows
its log (the run's log, and what the by-hand clock reads), the driver runs under podsync
on the worker. Skipped (exit 0, a message) when the binaries, the image or weed are
missing, and with ``--quick`` unless ``TAU_TEST_K8S=1``.

    python -m benchmarks.bench_k8s_first_log [--quick] [--reps N] [--no-write]
        [--kind job|rayjob]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks import report

__all__ = ["main"]

MARK = "tau-bench: first line"
SCRIPT = f"import time\nprint({MARK!r}, flush=True)\ntime.sleep(600)\n"


def _until(what: str, found: Callable[[], bool], timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while not found():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(0.05)
    return time.perf_counter()


def _through_tau(
    region: Any, code: Path, kube: Any, i: int, kind: str
) -> tuple[float, dict[str, Any]]:
    from kubernetes import client

    from taugrid.render import naming
    from tests.hub import region as rg
    from tests.k8s import kube_region, pod_region

    text = pod_region.tau_yaml(region.ref, "", kind=kind).replace("train.py", "main.py")
    text = text.replace("name: pods-quickstart", f"name: first-log-{i}")
    with region.server.http() as c:
        start = time.perf_counter()
        run_id = rg.submit_run(c, text, code)["id"]

        def logged() -> bool:
            return MARK in c.get(f"/v1/runs/{run_id}/logs").json()["text"]

        took = _until("the line in tau run logs", logged) - start
        name, ns = naming.object_name(run_id), kube_region.WORKSPACE
        if kind == "rayjob":
            obj = client.CustomObjectsApi(kube).get_namespaced_custom_object(
                "ray.io", "v1", ns, "rayjobs", name
            )
        else:
            obj = kube.sanitize_for_serialization(
                client.BatchV1Api(kube).read_namespaced_job(name, ns)
            )
        c.post(f"/v1/runs/{run_id}/cancel", json={})
        rg.wait_run(c, run_id, rg.finished, timeout=300)
    return took, dict(obj)


def _hand_rayjob(job: dict[str, Any], name: str) -> dict[str, Any]:
    """The RayJob as a user would write it: no TauGrid labels on it or its pods."""
    from taugrid.render import naming
    from taugrid.render import pods as render_pods

    spec = copy.deepcopy(job["spec"])
    spec["suspend"] = True
    for tpl in list(render_pods.pod_templates({"spec": spec})):
        labels = tpl["metadata"].get("labels") or {}
        own = {k: v for k, v in labels.items() if not k.startswith(("taugrid.io/", "ray.io/"))}
        tpl["metadata"] = {"labels": {**own, "bench": name}}
    return {
        "apiVersion": job["apiVersion"],
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "labels": {naming.QUEUE_LABEL: job["metadata"]["labels"][naming.QUEUE_LABEL]},
        },
        "spec": spec,
    }


def _hand_job(job: dict[str, Any], name: str) -> dict[str, Any]:
    """The Job as a user would write it: no TauGrid or controller labels, no selector."""
    from taugrid.render import naming

    template = job["spec"]["template"]
    labels = {
        k: v
        for k, v in (template["metadata"].get("labels") or {}).items()
        if not k.startswith(("taugrid.io/", "batch.kubernetes.io/", "kueue.x-k8s.io/"))
        and k not in ("controller-uid", "job-name")
    }
    spec = {k: v for k, v in job["spec"].items() if k not in ("selector", "manualSelector")}
    spec["template"] = {**template, "metadata": {"labels": {**labels, "bench": name}}}
    spec["suspend"] = True
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {naming.QUEUE_LABEL: job["metadata"]["labels"][naming.QUEUE_LABEL]},
        },
        "spec": spec,
    }


def _fence(weed: Any, prefix: str, job: dict[str, Any]) -> None:
    """The record's FENCE set to the object's attempt, as the hub sets it for an attempt."""
    from taugrid.render import pods as render_pods

    containers = [c for s in render_pods.pod_specs(job) for c in s["containers"]]
    env = next(
        c["env"]
        for c in containers
        if any(e["name"] == "TAU_POD_ATTEMPT" for e in c.get("env", []))
    )
    attempt = json.loads(next(e["value"] for e in env if e["name"] == "TAU_POD_ATTEMPT"))
    weed.filesystem().pipe(
        f"{prefix}/{attempt['record_key']}/FENCE", str(attempt["token"]).encode()
    )


def _by_hand(kube: Any, weed: Any, prefix: str, obj: dict[str, Any], i: int) -> float:
    from kubernetes import client

    from tests.k8s import kube_region

    ns, name = kube_region.WORKSPACE, f"hand-{i}"
    core = client.CoreV1Api(kube)
    rayjob = obj["kind"] == "RayJob"
    _fence(weed, prefix, obj)
    start = time.perf_counter()
    if rayjob:
        rayjobs = ("ray.io", "v1", ns, "rayjobs")
        client.CustomObjectsApi(kube).create_namespaced_custom_object(
            *rayjobs, _hand_rayjob(obj, name)
        )
    else:
        client.BatchV1Api(kube).create_namespaced_job(ns, _hand_job(obj, name))
    driver = "ray-job-submitter" if rayjob else None  # whose log has the driver's output

    def logged() -> bool:
        for pod in core.list_namespaced_pod(ns, label_selector=f"bench={name}").items:
            names = [c.name for c in pod.spec.containers]
            if driver is not None and driver not in names:
                continue
            with contextlib.suppress(client.ApiException):
                text = core.read_namespaced_pod_log(pod.metadata.name, ns, container=driver)
                if MARK in (text or ""):
                    return True
        return False

    try:
        took = _until("the line in the pod's log", logged) - start
    finally:
        if rayjob:
            client.CustomObjectsApi(kube).delete_namespaced_custom_object(
                *rayjobs, name, propagation_policy="Background"
            )
        else:
            client.BatchV1Api(kube).delete_namespaced_job(name, ns, propagation_policy="Background")
    _until(
        "its pods gone",
        lambda: not core.list_namespaced_pod(ns, label_selector=f"bench={name}").items,
    )
    return took


@contextlib.contextmanager
def _cluster(work: Path) -> Iterator[tuple[Any, Any, Any]]:
    """Control plane with Kueue, a registry, the real node and weed: (kube, region, weed)."""
    from kubernetes import config

    from tests import weed_s3 as ws
    from tests.k8s import controlplane, crds, operators, pod_region, realnode, registry

    weed = ws.WeedS3(ws.weed_binary(), work / "weed")
    weed.start()
    try:
        with (
            controlplane.ControlPlane(bindir=controlplane.bin_dir(), workdir=work / "cp") as cp,
            registry.Registry(realnode.IP, work / "registry") as reg,
            realnode.RealNode(cp, work / "node", registries=(reg.host,)),
        ):
            kube = config.new_client_from_config(config_file=str(cp.kubeconfig))
            for name in ("kueue", "kuberay"):
                crds.install(kube, crds.crd_dir(cp.bindir, name))
            operators.start_kueue(cp, kube)
            operators.start_kuberay(cp)
            (work / "hub").mkdir()
            cluster = pod_region.PodCluster(kube, cp.kubeconfig, reg, weed)
            with pod_region.pod_region(cluster, work / "hub") as region:
                yield kube, region, weed
            kube.close()
    finally:
        weed.stop()


def _measure(reps: int, kind: str) -> tuple[float, list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        code = work / "code"
        code.mkdir()
        (code / "main.py").write_text(SCRIPT)
        tau: list[float] = []
        hand: list[float] = []
        with _cluster(work) as (kube, region, weed):
            # the node pulls the image
            first, _obj = _through_tau(region, code, kube, reps, kind)
            print(f"first run (image pull): {first:.2f} s", flush=True)
            for i in range(reps):
                took, obj = _through_tau(region, code, kube, i, kind)
                tau.append(took)
                hand.append(_by_hand(kube, weed, region.prefix, obj, i))
                print(f"rep {i}: tau {tau[-1]:.2f} s, by hand {hand[-1]:.2f} s", flush=True)
    return first, tau, hand


_TITLES = {
    "job": "## Kubernetes: tau run to the first log line from the pod",
    "rayjob": "## Kubernetes: a RayJob, tau run to the first log line of its Ray job",
}
_PATHS = {
    "job": ("hub → agent → Job; podsync", "the same Job created by hand → `kubectl logs`"),
    "rayjob": (
        "hub → agent → RayJob; KubeRay's head, worker and submitter; podsync as the driver",
        "the same RayJob created by hand → `kubectl logs` of its submitter",
    ),
}


def _section(first: float, tau: list[float], hand: list[float], kind: str) -> str:
    mt, mh = statistics.median(tau), statistics.median(hand)
    ours, theirs = _PATHS[kind]
    flag = "" if kind == "job" else f" --kind {kind}"
    return (
        f"{_TITLES[kind]}\n\n"
        f"`python -m benchmarks.bench_k8s_first_log --reps {len(tau)}{flag}` on the real node "
        "(docs/kubernetes.md;\n2 loaded cores: control plane, Kueue, KubeRay, kubelet, "
        "containerd, SeaweedFS, hub and agent on\nthe same machine). Clock from the request to "
        "the line the command prints, as `tau run\nlogs` shows it (through TauGrid) and as the "
        "pod's log shows it (by hand).\n\n"
        "| path | median (s) | min (s) | max (s) |\n|---|---|---|---|\n"
        f"| `tau run` → `tau run logs` ({ours}) | {mt:.2f} | {min(tau):.2f} | {max(tau):.2f} |\n"
        f"| {theirs} | {mh:.2f} | {min(hand):.2f} | {max(hand):.2f} |\n\n"
        f"Ratio (tau / by hand, medians): **{mt / mh:.2f}**. The samples follow one "
        f"unmeasured run\nwhose pods made the node pull the image (1.29 GiB from the tier's "
        f"registry): {first:.1f} s\nthrough TauGrid.\n"
    )


def _missing() -> list[str]:
    import subprocess

    from tests import weed_s3 as ws
    from tests.k8s import controlplane, project_image, realnode, registry

    bindir = controlplane.bin_dir()
    absent = controlplane.missing(bindir, (*controlplane.CORE, "kueue", "kuberay"))
    absent += realnode.missing(bindir) + registry.missing()
    if project_image.archive_path() is None:
        absent.append("the project image (make image)")
    out = subprocess.run([str(ws.BUILD_SCRIPT), "--print-bin"], capture_output=True, text=True)
    if not os.access(out.stdout.strip() or "/nonexistent", os.X_OK):
        absent.append("weed (s3/build.sh)")
    return absent


def _kind_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", choices=sorted(_TITLES), default="job", help="the workload kind")


def main() -> None:
    args = report.k8s_args(__doc__ or "", _missing, _kind_arg)
    if args is None:
        return
    first, tau, hand = _measure(1 if args.quick else args.reps, args.kind)
    section = _section(first, tau, hand, args.kind)
    print(section)
    if not (args.quick or args.no_write):
        report.write_section(section)


if __name__ == "__main__":
    main()

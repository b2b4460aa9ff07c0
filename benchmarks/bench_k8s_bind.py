"""Kubernetes path (issue 12): time from ``tau run`` to the run's GPU pod bound, against
creating the same RayJob by hand, on the test control plane (``make test-k8s``'s:
kube-apiserver, controller-manager, scheduler, kwok GPU nodes, Kueue, KubeRay, all
built from source by ``k8s/build.sh``).

- **through TauGrid**: ``POST /v1/runs`` (what ``tau run`` sends) to a real hub whose
  ``backend: kubernetes`` region's agent applies the rendered RayJob; the clock stops
  when kube-scheduler has bound the RayJob's GPU worker pod;
- **by hand**: the same RayJob object (read back from the cluster, renamed) created with
  the Kubernetes client; same stop.

Kueue admission, KubeRay's RayCluster and kube-scheduler's binding are in both; the
difference is the hub (queue, placement), the agent's sync interval (0.3 s here) and its
applies. Each sample is cancelled/deleted (quota and pods released) before the next.
Skipped (exit 0, a message) when the control-plane binaries are not built, and with
``--quick`` unless ``TAU_TEST_K8S=1`` (the control plane takes minutes to start).
``--quick`` (CI smoke): one sample each, documentation left alone.

    python -m benchmarks.bench_k8s_bind [--quick] [--reps N] [--no-write]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report

__all__ = ["main"]

NS = "ml"


def _bound_at(kube: Any, selector: str, timeout_s: float = 300) -> float:
    from kubernetes import client

    core = client.CoreV1Api(kube)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NS, label_selector=selector).items
        if any(p.spec.node_name and "worker" in p.metadata.name for p in pods):
            return time.perf_counter()
        time.sleep(0.1)
    raise TimeoutError(f"no GPU worker pod bound for {selector} in {timeout_s:.0f}s")


def _gone(kube: Any, selector: str) -> None:
    from kubernetes import client

    from tests.k8s import controlplane

    core = client.CoreV1Api(kube)
    controlplane.wait_until(
        f"pods of {selector} gone",
        lambda: not core.list_namespaced_pod(NS, label_selector=selector).items,
        timeout_s=300,
    )


def _through_tau(server: Any, kube: Any, i: int) -> tuple[float, dict[str, Any], str]:
    from kubernetes import client

    from taugrid.render import naming
    from tests.hub import region as rg
    from tests.k8s import kube_region

    with server.http() as c:
        start = time.perf_counter()
        run_id = rg.submit_run(c, kube_region.tau_yaml(f"bench-{i}", gpus=1), rg.QUICKSTART)["id"]
        sel = f"{naming.LABEL_RUN_ID}={naming.label_value(run_id)}"
        took = _bound_at(kube, sel) - start
        rayjob = client.CustomObjectsApi(kube).get_namespaced_custom_object(
            "ray.io", "v1", NS, "rayjobs", naming.object_name(run_id)
        )
        c.post(f"/v1/runs/{run_id}/cancel", json={})
        rg.wait_run(c, run_id, rg.finished, timeout=300)
    _gone(kube, sel)
    return took, rayjob, sel


def _without_kueue(node: Any) -> Any:
    """``node`` without what Kueue injected into the admitted RayJob's pod templates
    (its ``kueue.x-k8s.io/*`` annotations and labels name that Workload)."""
    if isinstance(node, list):
        return [_without_kueue(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("annotations", "labels") and isinstance(value, dict):
            value = {k: v for k, v in value.items() if not k.startswith("kueue.x-k8s.io/")}
        out[key] = _without_kueue(value)
    return out


def _by_hand(kube: Any, template: dict[str, Any], sel: str, i: int) -> float:
    """The tau run's RayJob (its pod templates keep their labels, so ``sel`` finds the
    pods; the tau run's are gone by now) created under a new name."""
    from kubernetes import client

    from taugrid.render import naming

    name = f"hand-{i}"
    obj = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": {naming.QUEUE_LABEL: NS}},
        "spec": {**_without_kueue(template["spec"]), "suspend": True},
    }
    custom = client.CustomObjectsApi(kube)
    start = time.perf_counter()
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", obj)
    took = _bound_at(kube, sel) - start
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name)
    _gone(kube, sel)
    return took


def _measure(reps: int) -> tuple[list[float], list[float]]:
    from kubernetes import client, config

    from tests.k8s import controlplane, crds, kube_region, nodes, operators

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with controlplane.ControlPlane(bindir=controlplane.bin_dir(), workdir=work) as cp:
            kube = config.new_client_from_config(config_file=str(cp.kubeconfig))
            core = client.CoreV1Api(kube)
            for node in nodes.DEFAULT_NODES:
                core.create_node(node.manifest())
            for name in ("kueue", "kuberay"):
                crds.install(kube, crds.crd_dir(cp.bindir, name))
            operators.start_kueue(cp, kube)
            operators.start_kuberay(cp)
            kube_region.data_volume(kube)
            tau: list[float] = []
            hand: list[float] = []
            with kube_region.region(work, cp.kubeconfig) as (server, _agent):
                for i in range(reps):
                    took, rayjob, sel = _through_tau(server, kube, i)
                    tau.append(took)
                    hand.append(_by_hand(kube, rayjob, sel, i))
                    print(f"rep {i}: tau {tau[-1]:.2f} s, by hand {hand[-1]:.2f} s", flush=True)
            kube.close()
    return tau, hand


def _section(tau: list[float], hand: list[float]) -> str:
    mt, mh = statistics.median(tau), statistics.median(hand)
    return (
        "## Kubernetes: tau run to pod bound\n\n"
        f"`python -m benchmarks.bench_k8s_bind --reps {len(tau)}` on the test control plane\n"
        "(docs/kubernetes.md; 2 loaded cores, control plane, Kueue, KubeRay, hub and agent "
        "on the\nsame machine). Clock from the request to the RayJob's GPU worker pod bound "
        "by\nkube-scheduler.\n\n"
        "| path | median (s) | min (s) | max (s) |\n|---|---|---|---|\n"
        f"| `tau run` (hub → agent → server-side apply) | {mt:.2f} | {min(tau):.2f} | "
        f"{max(tau):.2f} |\n"
        f"| RayJob created by hand | {mh:.2f} | {min(hand):.2f} | {max(hand):.2f} |\n\n"
        f"Ratio (tau / by hand, medians): **{mt / mh:.2f}**.\n"
    )


def _missing() -> list[str]:
    from tests.k8s import controlplane

    return controlplane.missing(controlplane.bin_dir(), (*controlplane.CORE, "kueue", "kuberay"))


def main() -> None:
    args = report.k8s_args(__doc__ or "", _missing)
    if args is None:
        return
    tau, hand = _measure(1 if args.quick else args.reps)
    section = _section(tau, hand)
    print(section)
    if not (args.quick or args.no_write):
        report.write_section(section)


if __name__ == "__main__":
    main()

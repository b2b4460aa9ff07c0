"""Operator (issue 13): reconcile time of TauWorkspaces on the test control plane
(``make test-k8s``'s kube-apiserver, controller-manager, scheduler, kwok, with Kueue's
manager validating what the operator writes), the operator running as
``python -m taugrid.operator`` beside it.

- **one workspace**: create a TauWorkspace, clock stops at ``status.phase`` Ready
  (Namespace, ServiceAccount, 2 RoleBindings, Role, PVC, LocalQueue applied); median of
  ``--reps`` workspaces created one after the other;
- **N workspaces at once** (default 100): all created back to back, clock stops when
  the last is Ready.

Skipped (exit 0, a message) when the control-plane binaries are not built, and with
``--quick`` unless ``TAU_TEST_K8S=1`` (the control plane takes minutes to start).
``--quick``: one workspace and 10 at once, documentation left alone.

    python -m benchmarks.bench_operator [--quick] [--reps N] [--many N] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report

__all__ = ["main"]

API = "taugrid.io/v1alpha1"


def _ready(kube: Any, names: set[str], timeout_s: float = 900) -> float:
    from kubernetes import client

    custom = client.CustomObjectsApi(kube)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        items = custom.list_cluster_custom_object("taugrid.io", "v1alpha1", "tauworkspaces")
        ready = {
            o["metadata"]["name"]
            for o in items["items"]
            if (o.get("status") or {}).get("phase") == "Ready"
        }
        if names <= ready:
            return time.perf_counter()
        time.sleep(0.05)
    raise TimeoutError(f"{len(names - ready)} workspace(s) not Ready in {timeout_s:.0f}s")


def _create(kube: Any, name: str) -> None:
    from tests.k8s import tau_operator

    spec = {"team": "bench", "members": ["alice", "bob"]}
    obj = {"apiVersion": API, "kind": "TauWorkspace", "metadata": {"name": name}, "spec": spec}
    tau_operator.create(kube, obj)


def _measure(reps: int, many: int) -> tuple[list[float], float, tuple[float, float]]:
    from kubernetes import client, config

    from taugrid.platform import crds as tau_crds
    from tests.k8s import controlplane, crds, operators, tau_operator

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with controlplane.ControlPlane(bindir=controlplane.bin_dir(), workdir=work) as cp:
            kube = config.new_client_from_config(config_file=str(cp.kubeconfig))
            crds.install(kube, crds.crd_dir(cp.bindir, "kueue"))
            operators.start_kueue(cp, kube)
            crds.create(kube, tau_crds.crd_definitions())
            team = {"apiVersion": API, "kind": "TauTeam", "metadata": {"name": "bench"}}
            tau_operator.create(kube, {**team, "spec": {}})
            load_before = os.getloadavg()[0]
            env = {"TAU_OPERATOR_RESYNC_S": "600"}  # measure the change handlers, not resync
            with tau_operator.running(cp.kubeconfig, work / "operator.log", env=env):
                tau_operator.phase(kube, "TauTeam", "bench")
                one: list[float] = []
                for i in range(reps):
                    start = time.perf_counter()
                    _create(kube, f"one-{i}")
                    one.append(_ready(kube, {f"one-{i}"}) - start)
                    print(f"workspace {i}: {one[-1]:.2f} s", flush=True)
                names = {f"many-{i}" for i in range(many)}
                start = time.perf_counter()
                for name in sorted(names):
                    _create(kube, name)
                all_ready = _ready(kube, names) - start
                print(f"{many} workspaces: {all_ready:.1f} s", flush=True)
            load = (load_before, os.getloadavg()[0])
            client.ApiClient.close(kube)
    return one, all_ready, load


def _section(one: list[float], many: int, total: float, load: tuple[float, float]) -> str:
    return (
        "## Operator: TauWorkspace reconcile time\n\n"
        f"`python -m benchmarks.bench_operator --reps {len(one)} --many {many}` on the test\n"
        "control plane (docs/kubernetes.md; 2 cores shared with other sessions, load average\n"
        f"{load[0]:.1f} before and {load[1]:.1f} after; control plane, Kueue and the operator on "
        "the same\nmachine). Clock from the TauWorkspace's create to its `status.phase` Ready "
        "(7 objects\napplied by server-side apply through Kueue's webhooks).\n\n"
        "| what | time (s) |\n|---|---|\n"
        f"| one workspace (median of {len(one)}) | {statistics.median(one):.2f} "
        f"(min {min(one):.2f}, max {max(one):.2f}) |\n"
        f"| {many} workspaces created at once, until the last is Ready | {total:.1f} "
        f"({many / total:.1f} workspaces/s) |\n"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--many", type=int, default=100)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args()
    from tests.k8s import controlplane

    if args.quick and os.environ.get("TAU_TEST_K8S") != "1":
        print("skipped: --quick starts no control plane unless TAU_TEST_K8S=1")
        return
    absent = controlplane.missing(controlplane.bin_dir(), (*controlplane.CORE, "kueue"))
    if absent:
        print(f"skipped: {', '.join(absent)} not built (k8s/build.sh)")
        return
    reps, many = (1, 10) if args.quick else (args.reps, args.many)
    one, total, load = _measure(reps, many)
    section = _section(one, many, total, load)
    print(section)
    if not (args.quick or args.no_write):
        report.write_section(section)


if __name__ == "__main__":
    main()

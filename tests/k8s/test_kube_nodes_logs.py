"""A ``backend: kubernetes`` region through a real hub and agent when the cluster's
parts fail or speak: a GPU node whose kubelet stops (kube-controller-manager's node
lifecycle controller marks it), the driver pod's log (served by kwok's "kubelet" through
the API server's ``pods/log``) in ``tau run logs``, and an API server that goes away
mid-run and comes back.

kwok is the kubelet here: "its kubelet stops" is kwok no longer posting that node's
status (``controlplane.KUBELET_STOPPED_LABEL``), and a container's log is the file kwok
serves for it (``ControlPlane.pod_log``, CRI log lines as the container runtime writes
them). Everything else — the NotReady condition and taints, binding, ``pods/log``, the
outage — is the real components'.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.cli import platform_env
from tests.hub import harness
from tests.k8s import controlplane, kube_region, nodes

pytestmark = pytest.mark.k8s

H100 = tuple(n.name for n in nodes.DEFAULT_NODES if n.pool == "h100")
UNREACHABLE = "node.kubernetes.io/unreachable"


def _cluster_row(server: harness.HubServer) -> dict[str, Any]:
    with server.http() as c:
        rows = c.get("/v1/clusters").json()
    return next((r for r in rows if r["id"] == kube_region.CLUSTER), {})


def _node_row(server: harness.HubServer, name: str) -> dict[str, Any]:
    nodes_now = (_cluster_row(server).get("report") or {}).get("nodes") or []
    return next((n for n in nodes_now if n["node_id"] == name), {})


def _kubelet(core: client.CoreV1Api, node: str, running: bool) -> None:
    """Stops (or starts again) kwok's status updates for ``node``."""
    label = None if running else "true"
    core.patch_node(node, {"metadata": {"labels": {controlplane.KUBELET_STOPPED_LABEL: label}}})


def _taint_keys(core: client.CoreV1Api, node: str) -> set[str]:
    return {t.key for t in core.read_node(node).spec.taints or []}


def _untainted(core: client.CoreV1Api, node: str) -> bool:
    return UNREACHABLE not in _taint_keys(core, node)


@pytest.mark.timeout(600)  # the node lifecycle controller's grace period, then two runs
def test_a_node_whose_kubelet_stops_is_not_ready_in_gpu_healthy_and_the_state_report_and_new_runs_avoid_it(  # noqa: E501
    hub: tuple[harness.HubServer, kube_region.KubeAgent],
    kube: client.ApiClient,
) -> None:
    server, _ = hub
    core = client.CoreV1Api(kube)
    first = kube_region.submit(server, kube_region.tau_yaml("on-x", gpus=8))
    second, stopped = "", []
    try:
        kube_region.wait_bound(server, first)
        (x,) = kube_region.workers(kube, first)
        y = next(n for n in H100 if n != x)
        _kubelet(core, x, running=False)
        stopped.append(x)
        # the node lifecycle controller (kube-controller-manager) marks it after its grace
        # period: Ready Unknown and the unreachable taints
        controlplane.wait_until(
            f"{x} tainted {UNREACHABLE}", lambda: UNREACHABLE in _taint_keys(core, x), 240
        )
        with server.http() as c:
            run = kube_region.wait(
                "GPU healthy failed",
                c,
                first,
                lambda r: kube_region.phase(r, "gpu_healthy")["status"] == "failed",
            )
        healthy = kube_region.phase(run, "gpu_healthy")
        assert healthy["source"] == f"Node {x}"
        assert (
            "not Ready (NodeStatusUnknown: Kubelet stopped posting node status" in healthy["reason"]
        )
        # the region's state report: the node not alive, the Node named with its problem
        # (the node lifecycle controller adds the NoExecute and NoSchedule taints in
        # separate passes, either first)
        no_schedule = f"{UNREACHABLE}=:NoSchedule"
        row = controlplane.wait_until(
            "the node not Ready and tainted NoSchedule in the state report",
            lambda: (r := _node_row(server, x)) and no_schedule in (r["problem"] or "") and r,
        )
        assert isinstance(row, dict)
        assert row["alive"] is False
        assert row["problem"].startswith(f"Node {x}: not Ready (NodeStatusUnknown")
        assert "; tainted " in row["problem"]
        assert row["gpus_free"] == 0
        # a new run goes to the other H100 node
        # (4 GPUs: a pod of an earlier test may hold some of the other node's GPUs)
        second = kube_region.submit(server, kube_region.tau_yaml("on-y", gpus=4))
        kube_region.wait_bound(server, second)
        assert kube_region.workers(kube, second) == {y}
    finally:
        # the kubelet back, Ready and untainted (later tests use the node), then cancel
        for node in stopped:
            _kubelet(core, node, running=True)
        for node in stopped:
            controlplane.wait_until(
                f"{node} untainted", functools.partial(_untainted, core, node), 240
            )
        # the first run may have failed already: its node is marked lost after a grace
        # period, and whether that lands before the cancel depends on timing
        for run_id in (first, second):
            if run_id:
                kube_region.cancel_and_wait_released(
                    server, kube, run_id, ended=("cancelled", "failed")
                )


def _driver_pod(kube: client.ApiClient, run_id: str) -> client.V1Pod | None:
    for pod in kube_region.run_pods(kube, run_id):
        names = {c.name for c in pod.spec.containers}
        if "ray-job-submitter" in names and pod.status.phase == "Running":
            return pod
    return None


def _write_container_log(path: Path, lines: list[str]) -> None:
    """CRI log lines, as the container runtime writes them (kwok serves this file)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    with path.open("a") as out:
        out.writelines(f"{now} stdout F {line}\n" for line in lines)


def _tau_env(server: harness.HubServer, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TAU_HOME": str(home),
        "TAU_HUB_URL": server.url,
        "TAU_TOKEN": server.admin_token,
        "COLUMNS": "200",
    }


def test_the_driver_pods_log_kwok_serves_through_pods_log_shows_in_tau_run_logs(
    hub: tuple[harness.HubServer, kube_region.KubeAgent],
    kube: client.ApiClient,
    control_plane: controlplane.ControlPlane,
    tmp_path: Path,
) -> None:
    server, _ = hub
    run_id = kube_region.submit(server, kube_region.tau_yaml("talks", gpus=1))
    marker = f"step 7 loss 0.25 {secrets.token_hex(4)}"
    try:
        kube_region.wait_bound(server, run_id)
        # KubeRay makes the submitter Job once the RayCluster is ready; kube-scheduler
        # binds its pod (labelled with the attempt) and kwok reports it Running
        pod = controlplane.wait_until(
            "the RayJob's submitter pod running", lambda: _driver_pod(kube, run_id)
        )
        assert isinstance(pod, client.V1Pod)
        _write_container_log(control_plane.pod_log, ["driver started", marker])
        # what `kubectl logs` gets: the API server asks kwok's kubelet server
        served = client.CoreV1Api(kube).read_namespaced_pod_log(
            pod.metadata.name, kube_region.WORKSPACE, container="ray-job-submitter"
        )
        assert marker in served, served
        env = _tau_env(server, tmp_path / "home")

        def logged() -> str:
            out = subprocess.run(
                [platform_env.TAU, "run", "logs", run_id],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            return out.stdout if marker in out.stdout else ""

        text = controlplane.wait_until("the driver's log in `tau run logs`", logged)
        assert "driver started" in str(text)
        assert " stdout F " not in str(text)  # the kubelet's text, not the runtime's file
    finally:
        kube_region.cancel_and_wait_released(server, kube, run_id)


def test_an_api_server_that_goes_away_mid_run_makes_the_region_unavailable_and_the_run_carries_on_when_it_returns(  # noqa: E501
    hub: tuple[harness.HubServer, kube_region.KubeAgent],
    kube: client.ApiClient,
    control_plane: controlplane.ControlPlane,
) -> None:
    server, _ = hub
    run_id = kube_region.submit(server, kube_region.tau_yaml("outlives", gpus=1))
    try:
        kube_region.wait_bound(server, run_id)
        running = set(control_plane.alive())
        control_plane.stop_apiserver()
        try:
            row = controlplane.wait_until(
                "the region unavailable",
                lambda: (r := _cluster_row(server)).get("state") == "unavailable" and r,
            )
            assert isinstance(row, dict)
            reason = row["report"]["health_reason"]
            assert "Kubernetes API server does not answer" in reason
            assert control_plane.url in reason
            with server.http() as c:
                run = c.get(f"/v1/runs/{run_id}").json()
            # nothing lost: the attempt is still the running one
            assert run["state"] == "running" and len(run["attempts"]) == 1
        finally:
            control_plane.start_apiserver()
        controlplane.wait_until(
            "the region back", lambda: _cluster_row(server).get("state") not in ("unavailable",)
        )
        # the same attempt carries on, still the agent's: a cancel now reaches its RayJob
        # and releases it (a RayJob that finishes for real: test_rayjob_in_pods.py)
        with server.http() as c:
            assert c.post(f"/v1/runs/{run_id}/cancel", json={}).status_code == 200
            run = kube_region.wait(
                "cancelled and released after the outage",
                c,
                run_id,
                lambda r: (
                    r["state"] == "cancelled"
                    and kube_region.phase(r, "released")["status"] == "done"
                ),
            )
        assert len(run["attempts"]) == 1
        assert kube_region.run_pods(kube, run_id) == []
        # every component rode the outage out (later tests use the same control plane)
        assert set(control_plane.alive()) == running
    except BaseException:
        with server.http() as c:
            c.post(f"/v1/runs/{run_id}/cancel", json={})
        raise

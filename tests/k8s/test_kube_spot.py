"""Spot capacity on a ``backend: kubernetes`` region of mixed pools: the hub places a run
on spot or on-demand capacity, and the agent keeps its pods there with a node affinity on
the ``taugrid.io/pool`` label, so kube-scheduler (real) binds a spot run's GPU pods to the
spot pool's node and never an on-demand run's pods (``render.pods.keep_to_capacity``).
The nodes are kwok nodes: binding is what is tested, no container runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from taugrid.render import naming
from tests.hub import harness
from tests.k8s import controlplane, kube_region, nodes

pytestmark = pytest.mark.k8s

SPOT = kube_region.SPOT_NODE
A100_ON_DEMAND = "a100-0"  # the pool's other node, a100-bad, is tainted unhealthy


@pytest.fixture(scope="module")
def spot_hub(
    tmp_path_factory: pytest.TempPathFactory,
    kube: client.ApiClient,
    kueue: controlplane.ControlPlane,
    kuberay: controlplane.ControlPlane,
    gpu_nodes: tuple[nodes.GpuNode, ...],
) -> Iterator[tuple[harness.HubServer, kube_region.KubeAgent]]:
    """The default region plus a spot A100 pool of one kwok node, removed after."""
    core = client.CoreV1Api(kube)
    core.create_node(SPOT.manifest())
    kube_region.data_volume(kube)
    tmp = Path(tmp_path_factory.mktemp("kube-spot-hub"))
    try:
        controlplane.wait_until(
            f"kwok node {SPOT.name} Ready",
            lambda: any(
                c.type == "Ready" and c.status == "True"
                for c in core.read_node(SPOT.name).status.conditions or []
            ),
        )
        with kube_region.region(tmp, kueue.kubeconfig, spot=True) as both:
            yield both
    finally:
        kube_region.sweep(kube)
        core.delete_node(SPOT.name)


def _pool_requirements(kube: client.ApiClient, run_id: str) -> list[list[dict[str, Any]]]:
    """The pool requirement of the RayJob's head and of its worker group, as applied."""
    job = kube_region.rayjob(kube, run_id)
    assert job is not None
    cluster = job["spec"]["rayClusterSpec"]
    specs = [cluster["headGroupSpec"]["template"]["spec"]]
    specs += [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    out = []
    for spec in specs:
        node = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        terms = (node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms"
        ) or [{}]
        out.append(
            [
                e
                for t in terms
                for e in t.get("matchExpressions", [])
                if e["key"] == naming.POOL_LABEL
            ]
        )
    return out


@pytest.mark.timeout(420)
def test_a_spot_run_binds_to_the_spot_pool_and_an_on_demand_run_never_does(
    spot_hub: tuple[harness.HubServer, kube_region.KubeAgent], kube: client.ApiClient
) -> None:
    server, _ = spot_hub
    spot_yaml = kube_region.tau_yaml("on-spot", gpus=4, model="A100-80G", capacity="spot")
    on_spot = kube_region.submit(server, spot_yaml)
    on_demand = ""
    try:
        kube_region.wait_bound(server, on_spot)
        assert kube_region.workers(kube, on_spot) == {SPOT.name}
        head, worker = _pool_requirements(kube, on_spot)
        assert head == []  # a CPU-only head may go anywhere; on-demand is the safer place
        assert worker == [{"key": naming.POOL_LABEL, "operator": "In", "values": [SPOT.pool]}]
        with server.http() as c:
            (attempt,) = c.get(f"/v1/runs/{on_spot}").json()["attempts"]
            assert attempt["placement"]["capacity"] == "spot"

        on_demand = kube_region.submit(
            server, kube_region.tau_yaml("on-demand", gpus=4, model="A100-80G")
        )
        kube_region.wait_bound(server, on_demand)
        assert kube_region.workers(kube, on_demand) == {A100_ON_DEMAND}
        not_spot = [{"key": naming.POOL_LABEL, "operator": "NotIn", "values": [SPOT.pool]}]
        assert _pool_requirements(kube, on_demand) == [not_spot, not_spot]
    finally:
        for run_id in (on_spot, on_demand):
            if run_id:
                kube_region.cancel_and_wait_released(server, kube, run_id)

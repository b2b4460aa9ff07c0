"""A spot run reclaimed twice on real Ray finishes with its result intact.

Two Ray nodes of one spot pool (``taugrid.io/pool=sp``), 4 emulated A100-80G each, a hub
on a platform.yaml that declares the pool spot, and the real agent with its node health
checker. A reclaim notice arrives through the checker's fault-injection seam (what a
cloud's metadata service would announce): the hub warns the job (the quickstart
checkpoints on ``tau.preemption_notice()`` and waits), the agent stops it after the
grace, and the run is placed on the other node from that checkpoint, without using a
retry (``max_retries: 0``). The first node is then "replaced" (its notice goes, so the
checker clears its mark) and the second reclaimed: the run comes back and finishes.
Every step is trained once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.agent.nodes import nodecheck
from taugrid.backends.ray import ray_local
from taugrid.render import naming
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]

IPS = ("127.0.0.236", "127.0.0.237", "127.0.0.238")
POOLS = ("sp", "sp", "od")
PLATFORM = pb.one_cluster(
    "local",
    [
        "{name: sp, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,"
        " memory_per_node: 128Gi, nodes: 2, cost_per_gpu_hour: 0.9, capacity: spot,"
        " reclaims_per_hour: 0.1}",
        "{name: od, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,"
        " memory_per_node: 128Gi, nodes: 1, cost_per_gpu_hour: 3.0}",
    ],
)
STEPS = 40


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    shapes = [
        ray_local.NodeShape(ip=ip, labels={naming.POOL_LABEL: pool})
        for ip, pool in zip(IPS, POOLS, strict=True)
    ]
    c = rg.start_ray(list(IPS), tmp_path_factory.mktemp("ray-spot"), shapes)
    yield c
    c.stop()


@pytest.fixture
def hub(tmp_path: Path, cluster: ray_local.LocalRayCluster) -> Iterator[tuple[HubServer, Path]]:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    # the grace covers the notice's way to the job (hub → agent → NOTICE → the job's next
    # step) and its checkpoint; 3 s was too short on a loaded machine (a resume from the
    # previous notice's checkpoint, seen once in a CI-loaded run)
    hub = make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", reclaim_grace_s=10.0)
    server = HubServer(hub).start()
    checker = nodecheck.CheckerConfig(every_s=0.5)
    agent = rg.AgentThread(
        server, cluster, tmp_path / "agent", expected_nodes=3, health=checker, spot_pools=("sp",)
    )
    agent.start()
    try:
        yield server, tmp_path / "agent" / "health" / "nodes"
    finally:
        agent.stop()
        server.stop()
        engine.dispose()


def _reclaim(inject: Path, node: str, notice: str | None) -> None:
    inject.mkdir(parents=True, exist_ok=True)
    path = inject / f"{node}.json"
    if notice is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(json.dumps({"reclaim": notice}))


def _steps(c: httpx.Client, run_id: str) -> list[int]:
    rows = c.get(f"/v1/runs/{run_id}/metrics").json()
    return sorted(int(m["step"]) for m in rows if m["name"] == "loss")


def _attempt_running(c: httpx.Client, run_id: str, number: int, past_step: int) -> dict[str, Any]:
    """Attempt ``number`` of the run once it runs on a node and logged past ``past_step``."""

    def ready() -> dict[str, Any] | None:
        run = c.get(f"/v1/runs/{run_id}").json()
        if not run["attempts"]:
            return None
        a = run["attempts"][-1]
        ok = a["number"] == number and a["state"] == "running" and a["nodes"]
        steps = _steps(c, run_id)
        return a if ok and steps and steps[-1] > past_step else None

    got = bh.wait_for(ready, timeout=180, what=f"attempt {number} running past step {past_step}")
    return dict(got)


def test_a_spot_run_reclaimed_twice_resumes_from_its_checkpoints_and_finishes(
    hub: tuple[HubServer, Path],
) -> None:
    server, inject = hub
    args = f"--steps {STEPS} --checkpoint-every 100 --step-sleep 0.4"
    tau_yaml = rg.quickstart_yaml(args, retries=0)
    tau_yaml = tau_yaml.replace("resilience:\n", "resilience:\n  capacity: spot\n")
    assert "capacity: spot" in tau_yaml
    with server.http() as c:
        run_id = rg.submit_run(c, tau_yaml)["id"]
        first = _attempt_running(c, run_id, 1, 5)
        _reclaim(inject, first["nodes"][0], "terminating in 10s")
        second = _attempt_running(c, run_id, 2, _steps(c, run_id)[-1] + 2)
        assert second["nodes"] != first["nodes"]
        # the provider replaces the first node (its notice goes, the checker clears its
        # mark); the second one is reclaimed in turn
        _reclaim(inject, first["nodes"][0], None)
        _reclaim(inject, second["nodes"][0], "terminating in 10s")
        third = _attempt_running(c, run_id, 3, _steps(c, run_id)[-1])
        assert third["nodes"] == first["nodes"]
        done = rg.wait_run(c, run_id, rg.finished, timeout=180)
        events = [e["kind"] for e in c.get(f"/v1/runs/{run_id}/events").json()]
        steps = _steps(c, run_id)
        cost = c.get(f"/v1/runs/{run_id}/cost").json()
        summary = json.loads(
            c.get(f"/v1/runs/{run_id}/file", params={"path": "artifacts/metrics.json"}).text
        )
    assert done["state"] == "succeeded", done["reason"]
    attempts = done["attempts"]
    assert [a["failure_kind"] for a in attempts] == ["reclaim", "reclaim", None]
    assert all(
        "Reclaimed: spot reclaim notice: terminating in 10s" in a["reason"] for a in attempts[:2]
    )
    resumed = [a["resumed_from"] for a in attempts]
    assert resumed[1] and resumed[2], resumed
    assert attempts[1]["resumed_from"] != attempts[2]["resumed_from"]  # each its own notice
    assert events.count("reclaim_notice") == 2
    assert steps == list(range(1, STEPS + 1))  # every step trained once: none lost, none twice
    assert summary["resumed_from_step"] > 0 and summary["steps"] == STEPS
    # each attempt is paid for at the spot pool's price, the reclaimed ones included
    assert [(a["capacity"], a["price_per_gpu_hour"]) for a in cost["attempts"]] == [
        ("spot", 0.9)
    ] * 3
    history = server.tau("run", "history", run_id)
    assert history.returncode == 0, history.stderr
    assert history.stdout.count("reclaim") >= 2, history.stdout


WHERE_JOB = """\
import ray
import taugrid as tau

ray.init()


@ray.remote(num_cpus=0.1)
def pool():
    return ray.get_runtime_context().get_node_labels().get("taugrid.io/pool")


selector = tau.label_selector()
print("SELECTOR", selector)
print("WORKER_POOL", ray.get(pool.options(label_selector=selector).remote()))
"""


def _where_yaml(capacity: str) -> str:
    return f"""\
schema_version: 1
name: where-{capacity}
run: {{entrypoint: job.py}}
compute: {{gpus: 4, gpu_model: A100-80G, workers: 1, cpus: 1, memory: 1Gi}}
execution: {{launcher: ray-train}}
resilience: {{max_retries: 0, capacity: {capacity}}}
"""


@pytest.mark.parametrize(("capacity", "pool"), [("spot", "sp"), ("on-demand", "od")])
def test_a_run_that_places_its_own_workers_is_kept_to_its_capacitys_pools(
    hub: tuple[HubServer, Path], tmp_path: Path, capacity: str, pool: str
) -> None:
    """A Ray Train script is not pinned by the hub: its driver gets the capacity's label
    selector (the attempt's nodes, where Ray ran the driver and its task, are of the
    pool), and its workers get it from ``tau.label_selector()``."""
    server, _ = hub
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(WHERE_JOB)
    with server.http() as c:
        run = rg.submit_run(c, _where_yaml(capacity), code)
        done = rg.wait_run(c, run["id"], rg.finished, timeout=180)
        logs = c.get(f"/v1/runs/{run['id']}/logs").json()["text"]
        (cluster,) = c.get("/v1/clusters").json()
    assert done["state"] == "succeeded", (done["reason"], logs[-2000:])
    assert f"WORKER_POOL {pool}" in logs, logs[-2000:]
    pools = {n["node_id"]: n["pool"] for n in cluster["report"]["nodes"]}
    (attempt,) = done["attempts"]
    assert attempt["nodes"] and {pools[n] for n in attempt["nodes"]} == {pool}, attempt

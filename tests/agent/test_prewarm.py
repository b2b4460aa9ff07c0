"""Runtime pre-warm on real Ray with real pip installs of ``termcolor`` (7 kB wheels
from PyPI, installed from the tests' local wheelhouse: tests/wheels.py).

One Ray cluster per module on 127.0.0.80 (head, no GPUs) and 127.0.0.81 (one emulated
GPU, the only target node), started with ``RUNTIME_ENV_RETRY_TIMES=1`` so a failing
pip install fails once instead of three times. A real hub server and the real agent
loop per test. Ray keeps each built virtualenv under the node's
``runtime_resources/pip/<hash>``; "not rebuilt" means that directory is the same
(same inode, same mtime) before and after the run. The three longest scenarios (a
queued run prepared while waiting, Ray's own failing build, an agent and a node
restarting) are marked ``long``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.agent.attempts import prewarm
from taugrid.backends.ray import ray_local
from taugrid.dataplane import runtimes
from taugrid.store import db
from tests import wheels
from tests.backends import backend_helpers as bh
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PIP = "termcolor==2.4.0"
PREPARE_S = 300  # a pip install on a loaded 2-core machine takes about a minute


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_local.LocalRayCluster]:
    head = ray_local.NodeShape(ip="127.0.0.80", num_cpus=4, num_gpus=0, accelerator=None)
    gpu = ray_local.NodeShape(ip="127.0.0.81", num_cpus=4, num_gpus=1)
    cluster = ray_local.LocalRayCluster(
        "127.0.0.80",
        bh.free_port("127.0.0.80", 6900, 6949),
        bh.free_port("127.0.0.80", 8900, 8949),
        [head, gpu],
        tmp_path_factory.mktemp("ray"),
        # Ray builds a job's pip runtime before its supervisor counts as started: under a
        # cold CI's load (PyPI reached, builds beside) that ran past 120 s, and the
        # start timeout answered instead of pip's own error
        job_start_timeout_s=PREPARE_S - 60,
    )
    with pytest.MonkeyPatch.context() as env:  # inherited by the Ray nodes
        env.setenv("RUNTIME_ENV_RETRY_TIMES", "1")
        for name, value in wheels.pip_env().items():
            env.setenv(name, value)
        try:
            cluster.start(timeout_s=120)
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def platform(
    tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> Iterator[tuple[HubServer, rg.AgentThread]]:
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home")).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent").start()
    try:
        yield server, agent
    finally:
        agent.stop()
        server.stop()
        engine.dispose()


def pip_yaml(pip: str, args: str = "--steps 5 --checkpoint-every 5", name: str = "pw") -> str:
    return rg.quickstart_yaml(args, retries=0, name=name) + f'runtime:\n  pip: ["{pip}"]\n'


def pip_envs(cluster: ray_local.LocalRayCluster) -> dict[str, tuple[int, int]]:
    """Every virtualenv Ray built on any node: path -> (inode, mtime)."""
    root = Path(json.loads((cluster.state_dir / "cluster.json").read_text())["tmp_root"])
    out = {}
    for p in root.glob("**/runtime_resources/pip/*"):
        if p.is_dir():
            s = p.stat()
            out[str(p.resolve())] = (s.st_ino, s.st_mtime_ns)
    return out


def events(c: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    return list(c.get(f"/v1/runs/{run_id}/events").json())


def kinds(c: httpx.Client, run_id: str) -> list[str]:
    return [e["kind"] for e in events(c, run_id)]


def key_of(pip: str) -> str:
    key = runtimes.runtime_key({"pip": [pip]})
    assert key is not None
    return key


@pytest.mark.long
def test_queued_run_gets_its_runtime_prepared_while_waiting_and_starts_on_it(
    platform: tuple[HubServer, rg.AgentThread], ray_cluster: ray_local.LocalRayCluster
) -> None:
    server, _agent = platform
    with server.http() as c:
        blocker = rg.submit_run(c, rg.quickstart_yaml("--steps 3000 --step-sleep 0.1", retries=0))
        rg.wait_run(c, blocker["id"], lambda r: r["state"] == "running")
        run = rg.submit_run(c, pip_yaml(PIP))
        bh.wait_for(
            lambda: (
                "runtime_ready" in kinds(c, run["id"]) or "runtime_failed" in kinds(c, run["id"])
            ),
            timeout=PREPARE_S,
            what="the hint-driven preparation to end",
        )
        waiting = c.get(f"/v1/runs/{run['id']}").json()
        runtime_events = [e for e in events(c, run["id"]) if e["kind"].startswith("runtime_")]
        assert runtime_events[-1]["kind"] == "runtime_ready", runtime_events
        built = pip_envs(ray_cluster)
        key = runtime_events[-1]["payload"]["key"]  # of the resolved spec (image included)
        bh.wait_for(
            lambda: (
                key in (server.hub.clusters.get("local") or {})["report"].get("cached_runtimes", [])
            ),
            timeout=30,
            what="the state report to list the warm runtime",
        )
        c.post(f"/v1/runs/{blocker['id']}/cancel")
        done = rg.wait_run(c, run["id"], rg.finished, timeout=180)
        seen = kinds(c, run["id"])
    assert "runtime_ready" in seen, seen
    assert waiting["state"] in ("queued", "admitted"), waiting["state"]  # prepared while waiting
    assert done["state"] == "succeeded", done["reason"]
    assert seen.count("runtime_preparing") == 1, seen  # placed on a warm runtime: no second build
    assert seen.index("runtime_ready") < seen.index("attempt_starting")
    assert built and pip_envs(ray_cluster) == built, "the run rebuilt its virtualenv"


def test_assignment_waits_for_preparation_then_a_warm_rerun_skips_it(
    platform: tuple[HubServer, rg.AgentThread], ray_cluster: ray_local.LocalRayCluster
) -> None:
    server, _agent = platform
    pip = "termcolor==2.3.0"
    with server.http() as c:
        first = rg.submit_run(c, pip_yaml(pip, name="pw-first"))
        done = rg.wait_run(c, first["id"], rg.finished, timeout=PREPARE_S)
        ready = next(e for e in events(c, first["id"]) if e["kind"] == "runtime_ready")
        built = pip_envs(ray_cluster)
        second = rg.submit_run(c, pip_yaml(pip, name="pw-second"))
        again = rg.wait_run(c, second["id"], rg.finished, timeout=180)
        seen = kinds(c, second["id"])
        status = c.get(f"/v1/runs/{first['id']}").json()
    assert done["state"] == "succeeded", done["reason"]
    assert ready["payload"]["seconds"] > 0 and ready["payload"]["pip"] == [pip]
    assert again["state"] == "succeeded", again["reason"]
    assert not [k for k in seen if k.startswith("runtime_")], seen
    assert pip_envs(ray_cluster) == built
    assert status["state"] == "succeeded"


def test_pip_failure_fails_the_run_with_the_requirement_named(
    platform: tuple[HubServer, rg.AgentThread],
) -> None:
    server, _agent = platform
    bad = "termcolor==0.0.999"
    with server.http() as c:
        run = rg.submit_run(c, pip_yaml(bad, name="pw-bad"))
        done = rg.wait_run(c, run["id"], rg.finished, timeout=PREPARE_S)
    assert done["state"] == "failed"
    assert f"'{bad}'" in done["reason"] and "fix runtime.pip in tau.yaml" in done["reason"]
    assert "No matching distribution" in done["reason"], done["reason"]
    assert "Traceback" not in done["reason"]
    assert done["attempts"][0]["failure_kind"] == "runtime_env"


@pytest.mark.long
def test_a_pip_failure_in_rays_own_build_names_the_requirement_too(
    tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    # No pre-warm (as when the prepare job could not run): Ray builds the runtime at job
    # start, fails, and the agent gives the same reason from Ray's runtime_env error.
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home")).start()
    agent = rg.AgentThread(server, ray_cluster, tmp_path / "agent", prewarm=False).start()
    bad = "termcolor==0.0.998"
    try:
        with server.http() as c:
            run = rg.submit_run(c, pip_yaml(bad, name="ray-builds-bad"))
            done = rg.wait_run(c, run["id"], rg.finished, timeout=PREPARE_S)
    finally:
        agent.stop()
        server.stop()
        engine.dispose()
    assert done["state"] == "failed", done["reason"]
    assert f"'{bad}'" in done["reason"] and "fix runtime.pip in tau.yaml" in done["reason"]
    assert "No matching distribution" in done["reason"], done["reason"]
    assert done["attempts"][0]["failure_kind"] == "runtime_env"


@pytest.mark.long
def test_agent_restart_keeps_warm_runtimes_and_a_node_restart_clears_them(
    tmp_path: Path, ray_cluster: ray_local.LocalRayCluster
) -> None:
    backend = ray_cluster.backend()
    try:
        first = prewarm.Prewarmer(backend, tmp_path, poll_s=0.2)
        first.ensure(key_of(PIP), [PIP])
        bh.wait_for(
            lambda: first.state(key_of(PIP))[0] is not prewarm.RuntimeState.PREPARING,
            timeout=PREPARE_S,
            what="preparation",
        )
        assert first.state(key_of(PIP))[0] is prewarm.RuntimeState.READY
        restarted = prewarm.Prewarmer(backend, tmp_path)  # a new agent process, same state dir
        assert restarted.warm_keys(backend.inventory()) == [key_of(PIP)]
        ray_cluster.kill_node(1)  # the GPU node dies; its replacement has an empty cache
        idx = ray_cluster.add_node(ray_local.NodeShape(ip="127.0.0.82", num_cpus=4, num_gpus=1))
        fresh = bh.wait_for(  # Ray gives a raylet 120 s to register (RAY_NODE_ENV)
            lambda: ray_cluster.node_ids().get(idx), timeout=120, what="the new node's id"
        )
        bh.wait_for(
            lambda: prewarm.target_nodes(backend.inventory()) == [fresh],
            timeout=60,
            what="the new GPU node to be the only target (the old one DEAD)",
        )
        assert restarted.warm_keys(backend.inventory()) == []
        assert restarted.ensure(key_of(PIP), [PIP]) is prewarm.RuntimeState.PREPARING
        bh.wait_for(
            lambda: restarted.state(key_of(PIP))[0] is not prewarm.RuntimeState.PREPARING,
            timeout=PREPARE_S,
            what="preparation on the new node",
        )
        assert restarted.warm_keys(backend.inventory()) == [key_of(PIP)]
    finally:
        backend.close()

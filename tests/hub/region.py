"""A real region for flow tests: a local Ray cluster plus an agent thread syncing to a hub."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from taugrid.agent import agent, hubclient
from taugrid.agent.attempts import guests
from taugrid.agent.nodes import nodecheck
from taugrid.backends.ray import ray_cordon, ray_local
from taugrid.sdk.client import submit
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import harness
from tests.hub.harness import HubServer

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def start_ray(
    ips: list[str], state_dir: Path, shapes: list[ray_local.NodeShape] | None = None
) -> ray_local.LocalRayCluster:
    """One node per IP, each the embedded default shape (4 emulated A100-80G) unless
    ``shapes`` says otherwise."""
    cluster = ray_local.LocalRayCluster(
        ips[0],
        bh.free_port(ips[0], 6600, 6699),
        bh.free_port(ips[0], 8600, 8699),
        shapes or [ray_local.NodeShape(ip=ip) for ip in ips],
        state_dir,
        job_start_timeout_s=60,
    )
    return cluster.start(timeout_s=180)


def start_cpu_head(ips: list[str], state_dir: Path) -> ray_local.LocalRayCluster:
    """A CPU-only head (4 CPUs) on ``ips[0]`` and a default GPU node on each other IP:
    for tests that mark, drain or kill GPU nodes while the head (and the Jobs API) lives."""
    shapes = [ray_local.NodeShape(ip=ips[0], num_gpus=0, num_cpus=4)]
    return start_ray(ips, state_dir, shapes + [ray_local.NodeShape(ip=ip) for ip in ips[1:]])


@contextlib.contextmanager
def hub_and_agent(tmp_path: Path, cluster: ray_local.LocalRayCluster) -> Iterator[HubServer]:
    """A hub on its own SQLite file with the embedded platform, and an agent thread for
    ``cluster``; both stopped after."""
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(harness.make_hub(engine, tmp_path / "home")).start()
    agent_thread = AgentThread(server, cluster, tmp_path / "agent").start()
    try:
        yield server
    finally:
        agent_thread.stop()
        server.stop()
        engine.dispose()


def start_regions(ips: dict[str, str], tmp: Path) -> dict[str, ray_local.LocalRayCluster]:
    """One single-node Ray cluster per region name; all stopped again if one fails."""
    started: dict[str, ray_local.LocalRayCluster] = {}
    try:
        for name, ip in ips.items():
            started[name] = start_ray([ip], tmp / name)
    except BaseException:
        stop_regions(started)
        raise
    return started


def stop_regions(clusters: dict[str, ray_local.LocalRayCluster]) -> None:
    for cluster in reversed(list(clusters.values())):
        cluster.stop()


class AgentThread:
    """The real ``Agent`` loop in a thread (sync every 0.3 s, full report every second
    unless ``report_s`` says otherwise: the embedded platform's agent uses 10 s)."""

    def __init__(
        self,
        server: HubServer,
        cluster: ray_local.LocalRayCluster,
        state_dir: Path,
        sync_s: float = 0.3,
        cluster_id: str = "local",
        data_root: Path | None = None,
        expected_nodes: int | None = None,
        report_s: float = 1.0,
        health: nodecheck.CheckerConfig | None = None,
        prewarm: bool = True,
        span: bool = False,
        gcs: bool = True,
        spot_pools: tuple[str, ...] = (),
    ) -> None:
        # gcs=False: inventory over HTTP only, for clusters with token auth (Ray's
        # in-process GCS client would keep token mode on for the rest of the process)
        self.backend = cluster.backend() if gcs else cluster.backend(gcs_address=None)
        self.hub = hubclient.HubClient(server.url, server.agent_token(cluster_id), cluster_id)
        cfg = agent.AgentConfig(
            cluster_id,
            cluster_id,
            state_dir,
            sync_s=sync_s,
            report_s=report_s,
            data_root=data_root,
            expected_nodes=expected_nodes,
            prewarm=prewarm,
            spot_pools=spot_pools,
            health=health if health is not None else nodecheck.CheckerConfig(),
            span=guests.SpanConfig(cluster.ip, cluster.gcs_address, cluster.auth_token_file)
            if span
            else None,
        )
        cordon = ray_cordon.GpuCordon(self.backend, state_dir / "cordons.json")
        self.agent = agent.Agent(cfg, self.backend, self.hub, cordon)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.agent.run, args=(self.stop_event,), daemon=True)

    def start(self) -> AgentThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)
        self.hub.close()
        self.backend.close()


def quickstart_yaml(
    args: str = "--steps 60 --checkpoint-every 20",
    env: dict[str, str] | None = None,
    retries: int = 2,
    name: str = "quickstart",
) -> str:
    text = (QUICKSTART / "tau.yaml").read_text()
    text = text.replace("name: quickstart", f"name: {name}")
    text = text.replace(
        'args: ["--steps", "300", "--checkpoint-every", "50"]', f"args: {args.split()!r}"
    )
    text = text.replace("max_retries: 2", f"max_retries: {retries}")
    if retries == 0:
        text = "\n".join(ln for ln in text.splitlines() if "retry_on" not in ln) + "\n"
    if env:
        lines = "".join(f"\n    {k}: '{v}'" for k, v in env.items())
        text += f"runtime:\n  env:{lines}\n"
    return text.replace("'", '"')


def submit_run(c: httpx.Client, tau_yaml: str, code_dir: Path = QUICKSTART) -> dict[str, Any]:
    code = submit.zip_dir(code_dir, [])
    import base64

    body = {
        "tau_yaml": tau_yaml,
        "filename": "tau.yaml",
        "code_zip_b64": base64.b64encode(code).decode(),
    }
    r = c.post("/v1/runs", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def wait_run(
    c: httpx.Client, run_id: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 90
) -> dict[str, Any]:
    deadline = time.time() + timeout
    run: dict[str, Any] = c.get(f"/v1/runs/{run_id}").json()
    while not pred(run):
        if time.time() > deadline:
            raise AssertionError(f"timed out; run is {run['state']}: {phases(run)}")
        time.sleep(0.3)
        run = c.get(f"/v1/runs/{run_id}").json()
    return run


def phases(run: dict[str, Any]) -> dict[str, str]:
    return {p["phase"]: p["status"] for p in run["phases"]}


def finished(run: dict[str, Any]) -> bool:
    return (
        run["state"] in ("succeeded", "failed", "cancelled") and phases(run)["released"] == "done"
    )

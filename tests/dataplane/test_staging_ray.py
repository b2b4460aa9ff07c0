"""Staging on placement end to end: a real hub, a real Ray cluster and agent in region b,
real data agents and data servers in regions a and b on loopback. A run that may only run
in b reads a dataset held in a: the hub copies it agent to agent (sha256-verified), holds
the attempt until the replica is complete, then the agent starts it and it succeeds."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.agent.data import dataserver, datasync
from taugrid.backends.ray import ray_local
from taugrid.dataplane import manifest, transfer
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.dataplane import test_data_api as api
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

IP_A, IP_B = "127.0.0.92", "127.0.0.93"


pytestmark = pytest.mark.slow  # a real Ray cluster


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(api.PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")).start()
    yield server
    server.stop()
    engine.dispose()


@pytest.fixture
def ray_b(tmp_path: Path) -> Iterator[ray_local.LocalRayCluster]:
    cluster = ray_local.LocalRayCluster(
        IP_B,
        bh.free_port(IP_B, 6950, 6999),
        bh.free_port(IP_B, 8950, 8999),
        [ray_local.NodeShape(ip=IP_B)],
        tmp_path / "ray-b",
        job_start_timeout_s=60,
    )
    cluster.start(timeout_s=120)
    yield cluster
    cluster.stop()


class _DataRegion:
    """A region's data server and data agent (the agent daemon's sidecar, without probes)."""

    def __init__(
        self, hub: HubServer, name: str, ip: str, root: Path, peers: dict[str, Any]
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.server = dataserver.DataServer(root, [ip], bh.free_port(ip, 6950, 6999)).start()
        self.http = httpx.Client(
            base_url=hub.url, headers={"Authorization": f"Bearer {hub.agent_token(name)}"}
        )
        self.agent = datasync.DataAgent(self.http, name, root, peers, self.server, 0.2).start()
        self.source = transfer.Source(ip, self.server.port)

    def stop(self) -> None:
        self.agent.stop()
        self.server.stop()
        self.http.close()


def _yaml() -> str:
    text = rg.quickstart_yaml("--steps 20 --checkpoint-every 10", name="staged")
    text = text.replace("data:\n  outputs:", "data:\n  inputs: [{dataset: corpus}]\n  outputs:")
    return text + "placement:\n  allowed_regions: [b]\n"


def test_run_waits_for_its_dataset_then_runs(
    hub: HubServer, ray_b: ray_local.LocalRayCluster, tmp_path: Path
) -> None:
    src = tmp_path / "data-a" / "corpus"
    (src / "shards").mkdir(parents=True)
    for i in range(3):
        (src / "shards" / f"{i}.bin").write_bytes(os.urandom(3 * 2**20 + i))
    api._agent(hub, "a", {}, gpus_free=0)
    a = _DataRegion(hub, "a", IP_A, tmp_path / "data-a", {})
    b_agent = rg.AgentThread(
        hub, ray_b, tmp_path / "agent-b", cluster_id="b", data_root=tmp_path / "data-b"
    ).start()
    b = _DataRegion(hub, "b", IP_B, tmp_path / "data-b", {"a": a.source})
    try:
        with hub.http() as c:
            tb_ok = c.post("/v1/datasets", json={"name": "corpus", "region": "a", "path": "corpus"})
            assert tb_ok.status_code == 201, tb_ok.text
            deadline = time.time() + 30
            while c.get("/v1/datasets/corpus").json()["state"] != "ready":
                assert time.time() < deadline, "dataset scan did not finish"
                time.sleep(0.2)
            run = rg.submit_run(c, _yaml())
            done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
            assert done["state"] == "succeeded", rg.phases(done)
            events = c.get(f"/v1/runs/{run['id']}/events").json()
        kinds = [e["kind"] for e in events]
        assert kinds.index("staging_started") < kinds.index("staging_ready")
        (attempt,) = done["attempts"]
        assert attempt["cluster_id"] == "b"
        assert attempt["placement"]["staging"]["state"] == "ready"
        ready_at = next(e["ts"] for e in events if e["kind"] == "staging_ready")
        assert attempt["started_at"] >= ready_at  # dispatched only after staging
        placed = next(p for p in done["phases"] if p["phase"] == "placed")
        assert "staged corpus@v1" in placed["reason"]
        copy = tmp_path / "data-b" / "datasets" / "corpus" / "v1"
        assert manifest.scan(copy) == manifest.scan(src)
        sent = json.loads(
            (Path(done["record_dir"]) / "rendered" / "ray-job-submission-a1.json").read_text()
        )
        env = sent["runtime_env"]["env_vars"]  # the job is told where its input is
        assert env["TAU_INPUT_CORPUS"] == str(copy)
        assert json.loads(env["TAU_INPUTS"]) == {"corpus": str(copy)}
    finally:
        b.stop()
        b_agent.stop()
        a.stop()

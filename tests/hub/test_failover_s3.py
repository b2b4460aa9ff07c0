"""Cross-region failover through the object store (issue 14 item 3), on real Ray, a real
hub, two real agents and the real SeaweedFS server.

Regions ``east`` (cheaper: runs go there first) on 127.0.27.10 and ``west`` on
127.0.27.11, each with its own agent root; the record store is an S3 bucket both reach.
East loses the hub (a cut TCP proxy on 127.0.27.12 between its agent and the hub) past
the grace period (12 s; lease 3 s) while its job keeps running and its agent still
reaches the store:
the hub re-places the run in west, which resumes from the checkpoint east uploaded;
east's agent sees the fence move in the store, refuses its uploads from then on and
mirrors the fence into its scratch, so the stray job's own writes are refused too; when
the link returns, east's agent reports the old attempt ended and the run finishes.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.agent import hubclient
from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests import weed_s3 as ws
from tests.hub import cut_proxy
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(600)]

BUCKET = "failover"
IPS = {"east": "127.0.27.10", "west": "127.0.27.11"}
PROXY_IP = "127.0.27.12"
ARGS = "--steps 300 --checkpoint-every 20 --step-sleep 0.1"
"""Long enough that east's job outlives the lease plus the grace after the cut."""
POOL = (
    "[{name: a, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16, "
    "memory_per_node: 128Gi, nodes: 1, cost_per_gpu_hour: %s}]"
)


def platform_yaml(server: ws.WeedS3, url: str) -> str:
    return f"""\
schema_version: 1
gpu_types: [{{name: A100-80G}}]
regions:
  - name: east
    clusters: [{{name: east, emulated_gpus: true, node_pools: {POOL % "1.0"}}}]
  - name: west
    clusters: [{{name: west, emulated_gpus: true, node_pools: {POOL % "3.0"}}}]
priority_classes: [{{name: normal, value: 1000}}]
profiles: [{{name: default}}]
teams: [{{name: research, quotas: [{{gpu_model: A100-80G, nominal: 8}}]}}]
workspaces: [{{name: default, team: research, defaults: {{priority: normal, profile: default}}}}]
default_workspace: default
scheduling: {{default_objective: cost}}
{server.records_yaml(url)}"""


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, ray_local.LocalRayCluster]]:
    regions = rg.start_regions(IPS, tmp_path_factory.mktemp("regions"))
    yield regions
    rg.stop_regions(regions)


@contextlib.contextmanager
def two_regions(
    weed: ws.WeedS3, tmp: Path, clusters: dict[str, ray_local.LocalRayCluster]
) -> Iterator[tuple[HubServer, str, cut_proxy.Proxy, dict[str, rg.AgentThread]]]:
    prefix = f"{BUCKET}/{secrets.token_hex(4)}"
    (tmp / "platform.yaml").write_text(platform_yaml(weed, f"s3://{prefix}"))
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    hub = make_hub(engine, tmp / "home", tmp / "platform.yaml", lease_s=3.0, grace_s=12.0)
    server = HubServer(hub).start()
    host, port = server.url.removeprefix("http://").split(":")
    proxy = cut_proxy.Proxy(PROXY_IP, (host, int(port)))
    agents: dict[str, rg.AgentThread] = {}
    try:
        for name in IPS:
            t = rg.AgentThread(server, clusters[name], tmp / f"root-{name}", cluster_id=name)
            if name == "east":  # east reaches the hub through the proxy the test cuts
                t.hub.close()
                url = f"http://{PROXY_IP}:{proxy.port}"
                t.hub = hubclient.HubClient(url, server.agent_token(name), name)
                t.agent.hub = t.hub
            agents[name] = t.start()
        yield server, prefix, proxy, agents
    finally:
        for t in agents.values():
            t.stop()
        proxy.close()
        server.stop()
        engine.dispose()


def _on_east_with_checkpoint(run: dict[str, object]) -> bool:
    attempts = run["attempts"]
    assert isinstance(attempts, list)
    a = attempts[0] if attempts else None
    return bool(a and a["cluster_id"] == "east" and (a["checkpoint_step"] or 0) >= 40)


@pytest.fixture
def creds(weed_s3: ws.WeedS3, monkeypatch: pytest.MonkeyPatch) -> ws.WeedS3:
    weed_s3.make_bucket(BUCKET)
    monkeypatch.setenv(ws.KEY_ENV, ws.KEY)
    monkeypatch.setenv(ws.SECRET_ENV, ws.SECRET)
    return weed_s3


@pytest.mark.long
def test_a_partitioned_region_fails_over_and_resumes_from_its_uploaded_checkpoint(
    creds: ws.WeedS3, tmp_path: Path, clusters: dict[str, ray_local.LocalRayCluster]
) -> None:
    text = rg.quickstart_yaml(ARGS, name="fo")
    with (
        two_regions(creds, tmp_path, clusters) as (server, prefix, proxy, _agents),
        server.http() as c,
    ):
        run = rg.submit_run(c, text)
        rg.wait_run(c, run["id"], _on_east_with_checkpoint, timeout=180)
        proxy.cut()  # east loses the hub past the grace; it still reaches the store
        moved = rg.wait_run(c, run["id"], lambda r: len(r["attempts"]) >= 2, timeout=120)
        token = moved["attempts"][0]["token"]
        # east's agent reads the moved fence in the store and mirrors it into its scratch
        fence = tmp_path / "root-east" / "scratch" / run["id"] / "a1" / "FENCE"
        deadline = time.time() + 60
        while fence.read_text().strip() == str(token):
            assert time.time() < deadline, "east never saw its attempt fenced"
            time.sleep(0.5)
        proxy.open.set()  # the region comes back: its agent reports the old attempt ended
        done = rg.wait_run(c, run["id"], rg.finished, timeout=300)
        metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
    assert done["state"] == "succeeded", done["reason"]
    first, second = done["attempts"][:2]
    assert first["cluster_id"] == "east" and first["failure_kind"] == "lost_contact"
    assert second["cluster_id"] == "west" and second["resumed_from"]
    fs = creds.filesystem()
    base = f"{prefix}/default/runs/{run['id']}"
    ckpt = f"{base}/checkpoints/{second['resumed_from']}/_CHECKPOINT.json"
    resumed = json.loads(fs.cat_file(ckpt))
    assert resumed["attempt"] == 1  # written in east, uploaded by east's agent
    steps2 = [m["step"] for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    assert min(steps2) == resumed["step"] + 1  # west went on from there
    # east's agent refused to upload anything of attempt 1 after it was ended
    ended = float(first["ended_at"])
    for path in fs.glob(f"{base}/checkpoints/step-*/_CHECKPOINT.json"):
        marker = json.loads(fs.cat_file(path))
        assert marker["attempt"] != 1 or marker["created_at"] <= ended, marker
    # each region wrote under its own root; the hub's home holds no job output
    assert (tmp_path / "root-west" / "scratch" / run["id"]).is_dir()
    assert not list((tmp_path / "home").rglob("metrics.jsonl"))

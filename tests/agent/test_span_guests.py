"""A spanning run end to end on real Ray: the hub spans it over two clusters, the guest
cluster's agent joins a node to the head's Ray cluster, the job's workers run in both,
the guest node is stopped when the attempt ends; and when the guest node dies mid-run the
job shrinks and finishes instead of failing.

Two regions, ``a`` and ``b``: each a one-node Ray cluster (2 emulated A100 GPUs, the
``region:<name>`` resource, Ray token auth) with a real agent thread that may span
(``AgentConfig.span``) and a real data-plane sidecar whose probes measure the link between
them (loopback), a real hub whose platform.yaml sets a link budget. The run is
``examples/span-data-parallel`` with 4 one-GPU workers: no cluster holds them, so the
hub spans them 2 + 2.

Both clusters use one Ray token, because the agents here share this process and a process
presents one token (``ray_http.auth_headers``; the lab's agents are processes of their
own, each with its cluster's token). The guest node still joins only with the token the
hub relayed: a node started without one is refused by the head.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.agent import datasync
from taugrid.backends import _procs, ray_local
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.cli.platform_env import copy_example
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "span-data-parallel"
IPS = {"a": "127.0.33.1", "b": "127.0.34.1"}
PLATFORM = pb.platform({"a": 1.0, "b": 1.0}, pb.TENANCY + "scheduling: {span_min_mbit: 10}\n")


def _cluster(name: str, tmp: Path, token: Path) -> ray_local.LocalRayCluster:
    ip = IPS[name]
    shape = ray_local.NodeShape(ip=ip, num_gpus=2, num_cpus=4, resources={f"region:{name}": 2})
    return ray_local.LocalRayCluster(
        ip,
        bh.free_port(ip, 6600, 6699),
        bh.free_port(ip, 8600, 8699),
        [shape],
        tmp / name,
        job_start_timeout_s=120,
        auth_token_file=token,
    ).start(timeout_s=180)


def _sidecar(server: HubServer, name: str, tmp: Path) -> datasync.Sidecar:
    ip = IPS[name]
    cfg = datasync.SidecarConfig(
        data_root=tmp / f"data-{name}",
        addresses=(ip,),
        probe_port=ray_local.free_port(ip),
        data_port=ray_local.free_port(ip),
        probe_interval_s=0.5,
        probe_duration_s=0.2,
    )
    return datasync.Sidecar(cfg, server.url, server.agent_token(name), name).start()


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    token = ray_local.write_auth_token(tmp_path / "ray-token")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    with contextlib.ExitStack() as stack:
        clusters = {}
        for name in IPS:
            clusters[name] = _cluster(name, tmp_path, token)
            stack.callback(clusters[name].stop)
        (tmp_path / "platform.yaml").write_text(PLATFORM)
        engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
        stack.callback(engine.dispose)
        server = make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml")
        srv = HubServer(server).start()
        stack.callback(srv.stop)
        for name, cluster in clusters.items():
            agent = rg.AgentThread(
                srv, cluster, tmp_path / f"agent-{name}", cluster_id=name, span=True
            )
            agent.agent.sidecar = _sidecar(srv, name, tmp_path)
            stack.callback(agent.agent.sidecar.stop)
            stack.callback(agent.stop)
            agent.start()
        yield srv


def _args(shards: int) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        doc["run"]["args"] = [
            *("--workers", "4", "--shards", str(shards)),
            *("--shard-mb", "0.05", "--step-s", "0.1"),
        ]

    return edit


def _events(c: httpx.Client, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in c.get(f"/v1/runs/{run_id}/events").json() if e["kind"] == kind]


def _guest_pids() -> set[int]:
    return _procs.marked("tau-guest/", prefix=True)


def _span_run(c: httpx.Client, code: Path) -> tuple[str, str]:
    """Submit; once it runs with its guest node joined: (run ID, the guest cluster)."""
    rid = rg.submit_run(c, (code / "tau.yaml").read_text(), code_dir=code)["id"]
    placed = rg.wait_run(c, rid, lambda r: r["state"] not in ("queued", "admitted"), 120)
    guest = next(iter(set(IPS) - {placed["attempts"][0]["cluster_id"]}))
    joined = _until(lambda: _events(c, rid, "guest_joined"), 120)
    assert joined[0]["cluster"] == guest
    return rid, guest


def _result(run: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(next(Path(run["record_dir"]).rglob("result.json")).read_text())
    return doc


def test_a_span_runs_in_both_clusters_and_its_guest_node_goes_with_it(
    hub: HubServer, tmp_path: Path
) -> None:
    code = copy_example(EXAMPLE, tmp_path / "code", _args(120))
    with hub.http() as c:
        rid, _guest = _span_run(c, code)
        done = rg.wait_run(c, rid, rg.finished, 300)
        explained = c.get(f"/v1/runs/{rid}/placement").json()
        _until(lambda: not _guest_pids(), 30)  # the attempt ended: its guest node is stopped
    assert done["state"] == "succeeded", done["reason"]
    assert "spans clusters" in explained["reason"], explained
    result = _result(done)
    assert result["shards"] == 120 and result["workers_end"] == 4, result
    assert set(result["by_region"]) == set(IPS), result  # both clusters' workers trained

    # the guest node dies mid-run (its region lost): the job shrinks to the head's workers
    code = copy_example(EXAMPLE, tmp_path / "code2", _args(400))
    with hub.http() as c:
        rid, guest = _span_run(c, code)
        _until(lambda: _shards(c, rid) >= 40, 120)
        assert _guest_pids()
        assert not _procs.terminate("tau-guest/", prefix=True, grace_s=0)
        done = rg.wait_run(c, rid, rg.finished, 300)
        failed = _events(c, rid, "guest_failed")
    assert done["state"] == "succeeded", done["reason"]
    assert failed and failed[0]["cluster"] == guest
    result = _result(done)
    assert result["shards"] == 400
    assert result["workers_start"] == 4 and result["workers_end"] == 2, result
    assert result["workers_lost"] >= 2, result


def _shards(c: httpx.Client, run_id: str) -> float:
    rows = c.get(f"/v1/runs/{run_id}/metrics", params={"name": "loss"}).json()
    return max((float(r["step"] or 0) for r in rows), default=0.0)


def _until(what: Any, timeout: float) -> Any:
    deadline = time.time() + timeout
    while not (got := what()):
        assert time.time() < deadline, "timed out"
        time.sleep(0.3)
    return got

"""A multi-region deployment behind the hub's one endpoint, on real Ray Serve.

Regions ``east`` and ``west``: a one-node Ray cluster each (127.0.43.1 / .2), a real
hub (lease 4 s, grace 12 s) and a real agent per region. The quickstart is trained, then
deployed with ``regions: [east, west]``: a serving run in each region, and one URL on
the hub. The hub's RTT measurement (its seam) sees ``west`` 5 s further, so ``east``
takes the traffic; east's agent is then stopped past its lease and the traffic moves
to ``west`` under the same URL with no failed request; with both regions lost the
endpoint answers 503 at once. Then, on a fresh hub: a replica SIGKILLed under load
is restarted by Serve, and a delete under load, both with every answer a 200 or a
503 and none hanging, except the request the killed replica was handling when it died:
Ray Serve answers that one 500 (it never resends a request that may have run, as the
hub does not), so the one-at-a-time load may see at most one 500, from east.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from taugrid.backends.ray import ray_local
from tests.hub import region as rg
from tests.hub import serve_regions as sr
from tests.hub.harness import HubServer

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

IPS = {"east": "127.0.43.1", "west": "127.0.43.2"}


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, ray_local.LocalRayCluster]]:
    regions = rg.start_regions(IPS, tmp_path_factory.mktemp("regions"))
    yield regions
    rg.stop_regions(regions)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    with sr.hub_with_regions(tmp_path, list(IPS), far_ip=IPS["west"]) as server:
        yield server


def _both_ready(dep: dict[str, Any]) -> bool:
    return dep["phase"] == "Ready" and all(r["healthy"] for r in dep["regions"])


@pytest.mark.long
def test_nearest_region_serves_and_traffic_fails_over_under_one_url(
    hub: HubServer, clusters: dict[str, ray_local.LocalRayCluster], tmp_path: Path
) -> None:
    agents = {
        name: rg.AgentThread(hub, clusters[name], tmp_path / name, cluster_id=name).start()
        for name in IPS
    }
    try:
        with hub.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml("--steps 20 --checkpoint-every 10"))
            assert rg.wait_run(c, run["id"], rg.finished, timeout=600)["state"] == "succeeded"
            dep = sr.deploy(c, "digits", run["id"], ["east", "west"])
            assert {r["region"] for r in dep["regions"]} == {"east", "west"}
            dep = sr.wait(c, "digits", _both_ready, timeout_s=400)
            url = dep["endpoint"]
            assert url == dep["hub_endpoint"] and url.endswith("/v1/endpoints/default/digits")
            by_region = {r["region"]: r for r in dep["regions"]}
            assert by_region["east"]["endpoint"].startswith(f"http://{IPS['east']}:")
            assert by_region["west"]["rtt_ms"] > by_region["east"]["rtt_ms"]
            r = c.post("/v1/serve/digits/scale", json={"replicas": 2})
            assert r.status_code == 400 and "not built yet" in r.json()["detail"]
            with sr.Load(url, hub.admin_token) as load:
                load.wait_for("east", timeout_s=60)
                agents.pop("east").stop()  # east's lease runs out: the hub stops routing there
                load.wait_for("west", timeout_s=60)
                time.sleep(2)
            assert not load.failed, load.failed
            served = [r for _, r in load.regions]
            switch = served.index("west")
            assert set(served[:switch]) == {"east"} and set(served[switch:]) == {"west"}
            status = c.get("/v1/serve/digits").json()
            assert status["phase"] == "Degraded" and status["endpoint"] == url
            out = {r["region"]: r for r in status["regions"]}
            assert not out["east"]["healthy"] and out["west"]["healthy"]
            agents.pop("west").stop()  # no region left: 503 at once, never a hang
            sr.wait(c, "digits", lambda d: not any(r["healthy"] for r in d["regions"]), 60)
            r = c.post(url.removeprefix(hub.url), json={"pixels": [0.0] * 64})
            assert r.status_code == 503 and "no healthy region" in r.json()["detail"]
            assert c.delete("/v1/serve/digits").json()["phase"] == "Deleted"
    finally:
        for agent in agents.values():
            agent.stop()


def _replica_pids(cluster: ray_local.LocalRayCluster, app: str) -> list[int]:
    """The processes of ``app``'s live Serve replicas (Ray's state API)."""
    resp = httpx.get(
        f"{cluster.dashboard_url}/api/v0/actors",
        params={"limit": 1000, "detail": 1},
        headers=cluster.auth_headers(),
        timeout=30,
    )
    resp.raise_for_status()
    rows = resp.json()["data"]["result"]["result"]
    prefix = f"ServeReplica:{app}:"
    alive = [a for a in rows if a["state"] == "ALIVE"]
    return [int(a["pid"]) for a in alive if a["class_name"].startswith(prefix)]


@pytest.mark.long
def test_a_crashed_replica_and_a_delete_under_load_answer_200_or_503_never_hang(
    hub: HubServer, clusters: dict[str, ray_local.LocalRayCluster], tmp_path: Path
) -> None:
    agents = {
        name: rg.AgentThread(hub, clusters[name], tmp_path / name, cluster_id=name).start()
        for name in IPS
    }
    try:
        with hub.http() as c:
            run = rg.submit_run(c, rg.quickstart_yaml("--steps 20 --checkpoint-every 10"))
            assert rg.wait_run(c, run["id"], rg.finished, timeout=600)["state"] == "succeeded"
            sr.deploy(c, "crashy", run["id"], ["east"])
            dep = sr.wait(c, "crashy", _both_ready, timeout_s=400)
            url = dep["endpoint"]
            assert url == dep["hub_endpoint"]
            (pid,) = _replica_pids(clusters["east"], "crashy")
            with sr.Load(url, hub.admin_token) as load:
                load.wait_for("east", timeout_s=60)
                os.kill(pid, signal.SIGKILL)
                restarted = lambda _: _replica_pids(clusters["east"], "crashy") not in ([], [pid])  # noqa: E731
                sr.wait(c, "crashy", restarted, 120)
                served = len(load.regions)
                deadline = time.time() + 120
                while len(load.regions) < served + 5:  # answered again after the restart
                    assert time.time() < deadline, load.failed[-3:]
                    time.sleep(0.5)
            # the request in flight at the SIGKILL, if any, is Ray Serve's 500
            assert load.codes.count(500) <= 1, load.failed
            assert all(f.startswith(("500 from east", "503")) for f in load.failed), load.failed
            assert set(load.codes) <= {200, 500, 503}, load.failed
            loads = [sr.Load(url, hub.admin_token) for _ in range(3)]
            for each in loads:
                each.__enter__()
            try:
                loads[0].wait_for("east", timeout_s=60)
                assert c.delete("/v1/serve/crashy").json()["phase"] == "Deleted"
                time.sleep(3)
            finally:
                for each in loads:
                    each.__exit__()
            codes = [code for each in loads for code in each.codes]
            assert set(codes) <= {200, 503}, [f for each in loads for f in each.failed]
            assert all(each.codes[-1] == 503 for each in loads)
            r = c.post(url.removeprefix(hub.url), json={"pixels": [0.0] * 64})
            assert r.status_code == 503
    finally:
        for agent in agents.values():
            agent.stop()

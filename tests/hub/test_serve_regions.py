"""A multi-region deployment behind the hub's one endpoint, on real Ray Serve.

Regions ``east`` and ``west``: a one-node Ray cluster each (127.0.43.1 / .2), a real
hub (lease 2 s, grace 8 s) and a real agent per region. The quickstart is trained, then
deployed with ``regions: [east, west]``: a serving run in each region, and one URL on
the hub. The hub's RTT measurement (its seam) sees ``west`` 50 ms further, so ``east``
takes the traffic; east's agent is then stopped past its lease and the traffic moves
to ``west`` under the same URL with no failed request; with both regions lost the
endpoint answers 503 at once.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sklearn.datasets import load_digits

from taugrid.backends import ray_local
from taugrid.hub import serve_router
from taugrid.sdk import submit
from taugrid.store import db
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

IPS = {"east": "127.0.43.1", "west": "127.0.43.2"}
PLATFORM = pb.platform({"east": 1.0, "west": 1.0}, pb.TENANCY)
SERVE_YAML = (rg.QUICKSTART / "serve.yaml").read_text()


@pytest.fixture(scope="module")
def clusters(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, ray_local.LocalRayCluster]]:
    regions = rg.start_regions(IPS, tmp_path_factory.mktemp("regions"))
    yield regions
    rg.stop_regions(regions)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(
        make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", lease_s=2.0, grace_s=8.0)
    )
    west = f"//{IPS['west']}:"

    def measured(url: str) -> float | None:  # the link seam: west is 50 ms further
        rtt = serve_router.tcp_rtt(url)
        return None if rtt is None else rtt + (50.0 if west in url else 0.0)

    server.server.config.app.state.serve_router = serve_router.Router(server.hub, measured)
    yield server.start()
    server.stop()
    engine.dispose()


def _deploy(c: httpx.Client, source_run: str) -> dict[str, Any]:
    code = submit.zip_dir(rg.QUICKSTART, [])
    body = {
        "name": "digits",
        "source_run": source_run,
        "regions": ["east", "west"],
        "submit": {
            "tau_yaml": SERVE_YAML,
            "filename": "serve.yaml",
            "code_zip_b64": base64.b64encode(code).decode(),
        },
    }
    r = c.post("/v1/serve", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def _wait(c: httpx.Client, pred: Any, timeout_s: float) -> dict[str, Any]:
    deadline = time.time() + timeout_s
    while True:
        dep: dict[str, Any] = c.get("/v1/serve/digits").json()
        if pred(dep):
            return dep
        assert time.time() < deadline, f"timed out: {dep['phase']} {dep['regions']}"
        time.sleep(1.0)


class _Load:
    """Requests one after another to the hub endpoint; which region answered each."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.regions: list[str] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._pixels = load_digits().data[0].tolist()

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        auth = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(timeout=40, headers=auth) as http:
            while not self._stop.is_set():
                try:
                    r = http.post(self.url, json={"pixels": self._pixels})
                    if r.status_code == 200 and r.json()["class"] == 0:
                        self.regions.append(r.headers["x-tau-region"])
                    else:
                        self.failed.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failed.append(repr(exc))
                time.sleep(0.05)

    def wait_for(self, region: str, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while region not in self.regions[-3:]:
            assert time.time() < deadline, f"traffic never moved to {region}: {self.failed}"
            time.sleep(0.5)


def _both_ready(dep: dict[str, Any]) -> bool:
    return dep["phase"] == "Ready" and all(r["healthy"] for r in dep["regions"])


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
            assert rg.wait_run(c, run["id"], rg.finished, timeout=300)["state"] == "succeeded"
            dep = _deploy(c, run["id"])
            assert {r["region"] for r in dep["regions"]} == {"east", "west"}
            dep = _wait(c, _both_ready, timeout_s=400)
            url = dep["endpoint"]
            assert url == dep["hub_endpoint"] and url.endswith("/v1/endpoints/default/digits")
            by_region = {r["region"]: r for r in dep["regions"]}
            assert by_region["east"]["endpoint"].startswith(f"http://{IPS['east']}:")
            assert by_region["west"]["rtt_ms"] > by_region["east"]["rtt_ms"]
            with _Load(url, hub.admin_token) as load:
                load.wait_for("east", timeout_s=60)
                agents.pop("east").stop()  # east's lease runs out: the hub stops routing there
                load.wait_for("west", timeout_s=60)
                time.sleep(2)
            assert not load.failed, load.failed
            assert load.regions[0] == "east" and load.regions[-1] == "west"
            assert "west" not in load.regions[: load.regions.index("west")]
            status = c.get("/v1/serve/digits").json()
            assert status["phase"] == "Degraded" and status["endpoint"] == url
            out = {r["region"]: r for r in status["regions"]}
            assert not out["east"]["healthy"] and out["west"]["healthy"]
            agents.pop("west").stop()  # no region left: 503 at once, never a hang
            _wait(c, lambda d: not any(r["healthy"] for r in d["regions"]), timeout_s=60)
            r = c.post(url.removeprefix(hub.url), json={"pixels": [0.0] * 64})
            assert r.status_code == 503 and "no healthy region" in r.json()["detail"]
            assert c.delete("/v1/serve/digits").json()["phase"] == "Deleted"
    finally:
        for agent in agents.values():
            agent.stop()

"""The hub's deployment endpoint (``hub.serving.serve_router``) against real HTTP upstreams.

A real hub serves ``/v1/endpoints/default/digits``; the regions it routes to are two
real HTTP servers on 127.0.43.3 and 127.0.43.4 standing in for the regions' Ray Serve
proxies (the region list is put in the router's cache, the seam between the store and
the forwarding; the Ray Serve end to end is ``test_serve_regions.py``). The nearest
takes the traffic; a refused connection fails over to the other region; a region that
never answers gives 504 after the bounded read timeout; none left gives 503 at once.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from taugrid.hub.serving import serve_router
from taugrid.store import db
from tests.hub.harness import HubServer, make_hub

IPS = {"east": "127.0.43.3", "west": "127.0.43.4"}


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Upstream

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.server.hang.is_set():
            time.sleep(5)
        out = self.server.region.encode() + b" " + self.path.encode() + b" " + body
        self.send_response(200)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        with contextlib.suppress(OSError):  # the hub gave up on a silent region (504)
            self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


class _Upstream(http.server.ThreadingHTTPServer):
    def __init__(self, region: str) -> None:
        super().__init__((IPS[region], 0), _Handler)
        self.region, self.hang = region, threading.Event()
        self.endpoint = f"http://{IPS[region]}:{self.server_address[1]}/digits"
        threading.Thread(target=self.serve_forever, args=(0.1,), daemon=True).start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@pytest.fixture
def upstreams() -> Iterator[dict[str, _Upstream]]:
    ups = {r: _Upstream(r) for r in IPS}
    yield ups
    for u in ups.values():
        u.close()


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    monkeypatch.setattr(serve_router, "READ_S", 1.0)
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp_path / "home"))
    yield server.start()
    server.stop()
    engine.dispose()


def _route(hub: HubServer, ups: dict[str, _Upstream]) -> serve_router.Router:
    west = f"//{IPS['west']}:"

    def measured(url: str) -> float | None:
        rtt = serve_router.tcp_rtt(url)
        return None if rtt is None else rtt + (50.0 if west in url else 0.0)

    router = serve_router.Router(hub.hub, measured)
    views: list[dict[str, Any]] = [
        {"region": r, "endpoint": u.endpoint, "healthy": True, "phase": "Ready", "reason": ""}
        for r, u in ups.items()
    ]
    router._views[("default", "digits")] = (float("inf"), views)
    hub.app.state.serve_router = router
    return router


def test_nearest_first_then_refused_fails_over_then_503(
    hub: HubServer, upstreams: dict[str, _Upstream]
) -> None:
    _route(hub, upstreams)
    with hub.http() as c:
        r = c.post("/v1/endpoints/default/digits/predict?x=1", content=b"7")
        assert r.status_code == 200 and r.headers["x-tau-region"] == "east"
        assert r.content == b"east /digits/predict?x=1 7"
        upstreams["east"].close()  # connection refused from now on
        r = c.post("/v1/endpoints/default/digits", content=b"8")
        assert r.status_code == 200 and r.content == b"west /digits 8"
        assert c.get("/v1/serve/nosuch").status_code == 404
        upstreams["west"].close()
        r = c.post("/v1/endpoints/default/digits", content=b"9")
        assert r.status_code == 503 and "no healthy region" in r.json()["detail"]


def test_a_silent_region_is_a_bounded_504_and_others_need_membership(
    hub: HubServer, upstreams: dict[str, _Upstream]
) -> None:
    _route(hub, upstreams)
    upstreams["east"].hang.set()
    with hub.http() as c:
        r = c.post("/v1/endpoints/default/digits", content=b"1")
        assert r.status_code == 504 and "did not answer" in r.json()["detail"]
    with hub.http(token="nope") as c:
        assert c.post("/v1/endpoints/default/digits", content=b"1").status_code == 401


def test_unknown_regions_and_deployments_are_refused_before_anything_starts(
    hub: HubServer,
) -> None:
    body = {
        "name": "digits",
        "source_run": "quickstart",
        "regions": ["nowhere"],
        "submit": {"tau_yaml": "name: x\n", "filename": "serve.yaml"},
    }
    with hub.http() as c:
        r = c.post("/v1/serve", json=body)
        assert r.status_code == 400 and "no region named nowhere" in r.json()["detail"]
        assert c.get("/v1/runs").json() == []
        r = c.post("/v1/endpoints/default/nosuch", content=b"1")
        assert r.status_code == 404 and "no deployment named 'nosuch'" in r.json()["detail"]

"""Builders for multi-region serving on real Ray Serve (tests and benchmarks): a hub on
a two-region platform whose RTT measurement (the router's seam) puts one region further
away, the quickstart deployed with ``regions``, and a closed-loop client of the hub's
endpoint that records which region answered each request."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from sklearn.datasets import load_digits

from taugrid.hub.serving import serve_router
from taugrid.sdk.client import submit
from taugrid.store import db
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

__all__ = ["Load", "deploy", "hub_with_regions", "wait"]

SERVE_YAML = (rg.QUICKSTART / "serve.yaml").read_text()


@contextlib.contextmanager
def hub_with_regions(
    tmp: Path, regions: list[str], far_ip: str, far_ms: float = 5000.0, lease_s: float = 4.0
) -> Iterator[HubServer]:
    """A started hub (lease ``lease_s``, grace 3 leases) on one emulated region per
    name; the hub measures the link to ``far_ip`` ``far_ms`` longer than it is (the seam
    adds the number, nothing waits): far beyond a loaded machine's noise, where a loopback
    connect measured 111 ms and 50 ms more did not order the regions (cold CI, Dec 7)."""
    (tmp / "platform.yaml").write_text(pb.platform(dict.fromkeys(regions, 1.0), pb.TENANCY))
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    server = HubServer(
        make_hub(engine, tmp / "home", tmp / "platform.yaml", lease_s=lease_s, grace_s=3 * lease_s)
    )

    def measured(url: str) -> float | None:
        rtt = serve_router.tcp_rtt(url)
        return None if rtt is None else rtt + (far_ms if f"//{far_ip}:" in url else 0.0)

    server.app.state.serve_router = serve_router.Router(server.hub, measured)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        engine.dispose()


def deploy(
    c: httpx.Client,
    name: str,
    source_run: str,
    regions: list[str],
    *,
    tau_yaml: str = SERVE_YAML,
    artifact: str | None = None,
) -> dict[str, Any]:
    """``POST /v1/serve`` of the quickstart's code with ``tau_yaml`` (its serve.yaml)."""
    code = submit.zip_dir(rg.QUICKSTART, [])
    body = {
        "name": name,
        "source_run": source_run,
        "artifact": artifact,
        "regions": regions,
        "submit": {
            "tau_yaml": tau_yaml,
            "filename": "serve.yaml",
            "code_zip_b64": base64.b64encode(code).decode(),
        },
    }
    r = c.post("/v1/serve", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def wait(
    c: httpx.Client, name: str, pred: Callable[[dict[str, Any]], bool], timeout_s: float
) -> dict[str, Any]:
    deadline = time.time() + timeout_s
    while True:
        dep: dict[str, Any] = c.get(f"/v1/serve/{name}").json()
        if pred(dep):
            return dep
        if time.time() > deadline:
            raise AssertionError(f"timed out: {dep['phase']} {dep['regions']}")
        time.sleep(1.0)


class Load:
    """Requests one after another to ``url`` until stopped: how many were answered
    right, the region that answered each through the hub (``x-tau-region``), when, and
    every failure. ``token``: the hub's bearer token (None: straight to Serve)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url, self.token, self.ok = url, token, 0
        self.regions: list[tuple[float, str]] = []
        self.codes: list[int] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._pixels = load_digits().data[0].tolist()

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        with httpx.Client(timeout=40, headers=auth) as http:
            while not self._stop.is_set():
                try:
                    r = http.post(self.url, json={"pixels": self._pixels})
                    self.codes.append(r.status_code)
                    if r.status_code == 200 and r.json()["class"] == 0:
                        self.ok += 1
                        if "x-tau-region" in r.headers:
                            self.regions.append((time.perf_counter(), r.headers["x-tau-region"]))
                    else:
                        who = r.headers.get("x-tau-region", "the hub")  # or a region's proxy
                        self.failed.append(f"{r.status_code} from {who}: {r.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failed.append(repr(exc))
                time.sleep(0.05)

    def wait_for(self, region: str, timeout_s: float) -> float:
        """Until ``region`` answered a request; when it first did (perf_counter)."""
        deadline = time.time() + timeout_s
        while True:
            seen = [at for at, r in list(self.regions) if r == region]
            if seen:
                return seen[0]
            if time.time() > deadline:
                raise AssertionError(f"traffic never reached {region}: {self.failed[-3:]}")
            time.sleep(0.2)

"""Serving across regions (issue 18 item 3): requests/s and p50/p99 latency through the
hub's endpoint of a deployment versus straight to the region's Ray Serve, and the
endpoint's failover time when a region is lost.

Two regions ``east``/``west``, a one-node Ray cluster each (127.0.43.5 / .6, 4 emulated
GPUs), a real hub (lease 4 s, grace 12 s) and a real agent thread per region; the
quickstart is trained and deployed with ``regions: [east, west]`` (1 replica, 1 GPU
each). The hub's RTT seam puts ``west`` 50 ms further, so ``east`` takes the traffic.

- a closed loop of C clients for D seconds to the hub's endpoint, then the same to
  east's Serve endpoint directly (same deployment, same replica): requests/s,
  client-side p50/p99, and the ratio hub/direct;
- failover: one client in a loop on the hub's endpoint; east's agent is stopped; the
  time from the stop to the first answer from west (the lease running out, then the
  router's 1 s cache), and how many requests failed meanwhile.

``--quick`` (CI) skips: minutes of Ray starts, training and Serve; the same path runs
in tests/hub/test_serve_regions.py (``long``).

    python -m benchmarks.bench_serve_regions [--quick] [--clients C] [--seconds D] [--no-write]
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import bench_serve
from tests.hub import region as rg
from tests.hub import serve_regions as sr

__all__ = ["main"]

IPS = {"east": "127.0.43.5", "west": "127.0.43.6"}


def _load_apart(url: str, token: str | None, clients: int, seconds: float) -> dict[str, Any]:
    """``bench_serve.load`` in a spawned process: the clients do not take the GIL from the hub
    and agents running in this one."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        return pool.submit(bench_serve.load, url, clients, seconds, token).result()


def _ready(dep: dict[str, Any]) -> bool:
    return dep["phase"] == "Ready" and all(r["healthy"] for r in dep["regions"])


def measure(clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tau-bench-serve-regions-") as tmp_s:
        tmp = Path(tmp_s)
        clusters = rg.start_regions(IPS, tmp / "regions")
        try:
            with sr.hub_with_regions(tmp, list(IPS), far_ip=IPS["west"]) as hub:
                agents = {
                    n: rg.AgentThread(hub, clusters[n], tmp / n, cluster_id=n).start() for n in IPS
                }
                try:
                    return _measure(hub, agents, clients, seconds)
                finally:
                    for agent in agents.values():
                        agent.stop()
        finally:
            rg.stop_regions(clusters)


def _measure(
    hub: Any, agents: dict[str, rg.AgentThread], clients: int, seconds: float
) -> dict[str, Any]:
    with hub.http() as c:
        run = rg.submit_run(c, rg.quickstart_yaml("--steps 20 --checkpoint-every 10"))
        rg.wait_run(c, run["id"], rg.finished, timeout=600)
        sr.deploy(c, "digits", run["id"], list(IPS))
        dep = sr.wait(c, "digits", _ready, timeout_s=600)
        direct = next(r["endpoint"] for r in dep["regions"] if r["region"] == "east")
        bench_serve.load(dep["endpoint"], 2, 3.0, hub.admin_token)  # warm both paths
        bench_serve.load(direct, 2, 3.0)
        via_hub = _load_apart(dep["endpoint"], hub.admin_token, clients, seconds)
        straight = _load_apart(direct, None, clients, seconds)
        with sr.Load(dep["endpoint"], hub.admin_token) as load:
            load.wait_for("east", timeout_s=60)
            cut = time.perf_counter()
            agents.pop("east").stop()
            moved = load.wait_for("west", timeout_s=120)
        failover = {"s": moved - cut, "failed": len(load.failed)}
        c.delete("/v1/serve/digits")
    return {"hub": via_hub, "direct": straight, "failover": failover}


def _section(r: dict[str, Any], clients: int, seconds: float, cmd: str) -> str:
    h, d, f = r["hub"], r["direct"], r["failover"]
    return (
        "## Serving across regions: the hub's endpoint vs straight to Ray Serve, failover\n\n"
        f"Command: `{cmd}` (2 cores shared with other sessions, load average "
        f"{r['load']:.0f} at the end; two one-node Ray regions, real hub and agents, the "
        "quickstart model, 1 replica with 1 emulated GPU per region).\n\n"
        f"| path ({clients} clients, {seconds:g} s each) | requests/s | p50 | p99 |\n"
        "| --- | --- | --- | --- |\n"
        f"| hub endpoint `/v1/endpoints/default/digits` | {h['rps']:.1f} | "
        f"{h['p50_ms']:.1f} ms | {h['p99_ms']:.1f} ms |\n"
        f"| straight to east's Serve proxy | {d['rps']:.1f} | {d['p50_ms']:.1f} ms | "
        f"{d['p99_ms']:.1f} ms |\n"
        f"| ratio hub / direct | {h['rps'] / d['rps']:.2f} | "
        f"{h['p50_ms'] / d['p50_ms']:.2f} | {h['p99_ms'] / d['p99_ms']:.2f} |\n\n"
        f"Failed requests: {h['failed']} through the hub, {d['failed']} direct. "
        f"Failover (east's agent stopped; lease 4 s, grace 12 s): first answer from west "
        f"{f['s']:.1f} s after the stop, {f['failed']} failed requests meanwhile (east's "
        "Serve still answered until the hub saw its lease run out). The clients run in a "
        "process of their own; the hub (one uvicorn worker, which forwards in the process "
        "that serves its API) and both agents share this one, and on this 2-core host the "
        "extra hop takes CPU that the Serve proxy and replica also need.\n"
    )


def main(argv: list[str] | None = None) -> int:
    return bench_serve.load_main(
        argv,
        "bench_serve_regions",
        "minutes of Ray, training and Serve; the same path runs in tests/hub/test_serve_regions.py",
        lambda clients, seconds: _section(
            {**measure(clients, seconds), "load": os.getloadavg()[0]},
            clients,
            seconds,
            "python -m benchmarks.bench_serve_regions",
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""Hub load on PostgreSQL: submissions, status reads, log tails and 100 regions' syncs.

One hub daemon (``tests/hub/ha_cluster.Replicas``) on a private PostgreSQL server. A
small asyncio + httpx client plays 100 simulated regions (register, then a sync every
second with a full state report every 10 s, as the agent does) and, in steps of
1, 2, 4, 8, 16, 32 concurrent users, researchers who each loop: submit a run, read its
status, tail its log. Per step: requests per second and p50/p99 per endpoint. The
saturation point is the first step whose throughput grows by less than 10 % over the
previous one (more users only add waiting).

    python -m benchmarks.bench_hub_load [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx

from benchmarks import report
from tests.hub import agent_builders as ab
from tests.hub import ha_cluster, pg_server

__all__ = ["main"]

HOST = "127.0.26.10"
REGIONS = 100
YAML = ab.ONE_GPU_RUN.format(name="load")
Samples = dict[str, list[float]]


async def _timed(samples: Samples, name: str, call: object) -> httpx.Response | None:
    """The response, its latency recorded; a failed request counts as an error."""
    t0 = time.perf_counter()
    try:
        r: httpx.Response = await call  # type: ignore[misc]
    except httpx.HTTPError:
        samples[f"{name} errors"].append(0.0)
        return None
    samples[name].append(time.perf_counter() - t0)
    return r


async def _region(http: httpx.AsyncClient, i: int, stop: asyncio.Event, samples: Samples) -> None:
    cid = f"sim{i:03d}"
    await _timed(
        samples,
        "register",
        http.post(f"/v1/agents/{cid}/register", json={"cluster_id": cid, "region": cid}),
    )
    beat = 0
    while not stop.is_set():
        body = {"report": ab.report(cid)} if beat % 10 == 0 else {}
        await _timed(samples, "agent sync", http.post(f"/v1/agents/{cid}/sync", json=body))
        beat += 1
        await asyncio.sleep(1.0)


async def _user(http: httpx.AsyncClient, stop: asyncio.Event, samples: Samples) -> None:
    while not stop.is_set():
        body = {"tau_yaml": YAML, "filename": "tau.yaml"}
        r = await _timed(samples, "submit", http.post("/v1/runs", json=body))
        if r is None or r.status_code != 201:
            continue
        run_id = r.json()["id"]
        await _timed(samples, "status", http.get(f"/v1/runs/{run_id}"))
        await _timed(samples, "log tail", http.get(f"/v1/runs/{run_id}/logs", params={"tail": 50}))


async def _step(url: str, token: str, users: int, seconds: float) -> tuple[Samples, float]:
    samples: Samples = defaultdict(list)
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=REGIONS + users + 10)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:
        tasks = [asyncio.create_task(_region(http, i, stop, samples)) for i in range(REGIONS)]
        tasks += [asyncio.create_task(_user(http, stop, samples)) for _ in range(users)]
        t0 = time.perf_counter()
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*tasks)
        return samples, time.perf_counter() - t0


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[q - 1] * 1000 if len(xs) > 1 else xs[0] * 1000


def run(levels: list[int], seconds: float) -> list[tuple[int, float, Samples]]:
    out = []
    with (
        tempfile.TemporaryDirectory(prefix="tau-bench-load-") as tmp,
        pg_server.pg_server(HOST) as pg,
    ):
        reps = ha_cluster.Replicas(Path(tmp), HOST, pg.new_database("load"), 1, 10.0)
        try:
            for users in levels:
                samples, took = asyncio.run(_step(reps.url, reps.admin_token, users, seconds))
                rps = sum(len(v) for k, v in samples.items() if "errors" not in k) / took
                out.append((users, rps, samples))
                print(f"{users} users: {rps:.0f} req/s", flush=True)
        finally:
            reps.stop()
    return out


def _section(results: list[tuple[int, float, Samples]], seconds: float) -> str:
    endpoints = ["submit", "status", "log tail", "agent sync"]
    head = " | ".join(f"{e} p50 / p99 ms" for e in endpoints)
    rows, saturated, prev = [], None, 0.0
    for users, rps, s in results:
        cells = " | ".join(
            f"{_pct(s[e], 50):.0f} / {_pct(s[e], 99):.0f}" if s[e] else "-" for e in endpoints
        )
        errs = sum(len(v) for k, v in s.items() if k.endswith("errors"))
        rows.append(
            f"| {users} | {rps:.0f} | {len(s['submit']) / seconds:.1f} | {errs} | {cells} |"
        )
        if saturated is None and prev and rps < prev * 1.1:
            saturated = users
        prev = rps
    sat = f"{saturated} concurrent users" if saturated else "not reached in these steps"
    return f"""## Hub load on PostgreSQL (100 simulated regions)

`python -m benchmarks.bench_hub_load --seconds {seconds:g}` (one hub daemon on
PostgreSQL 15, 100 simulated regions syncing every second with a full report every
10 s, N users each looping submit → status → log tail, {seconds:g} s per step;
shared 2-core machine, so the client, the hub and the database share the same cores).

| users | req/s (all) | submits/s | failed requests | {head} |
|---|---|---|---|{"---|" * len(endpoints)}
{chr(10).join(rows)}

Saturation (throughput grows < 10 % with more users): **{sat}**.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--seconds", type=float, default=20.0, help="per step")
    args = parser.parse_args(argv)
    levels, seconds = ([1, 4], 3.0) if args.quick else ([1, 2, 4, 8, 16, 32], args.seconds)
    section = _section(run(levels, seconds), seconds)
    print(section)
    if not args.quick and not args.no_write:
        report.write_section(section)


if __name__ == "__main__":
    main()

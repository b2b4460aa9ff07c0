"""Hub load on PostgreSQL: submissions, status reads, log tails and many regions' syncs.

Hub daemons (``tests/hub/ha_cluster.Replicas``, one or more replicas) on a private
PostgreSQL server. A small asyncio + httpx client plays ``--regions`` simulated regions
syncing as the idle agent does (``agent.Agent.run``: a long-poll of ``SYNC_WAIT_S``
that the hub answers early with new work, a full state report every ``REPORT_S``) and,
in steps of concurrent users, researchers who each loop: submit a run, read its status,
tail its log. Per step: requests per second and p50/p99 per endpoint. The saturation
point is the first step whose throughput grows by less than 10 % over the previous one
(more users only add waiting).

``--baseline SRC`` runs the same steps first against the hub code in ``SRC`` (a
checkout's ``src`` folder, e.g. a ``git worktree`` of an older commit) so that the
section compares both in one run on the same machine.

    python -m benchmarks.bench_hub_load [--quick] [--no-write] [--regions N]
        [--replicas R] [--baseline SRC]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import report
from tests.hub import agent_builders as ab
from tests.hub import ha_cluster, pg_server

__all__ = ["main"]

HOST = "127.0.26.10"
SYNC_WAIT_S = 1.0
"""The idle agent's long-poll (``AgentConfig.sync_s``)."""
REPORT_S = 10
"""Seconds between full state reports of an idle agent (``AgentConfig.report_s``)."""
YAML = ab.ONE_GPU_RUN.format(name="load")
Samples = dict[str, list[float]]


Reply = tuple[int, Any]
"""A response's status and JSON body."""


async def _timed(
    samples: Samples, name: str, http: aiohttp.ClientSession, method: str, path: str, **kw: Any
) -> Reply | None:
    """The reply, its latency recorded; a failed request counts as an error."""
    t0 = time.perf_counter()
    try:
        async with http.request(method, path, **kw) as r:
            reply = (r.status, await r.json())
    except (aiohttp.ClientError, TimeoutError):
        samples[f"{name} errors"].append(0.0)
        return None
    samples[name].append(time.perf_counter() - t0)
    if r.status >= 400:
        samples[f"{name} errors"].append(0.0)
    return reply


async def _region(
    http: aiohttp.ClientSession, i: int, stop: asyncio.Event, samples: Samples
) -> None:
    cid = f"sim{i:04d}"
    body = {"cluster_id": cid, "region": cid}
    await _timed(samples, "register", http, "POST", f"/v1/agents/{cid}/register", json=body)
    due = time.monotonic() + random.uniform(0, REPORT_S)  # regions report out of step
    while not stop.is_set():
        sync: dict[str, object] = {"wait_s": SYNC_WAIT_S}
        if time.monotonic() >= due:
            sync["report"], due = ab.report(cid), time.monotonic() + REPORT_S
        r = await _timed(samples, "agent sync", http, "POST", f"/v1/agents/{cid}/sync", json=sync)
        if r is None or r[0] != 200:
            await asyncio.sleep(SYNC_WAIT_S)


async def _user(http: aiohttp.ClientSession, stop: asyncio.Event, samples: Samples) -> None:
    body = {"tau_yaml": YAML, "filename": "tau.yaml"}
    while not stop.is_set():
        r = await _timed(samples, "submit", http, "POST", "/v1/runs", json=body)
        if r is None or r[0] != 201:
            await asyncio.sleep(0.1)
            continue
        run_id = r[1]["id"]
        await _timed(samples, "status", http, "GET", f"/v1/runs/{run_id}")
        tail = {"tail": 50}
        await _timed(samples, "log tail", http, "GET", f"/v1/runs/{run_id}/logs", params=tail)


async def _load(
    urls: list[str], token: str, regions: int, levels: list[int], seconds: float
) -> list[tuple[int, Samples, float]]:
    """Every step against one fleet: ``regions`` register once and sync throughout, as a
    real fleet does, and each step adds its ``users`` for ``seconds``. Regions and users
    are spread over the replicas' ``urls``, each with a kept connection as an agent has
    (aiohttp: httpx's pool spent 20 ms of client CPU per request with hundreds of
    connections, and the client, not the hub, saturated)."""
    samples: Samples = defaultdict(list)
    fleet_stop = asyncio.Event()
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=120)
    out: list[tuple[int, Samples, float]] = []
    async with contextlib.AsyncExitStack() as stack:
        https = [
            await stack.enter_async_context(
                aiohttp.ClientSession(
                    base_url=u,
                    headers=headers,
                    timeout=timeout,
                    connector=aiohttp.TCPConnector(limit=0),
                )
            )
            for u in urls
        ]
        fleet = [
            asyncio.create_task(_region(https[i % len(https)], i, fleet_stop, samples))
            for i in range(regions)
        ]
        await asyncio.sleep(REPORT_S + 2)  # registered, and every region has reported
        for users in levels:
            stop = asyncio.Event()
            samples.clear()
            tasks = [
                asyncio.create_task(_user(https[i % len(https)], stop, samples))
                for i in range(users)
            ]
            t0 = time.perf_counter()
            await asyncio.sleep(seconds)
            took = time.perf_counter() - t0
            out.append((users, {k: list(v) for k, v in samples.items()}, took))
            stop.set()
            await asyncio.gather(*tasks)
        fleet_stop.set()
        await asyncio.gather(*fleet)
    return out


def _pct(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100)[q - 1] * 1000 if len(xs) > 1 else xs[0] * 1000


Step = tuple[int, float, Samples]


def run(load: Load, src: str | None = None) -> list[Step]:
    """Every step of ``load`` against fresh hub replicas (the code in ``src`` if given)."""
    out = []
    saved = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = src  # the replicas import the hub from there
    try:
        with (
            tempfile.TemporaryDirectory(prefix="tau-bench-load-") as tmp,
            pg_server.pg_server(HOST) as pg,
        ):
            reps = ha_cluster.Replicas(
                Path(tmp), HOST, pg.new_database("load"), load.replicas, 10.0
            )
            try:
                steps = asyncio.run(
                    _load(
                        list(reps.procs), reps.admin_token, load.regions, load.levels, load.seconds
                    )
                )
                for users, samples, took in steps:
                    rps = sum(len(v) for k, v in samples.items() if "errors" not in k) / took
                    out.append((users, rps, samples))
                    print(f"{src or 'this tree'}: {users} users: {rps:.0f} req/s", flush=True)
            finally:
                reps.stop()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return out


@dataclasses.dataclass(frozen=True)
class Load:
    """What one run of the benchmark offers the hub."""

    regions: int
    replicas: int
    levels: list[int]
    seconds: float


def _table(results: list[Step], seconds: float) -> str:
    endpoints = ["submit", "status", "log tail", "agent sync"]
    head = " | ".join(f"{e} p50 / p99 ms" for e in endpoints)
    rows = []
    for users, rps, s in results:
        cells = " | ".join(
            f"{_pct(s[e], 50):.0f} / {_pct(s[e], 99):.0f}" if s[e] else "-" for e in endpoints
        )
        errs = sum(len(v) for k, v in s.items() if k.endswith("errors"))
        rows.append(
            f"| {users} | {rps:.0f} | {len(s['submit']) / seconds:.1f} | {errs} | {cells} |"
        )
    return f"""| users | req/s (all) | submits/s | failed requests | {head} |
|---|---|---|---|{"---|" * len(endpoints)}
{chr(10).join(rows)}

Saturation (throughput grows < 10 % with more users): **{_saturation(results)}**."""


def _saturation(results: list[Step]) -> str:
    prev = 0.0
    for users, rps, _ in results:
        if prev and rps < prev * 1.1:
            return f"{users} concurrent users"
        prev = rps
    return "not reached in these steps"


def _section(load: Load, now: list[Step], before: list[Step] | None, base: str) -> str:
    title = f"## Hub load on PostgreSQL ({load.regions} regions, {load.replicas} replica"
    title += "s)" if load.replicas > 1 else ")"
    what = f"""`python -m benchmarks.bench_hub_load --regions {load.regions} --replicas \
{load.replicas} --seconds {load.seconds:g}{" --baseline " + base if before else ""}`: hub
daemons on PostgreSQL 15, {load.regions} simulated regions syncing as the idle agent does
(long-poll of {SYNC_WAIT_S:g} s, a full report every {REPORT_S} s), N users each looping
submit → status → log tail, {load.seconds:g} s per step; shared 2-core machine, so the
client, the hub and the database share the same cores."""
    out = [title, "", what, "", "This tree:", "", _table(now, load.seconds)]
    if before is not None:
        ratio = max(r for _, r, _ in now) / max(max(r for _, r, _ in before), 1e-9)
        out += ["", f"Before (`{base}`), same run:", "", _table(before, load.seconds)]
        out += ["", f"Peak throughput, this tree / before: **{ratio:.1f} times**."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--seconds", type=float, default=10.0, help="per step")
    parser.add_argument("--regions", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--levels", default="1,2,4,8,16,32", help="users per step")
    parser.add_argument("--baseline", help="a src folder of the code to compare with")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    load = Load(args.regions, args.replicas, levels, args.seconds)
    if args.quick:
        load = Load(50, args.replicas, [1, 4], 3.0)
    before = run(load, args.baseline) if args.baseline else None
    section = _section(load, run(load), before, args.baseline or "")
    print(section)
    if not args.quick and not args.no_write:
        report.write_section(section)


if __name__ == "__main__":
    main()

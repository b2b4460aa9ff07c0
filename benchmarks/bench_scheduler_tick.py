"""The hub's scheduling tick against the size of its store (issue 32 item 4: the tick's
cost must not grow with the number of finished runs).

One in-process hub on SQLite: ``CLUSTERS`` clusters registered through the agent API
(one node of 4 emulated GPUs each, ``tests.hub.platform_builders``), one 4-GPU run placed
on each (its attempt set running in the store, as the agents' reports would; the reports
show every GPU in use), ``WAITING`` runs admitted and waiting for capacity, and N
finished runs, each with its released attempt, written in bulk. Measured: ``TICKS``
calls of ``hub.server.scheduler.tick``: the CPU seconds of this process per tick
(median, p90; the store is in-process, so this is the tick's whole cost) and the write
statements it ran. ``--baseline SRC`` measures the code in ``SRC`` (a ``git worktree``'s
``src``) on the same sizes in the same run. Writes "## Scheduler tick against the
store's size" in docs/BENCHMARKS.md.

    python -m benchmarks.bench_scheduler_tick [--quick] [--no-write] [--baseline SRC]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from benchmarks import bench_hub_memory as hub_memory
from tests.hub import agent_builders as ab
from tests.hub import platform_builders as pb

__all__ = ["main", "measure"]

CLUSTERS = 50
WAITING = 50
TICKS = 30

PLATFORM = pb.platform(
    {f"c{i}": 1.0 for i in range(CLUSTERS)},
    pb.TENANCY.replace("nominal: 8", "nominal: 100000"),
)
FULL_NODE_RUN = ab.ONE_GPU_RUN.replace("gpus: 1", "gpus: 4")


def _fill(engine: sa.Engine, n: int) -> None:
    """``n`` finished runs, each with its released attempt, in bulk."""
    from taugrid.store import schema as t

    now, spec = time.time(), {"workers": 1, "gpus_per_worker": 1, "name": "b", "outputs": []}
    with engine.begin() as c:
        for lo in range(0, n, 5000):
            ids = [(i, f"done-{i:06d}") for i in range(lo, min(n, lo + 5000))]
            c.execute(t.runs.insert(), [_run_row(rid, i, spec, now) for i, rid in ids])
            c.execute(t.attempts.insert(), [_attempt_row(rid, i, now) for i, rid in ids])


def _run_row(rid: str, i: int, spec: dict[str, Any], now: float) -> dict[str, Any]:
    """bench_hub_memory's finished run, on one of this fleet's clusters, a million seconds
    older."""
    row = hub_memory.run_row(rid, i, spec, now - 1e6)
    return {**row, "name": "done", "priority": 1000, "cluster_id": f"c{i % CLUSTERS}"}


def _attempt_row(rid: str, i: int, now: float) -> dict[str, Any]:
    return {
        "run_id": rid,
        "number": 1,
        "cluster_id": f"c{i % CLUSTERS}",
        "state": "succeeded",
        "revoked": False,
        "released": True,
        "reason": "exit code 0",
        "nodes": [],
        "placement": {"cluster": f"c{i % CLUSTERS}"},
        "created_at": now - 10 * i - 1e6,
        "started_at": now - 10 * i - 1e6,
        "ended_at": now - 10 * i - 1e6 + 5,
    }


def _started(engine: sa.Engine) -> None:
    """The placed runs' attempts running, as the agents' reports would make them."""
    from taugrid.store import schema as t

    now = time.time()
    with engine.begin() as c:
        c.execute(
            t.attempts.update()
            .where(t.attempts.c.released == sa.false())
            .values(state="running", started_at=now)
        )
        c.execute(t.runs.update().where(t.runs.c.state == "placed").values(state="running"))


def _count_writes(engine: sa.Engine) -> list[int]:
    """A counter of the INSERT/UPDATE/DELETE statements ``engine`` runs from now on."""
    count = [0]

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _seen(_c: Any, _cur: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE"):
            count[0] += 1

    return count


def measure(n: int, ticks: int = TICKS) -> dict[str, float]:
    """The tick's CPU milliseconds (median, p90) and its write statements, ``n`` runs stored."""
    from taugrid import payloads as wire
    from taugrid.hub.agents import agents
    from taugrid.hub.runs import runs
    from taugrid.hub.server import scheduler
    from taugrid.scheduling import cycle
    from taugrid.store import db
    from tests.hub.harness import make_hub

    with tempfile.TemporaryDirectory(prefix="tau-bench-tick-") as tmp:
        home = Path(tmp)
        (home / "platform.yaml").write_text(PLATFORM)
        engine = db.open_engine(f"sqlite:///{home / 'hub.db'}")
        hub = make_hub(engine, home / "home", home / "platform.yaml", lease_s=3600.0)
        policy = cycle.policy_from(hub.platform.scheduling)
        clusters = [f"c{i}" for i in range(CLUSTERS)]
        for c in clusters:
            agents.register(hub, wire.AgentRegister(cluster_id=c, region=c))
            agents.sync(hub, c, wire.AgentSync.model_validate({"report": ab.report(c)}))
        _fill(engine, n)
        for i in range(CLUSTERS):  # one run on each cluster's every GPU
            runs.submit(hub, wire.SubmitRequest(tau_yaml=FULL_NODE_RUN.format(name=f"f{i}")), "a")
        scheduler.tick(hub, policy)
        _started(engine)  # as their agents would report them
        for c in clusters:
            agents.sync(hub, c, wire.AgentSync.model_validate({"report": ab.report(c, 0)}))
        for i in range(WAITING):
            runs.submit(hub, wire.SubmitRequest(tau_yaml=ab.ONE_GPU_RUN.format(name=f"w{i}")), "a")
        scheduler.tick(hub, policy)  # admits the waiting runs: nothing has room
        writes, cpu = _count_writes(engine), []
        for _ in range(ticks):
            t0 = time.process_time()
            decisions = scheduler.tick(hub, policy)
            cpu.append(time.process_time() - t0)
            assert len(decisions) == WAITING and not any(d.cluster_id for d in decisions)
        per_tick = writes[0] / ticks
        engine.dispose()
    cpu.sort()
    return {
        "p50_ms": 1000 * statistics.median(cpu),
        "p90_ms": 1000 * cpu[int(0.9 * len(cpu))],
        "writes_per_tick": per_tick,
    }


def _measure_in(n: int, src: str | None) -> dict[str, float]:
    """``measure(n)`` in a fresh process on the code in ``src`` (this tree when None)."""
    root = Path(__file__).resolve().parents[1]
    path = os.pathsep.join([src or str(root / "src"), str(root)])
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_scheduler_tick", "--measure", str(n)],
        env={**os.environ, "PYTHONPATH": path},
        check=True,
        capture_output=True,
        text=True,
        timeout=1800,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--baseline", help="a src folder of the code to compare with")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, 3 if args.measure < 100 else TICKS)))
        return
    sizes = [10] if args.quick else [0, 10_000, 100_000]
    rows = []
    for n in sizes:
        for label, src in [
            ("this tree", None),
            *([("before", args.baseline)] if args.baseline else []),
        ]:
            r = _measure_in(n, src)
            rows.append(
                f"| {n:,} | {label} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} "
                f"| {r['writes_per_tick']:.0f} |"
            )
            print(rows[-1], flush=True)
    if args.quick or args.no_write:
        return
    _write(rows, args.baseline)


def _write(rows: list[str], baseline: str | None) -> None:
    from benchmarks import report

    base = f" --baseline {baseline}" if baseline else ""
    report.write_section(
        "## Scheduler tick against the store's size\n\n"
        f"`python -m benchmarks.bench_scheduler_tick{base}`: one in-process hub on SQLite, "
        f"{CLUSTERS} clusters (one 4-GPU node each, every GPU in use by a placed run), "
        f"{WAITING} runs admitted and waiting for capacity, N finished runs with their "
        f"released attempts; {TICKS} ticks. CPU milliseconds of the process per tick "
        "(the store is in-process: the tick's whole cost) and the write statements "
        "(INSERT, UPDATE, DELETE) it ran.\n\n"
        "| finished runs | code | tick p50 (ms) | tick p90 (ms) | writes/tick |\n"
        "| ---: | --- | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    main()

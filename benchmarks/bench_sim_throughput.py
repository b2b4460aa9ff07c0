"""Scheduler throughput: decisions/s and decision latency of ``scheduling.cycle.schedule``.

100 regions x 100 nodes (one 100-node cluster per region, 8 GPUs per node, A100/H100,
seeded random free capacity) and 10,000 pending admitted runs, on one core. Two
policies: ``cycle.default_policy()`` as is, and ``scheduling.packing.summary.fast_policy()``
(same decisions; memoised per-cluster summaries). Throughput = decisions / wall time of
one cycle over all pending runs; latency = one-run cycles against the same snapshot.
Writes "## Scheduler throughput".

    python -m benchmarks.bench_sim_throughput [--quick] [--runs N] [--no-write]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from benchmarks import bench_sim_doc as doc
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap
from taugrid.scheduling.packing import summary

__all__ = ["build", "main", "measure"]

TITLE = "Scheduler throughput"


def build(
    regions: int, nodes: int, runs: int, seed: int = 7
) -> tuple[snap.Snapshot, list[snap.PendingRun]]:
    rng = random.Random(seed)
    clusters = []
    for r in range(regions):
        model = "A100" if r % 2 else "H100"
        views = tuple(
            snap.NodeView(f"c{r:03d}-n{i:03d}", model, 8, rng.choice([0, 2, 4, 8, 8]), 96, 1024)
            for i in range(nodes)
        )
        clusters.append(
            snap.ClusterView(
                f"c{r:03d}", f"r{r:03d}", True, views, cost_per_gpu_hour=rng.uniform(1, 5)
            )
        )
    pending = [
        snap.PendingRun(
            run_id=f"run{i:05d}",
            team="t",
            priority=rng.choice([0, 0, 10]),
            created_at=float(i),
            workers=rng.choice([1, 1, 2, 4]),
            gpus_per_worker=rng.choice([1, 2, 4, 8]),
            cpus_per_worker=8,
            memory_per_worker=64,
            gpu_model=rng.choice(["A100", "H100", None]),
            admitted=True,
        )
        for i in range(runs)
    ]
    return snap.Snapshot(now=0.0, clusters=tuple(clusters), quotas=()), pending


def measure(
    policy: cycle.Policy, snapshot: snap.Snapshot, pending: list[snap.PendingRun], samples: int
) -> dict[str, float]:
    t0 = time.perf_counter()
    decisions = cycle.schedule(snapshot, pending, policy)
    took = time.perf_counter() - t0
    latencies = []
    for run in pending[:samples]:
        t1 = time.perf_counter()
        cycle.schedule(snapshot, [run], policy)
        latencies.append((time.perf_counter() - t1) * 1000)
    latencies.sort()
    return {
        "runs": len(pending),
        "placed": sum(d.outcome is cycle.Outcome.PLACED for d in decisions),
        "per_s": len(decisions) / took,
        "p50_ms": statistics.median(latencies),
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 regions x 20 nodes, 200 runs")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument(
        "--stock-runs",
        type=int,
        default=1_000,
        help="pending runs for the (slow) stock policy's cycle",
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    regions, nodes, runs = (10, 20, 200) if args.quick else (100, 100, args.runs)
    snapshot, pending = build(regions, nodes, runs)
    fast = measure(summary.fast_policy(), snapshot, pending, 50 if args.quick else 300)
    stock_n = min(runs, 50 if args.quick else args.stock_runs)
    stock = measure(cycle.default_policy(), snapshot, pending[:stock_n], 20 if args.quick else 100)
    for name, r in (("default_policy", stock), ("fast_policy", fast)):
        print(
            f"throughput {name}: {r['per_s']:.0f} decisions/s over {r['runs']:.0f} runs, "
            f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms",
            flush=True,
        )
    if args.quick or args.no_write:
        return
    doc.write_section(TITLE, _body(regions, nodes, stock_n, stock, fast))


def _body(
    regions: int, nodes: int, stock_n: int, stock: dict[str, float], fast: dict[str, float]
) -> str:
    rows = [
        [
            name,
            f"{r['runs']:.0f}",
            f"{r['placed']:.0f}",
            f"{r['per_s']:.0f}",
            f"{r['p50_ms']:.1f}",
            f"{r['p99_ms']:.1f}",
        ]
        for name, r in (("cycle.default_policy()", stock), ("packing.summary.fast_policy()", fast))
    ]
    verdict = "meets" if fast["per_s"] >= 1000 and fast["p99_ms"] < 50 else "misses"
    body = (
        f"{regions} regions x {nodes} nodes (8 GPUs each), pending admitted runs of 1-4 workers x\n"
        "1-8 GPUs; one cycle of `scheduling.cycle.schedule` on one core. The stock policy's\n"
        f"cycle uses the first {stock_n:,} runs (it is slow); latency = one-run cycles.\n\n"
        f"Command: `python -m benchmarks.bench_sim_throughput`  \nMachine: {doc.machine()}\n\n"
        + doc.table(["policy", "pending", "placed", "decisions/s", "p50 ms", "p99 ms"], rows)
        + f"\nTarget ≥ 1,000 decisions/s and p99 < 50 ms: the fast policy {verdict} it.\n"
        "The stock cycle now normalises weights once per cycle, skips weight-0 scorers,\n"
        "bounds `FitFilter` by cached per-cluster free GPUs and counts fit per node without\n"
        "building state (136 → 815 decisions/s on this benchmark). What remains: a\n"
        "`ClusterVerdict` per cluster per run (kept for explain-placement), the joined\n"
        "reasons of runs that fit nowhere, and `cycle.reserve` (a `dataclasses.replace`\n"
        "per node tried); next steps are top-k verdicts unless explain asks for all and an\n"
        "arithmetic `reserve`.\n"
    )
    return body


if __name__ == "__main__":
    main()

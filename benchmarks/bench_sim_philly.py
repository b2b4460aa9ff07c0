"""Queueing on the Microsoft Philly trace: JCT of queue-order policies, side by side.

Event-driven replay (``taugrid.sim.philly``) of the whole trace (82,247 jobs) on one GPU
pool sized to it (offered load 0.9, 8-GPU nodes) under FIFO, SJF (oracle), SRTF
(oracle, preemptive), 2D-LAS (Tiresias-style) and TauGrid's default (no oracle, learns
from finished jobs). Writes "## Scheduling: queueing (Microsoft Philly)".

    python -m benchmarks.bench_sim_philly [--quick] [--jobs N] [--start I] [--no-write]

``--quick``: a 1,500-job window; prints only.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks import bench_sim_doc as doc
from taugrid.scheduling import queueing
from taugrid.sim import philly, traces

__all__ = ["main", "run"]

TITLE = "Scheduling: queueing (Microsoft Philly)"


def run(start: int, count: int | None, load: float) -> tuple[int, int, list[philly.QueueResult]]:
    jobs = philly.window(traces.load_philly(), start, count)
    capacity = philly.size_cluster(jobs, load)
    results = []
    for name in queueing.QUEUE_POLICIES:
        t0 = time.perf_counter()
        results.append(philly.simulate(jobs, name, capacity))
        print(
            f"philly {name}: avg JCT {results[-1].avg_jct / 3600:.2f} h "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    return len(jobs), capacity, results


def _rows(results: list[philly.QueueResult]) -> list[list[str]]:
    fifo = results[0]
    rows = []
    for r in results:
        cells = [r.policy]
        for value, base in (
            (r.avg_jct, fifo.avg_jct),
            (r.p50_jct, fifo.p50_jct),
            (r.p99_jct, fifo.p99_jct),
            (r.avg_queueing, fifo.avg_queueing),
        ):
            cells.append(f"{value / 3600:.2f} ({value / base:.2f})")
        cells.append(f"{r.utilisation:.2f} ({r.utilisation / fifo.utilisation:.2f})")
        cells.append(str(r.preemptions))
        rows.append(cells)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,500-job window, print only")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=None, help="window size (default: all)")
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    try:
        traces.load_philly()
    except traces.TraceMissing as exc:
        print(f"skipped philly benchmark: {exc}", file=sys.stderr)
        return
    count = 1500 if args.quick else args.jobs
    started = time.perf_counter()
    n, capacity, results = run(args.start, count, args.load)
    if args.quick or args.no_write:
        return
    took = time.perf_counter() - started
    doc.write_section(TITLE, _body(args, n, capacity, count, results, took))


def _body(
    args: argparse.Namespace,
    n: int,
    capacity: int,
    count: int | None,
    results: list[philly.QueueResult],
    took: float,
) -> str:
    by = {r.policy: r for r in results}
    ours, fifo, srtf = by["TauGrid"], by["FIFO"], by["SRTF"]
    header = [
        "policy",
        "avg JCT h (x FIFO)",
        "p50 JCT h",
        "p99 JCT h",
        "avg queueing h",
        "utilisation",
        "preemptions",
    ]
    plot = (
        doc.plot_lines(
            "philly_jct",
            {"avg JCT (h)": ([r.policy for r in results], [r.avg_jct / 3600 for r in results])},
            xlabel="policy",
            ylabel="average JCT (hours)",
            title="Philly: average JCT",
            bar=True,
        )
        or ""
    )
    command = "python -m benchmarks.bench_sim_philly" + (f" --jobs {count}" if count else "")
    body = (
        f"{n:,} jobs (window from job {args.start}, submission order), one pool of "
        f"{capacity} GPUs\n"
        f"(offered load {args.load}: GPU-seconds / trace span / capacity, rounded up to 8-GPU\n"
        "nodes). Whole GPUs, no topology; a preempted job keeps its progress and pays no\n"
        "restart cost (same for every preemptive policy). Every decision goes through\n"
        "`taugrid.scheduling.queueing` (rank → BestEffortFIFO `select`).\n\n"
        f"Command: `{command}`  \nMachine: {doc.machine()}; "
        f"{took / 60:.1f} min in all.\n\n" + doc.table(header, _rows(results)) + "\n" + plot + "\n"
        f"TauGrid default: {ours.avg_jct / fifo.avg_jct:.3f} x FIFO average JCT (target ≤ 0.5) and "
        f"{ours.avg_jct / srtf.avg_jct:.3f} x SRTF-oracle (target ≤ 1.2).\n"
        "It ranks by GPUs x a learned remaining-time estimate: the 10th percentile of\n"
        "`D | D > attained` over finished jobs of the same virtual cluster and GPU count\n"
        "(then all jobs, then 'as long again'). Utilisation is GPU-seconds served over\n"
        "capacity x span to the last completion: policies that finish long jobs last show\n"
        "lower utilisation for the same work.\n"
    )
    return body


if __name__ == "__main__":
    main()

"""Queueing on the Microsoft Philly trace with a restart cost charged per preemption.

The same replay as ``bench_sim_philly`` (``taugrid.sim.philly``, one pool at offered load
0.9), every policy twice: preemption free (a suspended job keeps its progress) and
charged ``philly.RESTART`` (60 s to restart, rolled back to its last checkpoint, one
every 10 min of progress), the same for every preemptive policy. TauGrid runs with its
preemption guard (the default, ``queueing.MIN_RUN_S``) and without it (``min_run_s=0``,
the policy measured in "Scheduling: queueing (Microsoft Philly)").
Writes "## Scheduling: queueing with a restart cost (Microsoft Philly)".

    python -m benchmarks.bench_sim_philly_restart [--quick] [--jobs N] [--start I] [--no-write]

``--quick`` (CI smoke): TauGrid and FIFO on a 300-job window; prints only (the full
table's slowest replay takes minutes even on 1,500 jobs).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time

from benchmarks import bench_sim_doc as doc
from taugrid.scheduling import queueing
from taugrid.sim import philly, traces

__all__ = ["main"]

TITLE = "Scheduling: queueing with a restart cost (Microsoft Philly)"
UNGUARDED = "TauGrid, no guard"
ROWS = (*queueing.QUEUE_POLICIES, UNGUARDED)
Task = tuple[int, int | None, str, bool]  # start, count, row, charged


def _sim(task: Task) -> philly.QueueResult:
    start, count, row, charged = task
    jobs = philly.window(traces.load_philly(), start, count)
    capacity = philly.size_cluster(jobs, 0.9)
    name, guard = ("TauGrid", 0.0) if row == UNGUARDED else (row, queueing.MIN_RUN_S)
    cost = philly.RESTART if charged else philly.RestartCost.free()
    knobs = queueing.TauGridKnobs(min_run_s=guard)
    t0 = time.perf_counter()
    r = philly.simulate(jobs, name, capacity, knobs=knobs, cost=cost)
    print(
        f"philly {row} {'charged' if charged else 'free'}: avg JCT {r.avg_jct / 3600:.2f} h, "
        f"{r.preemptions} preemptions ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    return r


def run(
    start: int, count: int | None, rows: tuple[str, ...] = ROWS
) -> dict[tuple[str, bool], philly.QueueResult]:
    """Every row free and charged (a non-preemptive policy once: it never pays)."""
    tasks: list[Task] = []
    for row in rows:
        preemptive = row == UNGUARDED or queueing.make_policy(row).preemptive
        tasks += [
            (start, count, row, charged) for charged in ((False, True) if preemptive else (False,))
        ]
    workers = max(1, min(len(tasks), os.cpu_count() or 1))
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(tasks, pool.map(_sim, tasks), strict=True))
    out = {(row, charged): r for (_, _, row, charged), r in done.items()}
    for row in rows:  # non-preemptive: charged = free
        out.setdefault((row, True), out[(row, False)])
    return out


def _rows(res: dict[tuple[str, bool], philly.QueueResult]) -> list[list[str]]:
    srtf = res[("SRTF", True)].avg_jct
    rows = []
    for row in ROWS:
        free, paid = res[(row, False)], res[(row, True)]
        rows.append(
            [
                row,
                f"{free.avg_jct / 3600:.2f}",
                f"{free.preemptions:,}",
                f"{paid.avg_jct / 3600:.2f}",
                f"{paid.avg_jct / srtf:.3f}",
                f"{paid.p99_jct / 3600:.1f}",
                f"{paid.preemptions:,}",
                f"{paid.lost_gpu_hours:,.0f}",
                f"{paid.utilisation:.2f}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run, print only")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=None, help="window size (default: all)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    try:
        traces.load_philly()
    except traces.TraceMissing as exc:
        print(f"skipped philly restart benchmark: {exc}", file=sys.stderr)
        return
    started = time.perf_counter()
    if args.quick:
        run(args.start, 300, ("FIFO", "TauGrid"))
        return
    count = args.jobs
    res = run(args.start, count)
    if args.no_write:
        return
    took = time.perf_counter() - started
    doc.write_section(TITLE, _body(args.start, count, res, took))


def _body(
    start: int, count: int | None, res: dict[tuple[str, bool], philly.QueueResult], took: float
) -> str:
    any_result = res[("FIFO", False)]
    cost = philly.RESTART
    command = "python -m benchmarks.bench_sim_philly_restart" + (
        f" --start {start} --jobs {count}" if count else ""
    )
    header = [
        "policy",
        "free: avg JCT h",
        "free: preemptions",
        "charged: avg JCT h",
        "charged: x SRTF",
        "charged: p99 JCT h",
        "charged: preemptions",
        "charged: GPU-h lost",
        "charged: utilisation",
    ]
    machine = doc.machine().replace("one process", "one process per run")
    return (
        f"{any_result.jobs:,} jobs (from job {start}), one pool of {any_result.capacity} GPUs "
        "(offered load 0.9), as in the section above.\n"
        f"Charged: each preemption costs the job {cost.restart_s:.0f} s of restart (GPUs held, "
        "no progress) and the work since its last checkpoint (one every "
        f"{cost.checkpoint_s / 60:.0f} min of progress: {cost.checkpoint_s / 120:.0f} min "
        "lost on average); free: it keeps its progress. The same for every preemptive "
        "policy (SRTF, 2D-LAS, TauGrid); FIFO and SJF never preempt. TauGrid's guard: a "
        f"job that (re)started less than {queueing.MIN_RUN_S / 60:.0f} min ago is not "
        "preempted (`queueing.MIN_RUN_S`, the default); 'no guard' is TauGrid as measured "
        "in the section above.\n\n"
        f"Command: `{command}`  \nMachine: {machine}; {took / 60:.1f} min in all.\n\n"
        + doc.table(header, _rows(res))
        + "\n"
        + NOTES
    )


NOTES = """\
**Which queueing policy is live.** None of the policies above orders the live hub's
queue. Live, `scheduling.cycle` takes pending runs by priority, then submission time,
through Kueue-style admission (`scheduling.admission`: BestEffortFIFO or StrictFIFO per
team, quota, priority preemption and reclaim); within one priority that is the FIFO row
(BestEffortFIFO: later runs that fit go first). The TauGrid order (learned remaining
GPU-time, `scheduling.queueing`) is measured here in the simulator only; it is not
wired into the hub.
"""


if __name__ == "__main__":
    main()

"""Queueing on the Microsoft Philly trace: JCT of queue-order policies, side by side.

Event-driven replay (``taugrid.sim.philly``) of the whole trace (82,247 jobs) on one GPU
pool sized to it (offered load 0.9, 8-GPU nodes) under FIFO, SJF (oracle), SRTF
(oracle, preemptive), 2D-LAS (Tiresias-style) and TauGrid's default (no oracle, learns
from finished jobs). Writes "## Scheduling: queueing (Microsoft Philly)".

    python -m benchmarks.bench_sim_philly [--quick] [--jobs N] [--start I] [--no-write]

Then the held-out evidence (``heldout``): the same window cut into disjoint windows,
each replayed on its own, and TauGrid's two knobs chosen on the first half only and
judged on the second.

``--quick``: a 1,500-job window; prints only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import os
import sys
import time

from benchmarks import bench_sim_doc as doc
from taugrid.scheduling import queueing
from taugrid.sim import philly, traces

__all__ = ["main", "run"]

TITLE = "Scheduling: queueing (Microsoft Philly)"

ABLATIONS = """\
What moved TauGrid's ratio to SRTF (whole trace, TauGrid alone, measured while tuning;
the ratio moves by ±2 % with such knobs, and they were tuned on this trace). Rows with
"+" add up to the default; the rows after them each change one thing of the
configuration being tuned at that time:

| change | x SRTF |
|---|---:|
| all-time history per (VC, GPUs), rank GPUs x estimate (before) | 1.225 |
| + fall back to the same GPU count before all jobs | 1.224 |
| + only the last 100 finished jobs per row, rebuilt every 10 records | 1.218 |
| + rank GPUs^1.25 x estimate | 1.208 |
| + rebuilt after every record | 1.206 |
| + 15th instead of 10th percentile (20th: 1.208) | 1.203 |
| + GPUs^1.35 (the default) | 1.198 |
| GPUs^1.3 / ^1.4 / ^1.5 instead of ^1.35 | 1.202 / 1.206 / 1.213 |
| minimum of 100-job and all-time estimates / their geometric mean | 1.224 / 1.209 |
| at least 30 or 40 (not 20) jobs above the attained time | 1.210 |
| window 200 / 300 instead of 100 | 1.224 / 1.245 |
| GPUs^0.8 / GPUs^1.5 (all-time history) | 1.254 / 1.223 |
| Gittins index of the group's history instead of the 10th percentile | 1.262 |
| siblings (same VC and GPUs, submitted within 60 s) finished first | 1.225 |
| running jobs' rank halved (fewer preemptions) | 1.243 |
| a job past its estimate conditioned on the next bin, not 'as long again' | 1.401 |

Sensitivity of the default (whole trace, TauGrid alone, one knob moved at a time
from the default; re-measured for this table except the ^1.3/^1.4/^1.5 cells, which
are from the tuning above). Both knobs were chosen on this trace; no value in this
range does better than the default, and the range spans 1.198-1.223. One cell, e.g.:
`python -m taugrid.sim philly --policy TauGrid --gpu-power 1.5 --quantile 0.15`

| GPU exponent (percentile 15th) | 1.0 | 1.3 | **1.35** | 1.4 | 1.5 | 1.7 |
|---|---:|---:|---:|---:|---:|---:|
| x SRTF | 1.216 | 1.202 | **1.198** | 1.206 | 1.213 | 1.223 |

| percentile of D given D > attained (exponent 1.35) | 10th | **15th** | 20th | 25th |
|---|---:|---:|---:|---:|
| x SRTF | 1.209 | **1.198** | 1.209 | 1.208 |

Tried in a second round (each from the default, TauGrid alone), none kept:

| change | x SRTF |
|---|---:|
| all-jobs fallback over every finished job, not the last 100 (estimates for long jobs) | 1.226 |
| running jobs' rank x 0.9 (hysteresis against churn): 92k preemptions, not 787k | 1.204 |
| group estimate shrunk to the GPU-count / all-jobs one, log space, weight n/(n+20) | 1.211 |

Tried in a third round, aimed at where the gap is (each from the default, TauGrid
alone; rank rules measured with a variant of `TauGridQueue.rank`, not kept in the code).
"past its estimate" = fewer than 20 recent jobs of its group (then GPU count, then
all jobs) ran longer than it has, so it is ranked 'as long again'. A rule had to beat
the default on the whole trace and on the held-out halves; none did:

| change | whole x SRTF | first half | second half |
|---|---:|---:|---:|
| default (GPUs^1.35, 15th percentile) | 1.198 | 1.042 | 1.136 |
| past its estimate: GPUs^1.0 x attained (LAS on GPU-time, as Tiresias) | 1.213 | 1.043 | 1.139 |
| past its estimate: GPUs^1.7 x attained | 1.210 | 1.042 | 1.133 |
| past its estimate: behind every estimated job (LAS among them) | 1.255 | — | 1.221 |
| aging, response ratio: rank / (1 + waited / estimate) | 1.322 | — | — |
| aging, Tiresias starvation guard: first place after waiting 10 x its run time | 1.348 | — | — |
| whole history of the GPU count before all jobs (a width's tail) | 1.202 | 1.042 | 1.132 |
| ServerFilling (see below) instead of BestEffortFIFO `select` | 1.208 | 1.051 | 1.146 |

ServerFilling (Grosof, Scully, Harchol-Balter, Scheller-Wolf, SIGMETRICS 2023, optimal
for mean response time of multiserver jobs in heavy traffic): take the shortest
prefix of the rank order that asks for the whole pool, serve it widest first, then
backfill in rank order.

Where the gap is (whole trace, per-job JCT of the TauGrid and SRTF runs above, summed
by class and divided by all 82,247 jobs; TauGrid - SRTF, hours of average JCT):

| GPUs | jobs < 1 day | jobs ≥ 1 day (count) |
|---|---:|---:|
| 1 | -0.00 | -1.61 (1,229) |
| 2-4 | +0.00 | -0.31 (677) |
| 5-8 | +0.00 | +2.50 (622) |
| 9+ | +0.13 | +0.71 (82) |

All of the 1.43 h is in jobs that run for more than a day; TauGrid is level with SRTF
on everything shorter. Past their group's recent history TauGrid ranks long jobs by
least attained GPUs^1.35 x time, which finishes long 1-GPU jobs sooner than SRTF and
long 8-GPU jobs later (median JCT of 5-8-GPU jobs over a day: 3.0 x their run time,
SRTF 1.09 x): SRTF knows which wide jobs are nearly done. Moving the weight of width
either way among those jobs, sending them further back, aging, serving wide jobs
first (ServerFilling) and estimating their tail from all past jobs of their width
all lose on the whole trace (GPUs^1.7 and a width's tail gain 0.3-0.4 % on the
second half only); the trace holds no signal about which long job is nearly done
(no user, no job name, no epochs).

Read TauGrid as 1.20-1.22 x SRTF on the whole trace: the ≤ 1.2 target is met only at
the tuned point, and no rule tried here reaches it with margin. The held-out
evidence above says the tuned knobs are not what carries the result: replayed on
their own, windows and halves give TauGrid 0.97-1.14 x SRTF at the default knobs;
knobs chosen on the first half alone do as well on the second half as the default
tuned on all of it (1.132 vs 1.136), and the first-half grid is flat. The whole
trace is harder than any part of it replayed alone (1.198 against at most 1.136):
over 110 days long jobs pile up, and the whole gap is in how those are ordered.
Preemption is free in this section's replay
(a suspended job keeps its progress, no restart cost), so TauGrid's many preemptions
cost nothing here; damping them costs JCT (halved rank before: 1.243), but x 0.9
costs only 0.5 % for 8.5 x fewer preemptions. Where they cost (next section: a restart
and the work since the last checkpoint per preemption) TauGrid now has a guard instead.
The trace carries no user IDs (columns: submission time, duration, GPUs, GPU time,
virtual cluster), so user-level history is not possible. Recent jobs predict better
than all past ones: the
median of a group's last 10 finished jobs (finish = submission + duration) has a
Spearman correlation of 0.66 with the next job's duration against 0.45 for the
all-time median.
"""


FREE = philly.RestartCost.free()
"""This section's model: a preempted job keeps its progress (charged: the next section)."""


def _knobs(power: float = 1.35, quantile: float = 0.15) -> queueing.TauGridKnobs:
    """TauGrid as this section measures it: without the preemption guard."""
    return queueing.TauGridKnobs(power, quantile, min_run_s=0.0)


def _one(jobs: list[traces.PhillyJob], name: str, capacity: int) -> philly.QueueResult:
    t0 = time.perf_counter()
    result = philly.simulate(jobs, name, capacity, knobs=_knobs(), cost=FREE)
    took = time.perf_counter() - t0
    print(f"philly {name}: avg JCT {result.avg_jct / 3600:.2f} h ({took:.0f} s)", flush=True)
    return result


def run(start: int, count: int | None, load: float) -> tuple[int, int, list[philly.QueueResult]]:
    """Every policy on the window, one process per policy (they share nothing)."""
    jobs = philly.window(traces.load_philly(), start, count)
    capacity = philly.size_cluster(jobs, load)
    names = queueing.QUEUE_POLICIES
    if count is not None and count <= 5_000:  # quick: a pool costs more than it saves
        return len(jobs), capacity, [_one(jobs, name, capacity) for name in names]
    with concurrent.futures.ProcessPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(_one, [jobs] * len(names), names, [capacity] * len(names)))
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


WINDOWS = 5
GRID_POWER = (1.0, 1.2, 1.35, 1.5, 1.7)
GRID_QUANTILE = (0.10, 0.15, 0.20, 0.25)
Task = tuple[int, int, str, queueing.TauGridKnobs]  # start, count, policy, knobs


@functools.cache
def _trace() -> list[traces.PhillyJob]:
    return traces.load_philly()


def _sim(task: Task, load: float) -> tuple[int, philly.QueueResult]:
    """One policy on one window, sized to that window's own load (same rule as the whole)."""
    start, count, name, knobs = task
    jobs = philly.window(_trace(), start, count)
    capacity = philly.size_cluster(jobs, load)
    return capacity, philly.simulate(jobs, name, capacity, knobs=knobs, cost=FREE)


def _run_all(tasks: list[Task], load: float) -> dict[Task, tuple[int, philly.QueueResult]]:
    workers = max(1, min(len(tasks), os.cpu_count() or 1))
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        return dict(zip(tasks, pool.map(_sim, tasks, [load] * len(tasks)), strict=True))


def heldout(
    start: int,
    count: int,
    load: float,
    powers: tuple[float, ...] = GRID_POWER,
    quantiles: tuple[float, ...] = GRID_QUANTILE,
) -> str:
    """Disjoint windows, and knobs chosen on the first half, judged on the second."""
    default = _knobs()
    size = count // WINDOWS
    windows = [(start + i * size, size) for i in range(WINDOWS)]
    first, second = (start, count // 2), (start + count // 2, count - count // 2)
    grid = [_knobs(p, q) for p in powers for q in quantiles]
    trio = ("FIFO", "SRTF", "TauGrid")
    stage1 = [(*w, name, default) for w in windows for name in trio]
    stage1 += [(*first, "SRTF", default)] + [(*first, "TauGrid", k) for k in grid]
    res = _run_all(stage1, load)
    chosen = min(grid, key=lambda k: res[(*first, "TauGrid", k)][1].avg_jct)
    stage2 = [(*second, name, default) for name in trio]
    res |= _run_all([*stage2, (*second, "TauGrid", chosen)], load)

    def row(w: tuple[int, int], knobs: queueing.TauGridKnobs, label: str = "") -> list[str]:
        cap, fifo = res[(*w, "FIFO", default)]
        srtf, ours = res[(*w, "SRTF", default)][1], res[(*w, "TauGrid", knobs)][1]
        head = [label] if label else [f"{w[0]:,}-{w[0] + w[1] - 1:,}", str(cap)]
        ratios = (ours.avg_jct / srtf.avg_jct, ours.avg_jct / fifo.avg_jct)
        hours = (fifo.avg_jct, srtf.avg_jct, ours.avg_jct)
        return head + [f"{h / 3600:.2f}" for h in hours] + [f"{r:.3f}" for r in ratios]

    srtf1 = res[(*first, "SRTF", default)][1].avg_jct

    def vs_srtf(p: float, q: float) -> str:
        return f"{res[(*first, 'TauGrid', _knobs(p, q))][1].avg_jct / srtf1:.3f}"

    grid_rows = [[f"^{p}", *(vs_srtf(p, q) for q in quantiles)] for p in powers]
    split = [
        row(second, chosen, "chosen on the first half"),
        row(second, default, "default (tuned on the whole trace)"),
    ]
    windows_rows = [row(w, default) for w in windows]
    return _heldout_text(
        windows, first, second, chosen, windows_rows, grid_rows, split, quantiles
    ) + _verdict(
        [
            (
                res[(*w, "TauGrid", default)][1],
                res[(*w, "SRTF", default)][1],
                res[(*w, "FIFO", default)][1],
            )
            for w in windows
        ]
    )


def _verdict(runs: list[tuple[philly.QueueResult, philly.QueueResult, philly.QueueResult]]) -> str:
    """How many windows meet each target, and why the FIFO one cannot be met everywhere."""
    srtf = [ours.avg_jct / s.avg_jct for ours, s, _ in runs]
    fifo = [ours.avg_jct / f.avg_jct for ours, _, f in runs]
    calm = sum(f.avg_jct <= 1.6 * s.avg_jct for _, s, f in runs)
    return (
        f"\nOn the windows TauGrid is {min(srtf):.3f}-{max(srtf):.3f} x SRTF (≤ 1.2 in "
        f"{sum(r <= 1.2 for r in srtf)} of {len(runs)}) and ≤ 0.5 x FIFO in "
        f"{sum(r <= 0.5 for r in fifo)} of {len(runs)};\nin {calm} of them FIFO itself is "
        "within 1.6 x SRTF (the window's pool hardly queues), so no order\ncan halve "
        "FIFO's JCT there.\n"
    )


def _heldout_text(
    windows: list[tuple[int, int]],
    first: tuple[int, int],
    second: tuple[int, int],
    chosen: queueing.TauGridKnobs,
    rows: list[list[str]],
    grid_rows: list[list[str]],
    split: list[list[str]],
    quantiles: tuple[float, ...],
) -> str:
    cols = ["FIFO h", "SRTF h", "TauGrid h", "x SRTF", "x FIFO"]
    span = f"jobs {second[0]:,}-{second[0] + second[1] - 1:,}"
    return (
        f"**Held-out windows.** {len(windows)} disjoint windows of {windows[0][1]:,} "
        "consecutive jobs, each replayed on its own\n(history starts empty) on a pool "
        "sized to its own offered load by the same rule; TauGrid at its default\nknobs. "
        "The knobs were tuned on the whole trace, which holds these windows, so they show "
        "that the\nresult holds on parts replayed alone; the split below is the held-out "
        "test proper:\n\n"
        + doc.table(["jobs", "GPUs", *cols], rows)
        + f"\n**Knobs chosen on the first half only** (jobs {first[0]:,}-"
        f"{first[0] + first[1] - 1:,} on their own): x SRTF of every\nexponent (rows) "
        "and percentile (columns) there:\n\n"
        + doc.table(["GPU exponent", *(f"{q:.0%}" for q in quantiles)], grid_rows)
        + f"\nChosen: GPUs^{chosen.gpu_power} and the {chosen.quantile:.0%} percentile. "
        f"Judged on the second half ({span} on\ntheir own, never seen while choosing):\n\n"
        + doc.table(["TauGrid knobs", *cols], split)
    )


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
    held = heldout(args.start, n, args.load, *((1.0, 1.35), (0.15, 0.25)) if args.quick else ())
    if args.quick or args.no_write:
        print(held)
        return
    took = time.perf_counter() - started
    doc.write_section(TITLE, _body(args, n, capacity, count, results, took, held))


def _body(
    args: argparse.Namespace,
    n: int,
    capacity: int,
    count: int | None,
    results: list[philly.QueueResult],
    took: float,
    held: str,
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
    machine = doc.machine().replace("one process", "one process per policy")
    command = "python -m benchmarks.bench_sim_philly" + (f" --jobs {count}" if count else "")
    body = (
        f"{n:,} jobs (window from job {args.start}, submission order), one pool of "
        f"{capacity} GPUs\n"
        f"(offered load {args.load}: GPU-seconds / trace span / capacity, rounded up to 8-GPU\n"
        "nodes). Whole GPUs, no topology; a preempted job keeps its progress and pays no\n"
        "restart cost (same for every preemptive policy), and TauGrid runs without its\n"
        "preemption guard (`min_run_s=0`): the next section charges every preemption and\n"
        "shows TauGrid with the guard. Every decision goes through\n"
        "`taugrid.scheduling.queueing` (rank → BestEffortFIFO `select`). None of these\n"
        "orders is the live hub's: it admits by priority, then FIFO (next section).\n\n"
        f"Command: `{command}`  \nMachine: {machine}; "
        f"{took / 60:.1f} min in all.\n\n" + doc.table(header, _rows(results)) + "\n" + plot + "\n"
        f"TauGrid default: {ours.avg_jct / fifo.avg_jct:.3f} x FIFO average JCT (target ≤ 0.5) and "
        f"{ours.avg_jct / srtf.avg_jct:.3f} x SRTF-oracle (target ≤ 1.2).\n"
        "It ranks by GPUs^1.35 x a learned remaining-time estimate: the 15th percentile\n"
        "of `D | D > attained` over the last 100 finished jobs of the same virtual cluster\n"
        "and GPU count (then of the same GPU count, then of all jobs, then 'as long\n"
        "again'). Utilisation is GPU-seconds served over capacity x span to the last\n"
        "completion: policies that finish long jobs last show lower utilisation for the\n"
        "same work.\n\n" + held + "\n" + ABLATIONS
    )
    return body


if __name__ == "__main__":
    main()

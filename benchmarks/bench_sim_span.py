"""Spanning in simulation: TauGrid's default policy with and without a link budget.

The generated multi-region scenarios of ``bench_sim_multiregion`` (every family), each
replayed twice by ``taugrid.sim.mr_sim`` through the shared core: TauGrid as it ships
(runs never span) and TauGrid with ``scheduling.span_min_mbit: 1000`` (an async/none
job that no pool holds now may run across pools whose link measures 1 Gbit/s or more,
when starting now, data copies included, beats the expected wait). The simulator
charges a span its data copies into every member region and its slowest member's GPU
speed, nothing else: no cross-region slowdown is modelled, so the gain is an upper
bound for jobs that really are asynchronous.

    python -m benchmarks.bench_sim_span [--quick] [--seeds N] [--jobs N] [--no-write]

``--quick``: two seeds of 40 jobs; prints only.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from typing import Any

import numpy as np

from benchmarks import report
from benchmarks.bench_sim_multiregion import FAMILIES
from taugrid.scheduling import policies_baseline
from taugrid.sim import mr_scenario, mr_sim

__all__ = ["main"]

SPAN_MBIT = 1000.0
SPAN_FAMILIES: dict[str, dict[str, Any]] = {
    **FAMILIES,
    "async-heavy": {"datasets": 16, "load": 1.2, "async_share": 1.0},
}
"""The multi-region families, plus one where every multi-worker job is async (the
default mix has few jobs that may span: 4x1-GPU async ones, 7 % of jobs)."""


def _pair(task: tuple[str, int, int]) -> tuple[str, int, mr_sim.Result, mr_sim.Result]:
    family, seed, jobs = task
    s = mr_scenario.generate(seed, jobs=jobs, **SPAN_FAMILIES[family])
    order = tuple(p.cluster_id for p in s.pools)
    base = policies_baseline.make_policy("TauGrid", order)
    span = dataclasses.replace(base, span_min_bps=SPAN_MBIT * 1e6 / 8)
    return family, seed, mr_sim.simulate(s, "TauGrid", base), mr_sim.simulate(s, "span", span)


def measure(seeds: list[int], jobs: int) -> dict[str, list[tuple[mr_sim.Result, mr_sim.Result]]]:
    tasks = [(f, s, jobs) for f in SPAN_FAMILIES for s in seeds]
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        done = {(f, s): (a, b) for f, s, a, b in pool.map(_pair, tasks)}
    return {f: [done[(f, s)] for s in seeds] for f in SPAN_FAMILIES}


def _row(family: str, pairs: list[tuple[mr_sim.Result, mr_sim.Result]]) -> list[str]:
    off = np.array([a.avg_jct for a, _ in pairs]) / 3600
    on = np.array([b.avg_jct for _, b in pairs]) / 3600
    diff = on - off
    spans = [sum(p.members > 1 for p in b.placements) / b.jobs for _, b in pairs]
    se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
    return [
        family,
        f"{off.mean():.2f}",
        f"{on.mean():.2f}",
        f"{diff.mean():+.2f} ± {se:.2f} ({diff.mean() / off.mean():+.1%})",
        f"{int((diff < 0).sum())}/{len(diff)}",
        f"{np.mean(spans):.1%}",
    ]


def _section(results: dict[str, Any], seeds: list[int], jobs: int, cmd: str) -> str:
    head = (
        "| family | avg JCT h, no span | with span | change (± s.e.) | seeds won | jobs spanned |"
    )
    rows = [_row(f, pairs) for f, pairs in results.items()]
    return (
        "## Scheduling: spanning runs across clusters (simulation)\n\n"
        f"Command: `{cmd}` ({len(seeds)} seeds, {jobs} jobs each, 4 regions; the families "
        'of "Scheduling: multi-region scenarios", plus async-heavy: offered load 1.2 and '
        "every multi-worker job async). TauGrid's default policy as it ships "
        f"against the same with `span_min_mbit: {SPAN_MBIT:.0f}`; ± is the standard error "
        "of the paired difference over seeds, seeds won: lower average JCT with spanning.\n\n"
        + head
        + "\n| --- | ---: | ---: | ---: | ---: | ---: |\n"
        + "".join("| " + " | ".join(r) + " |\n" for r in rows)
        + "\nThe simulator charges a span its data copies and its slowest member's GPU speed "
        'only; a real asynchronous job also pays the link on every step (see "One Ray '
        'cluster across two regions versus one region" for that, measured), so read '
        "these as an upper bound. The live hub places spans with the same core "
        '(docs/ARCHITECTURE.md, "One Ray cluster across regions").\n'
    )


def main(argv: list[str] | None = None) -> int:
    def run(seeds: list[int], jobs: int, cmd: str) -> str:
        return _section(measure(seeds, jobs), seeds, jobs, cmd)

    return report.seeded_main(argv, "bench_sim_span", run, seeds=10, jobs=300)


if __name__ == "__main__":
    raise SystemExit(main())

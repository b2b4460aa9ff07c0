"""FGD vs TauGrid on openb seeds that were never used to choose anything.

TauGrid's one packing constant (the reserve's cost, 10 FGD points per unit) was chosen
on the reported seeds 42-51, so those seeds cannot tell a real difference from a
lucky one. This benchmark replays every workload on further seeds (52 onward, same protocol as
``bench_sim_openb``) and reports the per-seed difference TauGrid - FGD with its
standard error. Writes the "## Scheduling: GPU packing on further seeds (Alibaba
openb)" section of docs/BENCHMARKS.md.

    python -m benchmarks.bench_sim_openb_further [--quick] [--seeds N] [--no-write]

``--quick``: one seed, default workload, 30 % arrived; prints only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import sys
import time

from benchmarks import bench_sim_doc as doc
from benchmarks import bench_sim_openb as openb_bench
from taugrid.sim import traces

__all__ = ["main"]

TITLE = "Scheduling: GPU packing on further seeds (Alibaba openb)"
FIRST_SEED = 52
WORKLOADS = ("default", *openb_bench.VARIANTS)


def _diffs(workload: str, seeds: list[int], stop: float) -> tuple[list[float], list[float]]:
    fgd = [r.allocated_pct for r in openb_bench.run(workload, "FGD", seeds, stop=stop)]
    ours = [r.allocated_pct for r in openb_bench.run(workload, "TauGrid", seeds, stop=stop)]
    return fgd, ours


def _row(workload: str, fgd: list[float], ours: list[float]) -> list[str]:
    d = [b - a for a, b in zip(fgd, ours, strict=True)]
    se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
    mean = statistics.fmean(d)
    verdict = "TauGrid" if mean > 2 * se else ("FGD" if mean < -2 * se else "neither (within 2 se)")
    wins = sum(x > 0 for x in d)
    return [
        workload,
        f"{statistics.fmean(fgd):.2f}",
        f"{statistics.fmean(ours):.2f}",
        f"{mean:+.3f}",
        f"{se:.3f}",
        f"{wins}/{len(d)}",
        verdict,
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 30 % arrived")
    parser.add_argument("--seeds", type=int, default=20, help=f"seeds {FIRST_SEED}.. (20)")
    parser.add_argument("--workers", type=int, default=2, help="processes (one per workload)")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    try:
        traces.load_openb_nodes()
    except traces.TraceMissing as exc:
        print(f"skipped openb further-seeds benchmark: {exc}", file=sys.stderr)
        return
    if args.quick:
        fgd, ours = _diffs("default", [FIRST_SEED], 0.3)
        print(f"openb further quick: FGD {fgd[0]:.2f} TauGrid {ours[0]:.2f} at 30 % arrived")
        return
    started = time.perf_counter()
    seeds = list(range(FIRST_SEED, FIRST_SEED + args.seeds))
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {w: pool.submit(_diffs, w, seeds, 1.0) for w in WORKLOADS}
        rows = [_row(w, *futures[w].result()) for w in WORKLOADS]
    for row in rows:
        print("openb further " + " ".join(row), flush=True)
    header = ["workload", "FGD %", "TauGrid %", "Δ mean", "se", "TauGrid ahead", "ahead by 2 se"]
    body = _body(doc.table(header, rows), seeds, time.perf_counter() - started, args.workers)
    if not args.no_write:
        doc.write_section(TITLE, body)


def _body(table: str, seeds: list[int], took: float, workers: int) -> str:
    return (
        "The constant in TauGrid's packing score was chosen on seeds 42-51, the seeds of the\n"
        "section above, so a difference of a few hundredths there may be luck. Here every\n"
        f"workload is replayed on {len(seeds)} further seeds ({seeds[0]}..{seeds[-1]}), never\n"
        "used to choose anything, with the same protocol; Δ is TauGrid - FGD per seed\n"
        "(paired: same arrival sequence and node order), se its standard error.\n\n"
        "Command: `python -m benchmarks.bench_sim_openb_further`  \n"
        f"Machine: {doc.machine().replace('one process', f'{workers} processes')}; "
        f"{took / 60:.1f} min in all.\n\n" + table + "\n" + READING
    )


READING = """\
On seeds never used to choose the constant TauGrid is ahead of FGD on every workload
by more than two standard errors: by 4.6 on multigpu30 (16 of 20 seeds), by 8 to 22 on
default, cpu050 and gpushare40, and by 6.4 points (95 se) on gpuspec33 (20 of 20), where the
reserve keeps unpinned tasks off the T4, G3, P100 and V100 GPUs that pinned tasks need
and sends them to the G2 nodes FGD leaves idle. Before the reserve (an earlier node
pressure kept below FGD's score) these seeds gave multigpu30 +0.018 (se 0.020) and
gpuspec33 -0.109 (se 0.061). One disclosure: a first version of the reserve that
counted only model-pinned shapes was checked on these seeds on gpuspec33 (+1.5 at 2 or 3
points per unit) before it was generalised to every shape and its constant chosen on
seeds 42-51.
"""


if __name__ == "__main__":
    main()

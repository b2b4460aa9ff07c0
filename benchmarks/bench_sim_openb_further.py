"""FGD vs TauGrid on every openb pod list found, on seeds never used to choose anything.

TauGrid's packing constants were chosen on seeds 42-51 (``bench_sim_openb``), so those
seeds cannot tell a real difference from a lucky one. This benchmark replays every openb
pod list it finds (``traces.openb_workloads()``: the five of ``shared/traces`` plus any
in ``$TAU_OPENB_DIR``, e.g. the other 19 of the public trace's
``cluster-trace-gpu-v2023/csv``) on further seeds (52 onward, same protocol) and reports
the per-seed paired difference TauGrid - FGD with its standard error. Writes the
"## Scheduling: GPU packing on further seeds (Alibaba openb)" section of
docs/BENCHMARKS.md.

    python -m benchmarks.bench_sim_openb_further [--quick] [--seeds N] [--first-seed S]
        [--workloads W ...] [--workers N] [--results FILE] [--no-write]

``--results FILE`` keeps every (workload, policy, seed) outcome in a JSON-lines file,
keyed by a hash of the packing code, so an interrupted run resumes and a policy change
reruns only TauGrid. ``--quick``: one seed, default workload, 30 % arrived; prints only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import pathlib
import statistics
import sys
import time
from datetime import date

from benchmarks import bench_sim_doc as doc
from benchmarks import bench_sim_openb as openb_bench
from taugrid.scheduling import packing
from taugrid.sim import traces

__all__ = ["main"]

TITLE = "Scheduling: GPU packing on further seeds (Alibaba openb)"
FIRST_SEED = 52
POLICIES = ("FGD", "TauGrid")
_Key = tuple[str, str, int]
#: One run: GPU allocated %, and the % of arrived CPU-only tasks that were not placed.
_Outcome = tuple[float, float]


def code_version(policy: str) -> str:
    """Hash of the packing sources a policy's result depends on (TauGrid's own file only for it)."""
    folder = pathlib.Path(packing.__file__).parent
    files = sorted(p for p in folder.glob("*.py") if policy == "TauGrid" or p.name != "default.py")
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()[:12]


def _one(workload: str, policy: str, seed: int, stop: float) -> _Outcome:
    r = openb_bench.run(workload, policy, [seed], stop=stop)[0]
    return r.allocated_pct, 100.0 * r.cpu_failed / max(r.cpu_tasks, 1)


def _load(path: pathlib.Path | None) -> dict[_Key, _Outcome]:
    if path is None or not path.exists():
        return {}
    versions = {p: code_version(p) for p in POLICIES}
    done = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if versions.get(r["policy"]) == r["version"] and "cpu_refused_pct" in r:
            done[(r["workload"], r["policy"], r["seed"])] = (
                r["allocated_pct"],
                r["cpu_refused_pct"],
            )
    return done


def measure(
    workloads: list[str], seeds: list[int], workers: int, results: pathlib.Path | None
) -> dict[_Key, _Outcome]:
    """Every (workload, policy, seed) outcome, from ``results`` where already there."""
    done = _load(results)
    # Seed-major: an interrupted run has the first seeds of every workload.
    todo = [(w, p, s) for s in seeds for w in workloads for p in POLICIES if (w, p, s) not in done]
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_one, *key, 1.0): key for key in todo}
        for future in concurrent.futures.as_completed(futures):
            key = futures[future]
            done[key] = future.result()
            print(f"openb further {' '.join(map(str, key))}: {done[key][0]:.3f}", flush=True)
            if results is not None:
                row = dict(zip(("workload", "policy", "seed"), key, strict=True))
                allocated, refused = done[key]
                row |= {"version": code_version(key[1]), "allocated_pct": allocated}
                row |= {"cpu_refused_pct": refused}
                with results.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    return done


def paired(fgd: list[float], ours: list[float]) -> tuple[float, float]:
    """Mean of the per-seed differences ours - fgd and its standard error."""
    d = [b - a for a, b in zip(fgd, ours, strict=True)]
    se = statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")
    return statistics.fmean(d), se


def _row(workload: str, wanted: list[int], done: dict[_Key, _Outcome]) -> list[str] | None:
    seeds = [s for s in wanted if all((workload, p, s) in done for p in POLICIES)]
    if not seeds:
        return None
    fgd = [done[(workload, "FGD", s)][0] for s in seeds]
    ours = [done[(workload, "TauGrid", s)][0] for s in seeds]
    refused = [statistics.fmean(done[(workload, p, s)][1] for s in seeds) for p in POLICIES]
    mean, se = paired(fgd, ours)
    verdict = "TauGrid" if mean > 2 * se else ("FGD" if mean < -2 * se else "within 2 se")
    wins = sum(b > a for a, b in zip(fgd, ours, strict=True))
    return [
        workload,
        _span(seeds),
        f"{statistics.fmean(fgd):.2f}",
        f"{statistics.fmean(ours):.2f}",
        f"{mean:+.3f}",
        f"{se:.3f}",
        f"{wins}/{len(seeds)}",
        verdict,
        f"{refused[0]:.1f}",
        f"{refused[1]:.1f}",
    ]


def _span(seeds: list[int]) -> str:
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return " ".join(map(str, seeds))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 30 %% arrived")
    parser.add_argument("--seeds", type=int, default=20, help="how many seeds (20)")
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED, help=f"({FIRST_SEED})")
    parser.add_argument("--workloads", nargs="*", default=None, help="pod lists (all found)")
    parser.add_argument("--workers", type=int, default=2, help="processes (2)")
    parser.add_argument("--results", type=pathlib.Path, default=None, help="JSON-lines cache")
    parser.add_argument(
        "--cached-only", action="store_true", help="run nothing: report what --results holds"
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    try:
        traces.load_openb_nodes()
    except traces.TraceMissing as exc:
        print(f"skipped openb further-seeds benchmark: {exc}", file=sys.stderr)
        return
    if args.quick:
        fgd, ours = (_one("default", p, args.first_seed, 0.3) for p in POLICIES)
        print(f"openb further quick: FGD {fgd[0]:.2f} TauGrid {ours[0]:.2f} at 30 % arrived")
        return
    workloads = args.workloads or traces.openb_workloads()
    if not args.workloads and set(workloads) <= set(traces.OPENB_WORKLOADS):
        where = ", ".join(map(str, traces.openb_dirs()))
        print(
            f"openb: only {', '.join(workloads)} found in {where}; set TAU_OPENB_DIR to the "
            "trace's cluster-trace-gpu-v2023/csv folder for the other pod lists",
            file=sys.stderr,
        )
    started = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.cached_only:
        done = _load(args.results)
    else:
        done = measure(workloads, seeds, args.workers, args.results)
    rows = [r for r in (_row(w, seeds, done) for w in workloads) if r is not None]
    for row in rows:
        print("openb further " + " ".join(row), flush=True)
    header = ["workload", "seeds", "FGD %", "TauGrid %", "Δ mean", "se", "TauGrid ahead", "by 2 se"]
    header += ["CPU tasks refused, FGD %", "TauGrid %"]
    took = time.perf_counter() - started
    body = _body(doc.table(header, rows), seeds, took, args.workers) + _summary(rows)
    if not args.no_write:
        doc.write_section(TITLE, body)


def _summary(rows: list[list[str]]) -> str:
    """One line: on how many lists TauGrid is ahead by 2 se, and which are not."""
    ahead = [r for r in rows if r[7] == "TauGrid"]
    others = ", ".join(f"{r[0]} ({r[4]}, se {r[5]}: {r[7]})" for r in rows if r not in ahead)
    line = f"\n**TauGrid is ahead of FGD by more than 2 se on {len(ahead)} of {len(rows)} lists"
    return line + (f"; not on {others}.**\n" if others else ".**\n")


def _body(table: str, seeds: list[int], took: float, workers: int) -> str:
    return (
        "TauGrid's packing constants were chosen on seeds 42-51, the seeds of the section\n"
        "above, so a difference of a few hundredths there may be luck. Here every openb pod\n"
        f"list is replayed on {len(seeds)} further seeds ({seeds[0]}..{seeds[-1]}), never used\n"
        "to choose anything, with the same protocol; Δ is TauGrid - FGD per seed (paired:\n"
        "same arrival sequence and node order), se its standard error.\n\n"
        f"Command: `TAU_OPENB_DIR=<clusterdata>/cluster-trace-gpu-v2023/csv "
        f"python -m benchmarks.bench_sim_openb_further --first-seed {seeds[0]} "
        f"--seeds {len(seeds)}`  \n"
        f"Machine: {doc.machine().replace('one process', f'{workers} processes')}; "
        f"{took / 60:.1f} min in all (results cached by `--results` count as no time), "
        f"{date.today():%b %-d %Y}.\n\n" + table + "\n" + READING
    )


READING = """\
The last two columns: the share of the CPU-only tasks that arrived (up to the metric's
window) and were not placed. TauGrid's CPU hold (`default.allowed`, the section above)
refuses more of them on the three lists where the CPUs run out with the GPUs (CPU
demand 1.00, 1.03 and 1.14 times the cluster's CPUs when the GPU demand fills the GPUs):
cpu235, cpu250 and cpu300. That is its trade: GPU allocation for CPU-only work, which
the metric does not count. On the other 21 lists no CPU-only task is refused by either
policy, and every row is the same as before the hold to the third decimal.
Before the hold TauGrid trailed FGD on cpu250 (-0.31, se 0.05, 2/20) and led cpu235 by
only +0.09 and cpu300 by +0.43 (the last behind a reserve gate for CPU-bound workloads,
which the hold replaced). The hold was chosen on seeds 42-51 (cpu250: -0.27 became
+2.54, 10/10) with its one natural constant (the CPU per GPU of the workload's own GPU
shapes); half that hold gave +0.09 there.

multigpu40 and multigpu50 are the two multi-GPU-bound lists (40 and 50 % of the GPU
demand in tasks of several GPUs: `default.multi_gpu_bound`). There the reserve is off
and the capacity-aware level decides FGD's ties, and it now weighs each shape by its
share of the GPU demand instead of its share of the tasks. By task count, TauGrid
trailed FGD on multigpu40 (-0.027, se 0.020, 8/20 on these seeds; -0.02 on 42-51): a
multi-GPU task took the last whole node the 8-GPU shapes could use, where stranding two
GPUs on a node short of CPU cost less. By demand, on seeds 42-51 multigpu40 went to
+0.07 (9/10) and multigpu50 from +0.22 to +0.24. By demand on every list, it lost
ground on the single-GPU and sharing lists (default +0.46 -> +0.27; gpushare60,
gpushare80 and gpuspec05 fell below FGD), so the weighting is the multi-GPU-bound
lists' only. The other 22 lists do not change. On multigpu40 the two are level, not
TauGrid ahead: a check on 20 more seeds after the choice (72-91,
`--first-seed 72 --workloads multigpu40`) gave -0.010 (se 0.022, 9/20), and the 50 seeds
42-91 together +0.017 (se 0.012, 29/50).
"""


if __name__ == "__main__":
    main()

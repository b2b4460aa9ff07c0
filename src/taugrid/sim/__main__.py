"""``python -m taugrid.sim``: replay a public trace through the scheduling core.

    python -m taugrid.sim openb  [--workload default] [--policy TauGrid] [--seeds 42 43]
                                 [--stop 1.0] [--tie-break first] [-o json]
    python -m taugrid.sim philly [--policy TauGrid] [--start 0] [--jobs N] [--load 0.9]
                                 [--gpu-power 1.35] [--quantile 0.15] [--min-run-s 3600]
                                 [--restart-s 60] [--checkpoint-s 600] [-o json]
    python -m taugrid.sim multiregion [--policy all] [--seeds 1 2 3] [--regions 4]
                                 [--jobs 300] [--datasets 16] [--load 0.8]
                                 [--data-scale 1.0] [--link-gbps 0.5 10] [-o json]

Traces come from ``$TAU_TRACES_DIR`` or ``../shared/traces`` (extra openb pod lists
from ``$TAU_OPENB_DIR``); a missing or malformed trace is an error message with the path
to fix, exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from taugrid.scheduling import queueing
from taugrid.scheduling.packing import packer
from taugrid.sim import mr_sim, openb, philly, traces

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m taugrid.sim", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="trace", required=True)
    ob = sub.add_parser("openb", help="GPU packing: the FGD inflation experiment")
    ob.add_argument(
        "--workload",
        default="default",
        help="any openb pod list found (openb_pod_list_<name>.csv in $TAU_OPENB_DIR or "
        "<traces>/openb) or a path to one",
    )
    ob.add_argument("--policy", default="TauGrid", choices=packer.POLICIES)
    ob.add_argument("--seeds", type=int, nargs="+", default=[42])
    ob.add_argument("--stop", type=float, default=1.0, help="arrived demand / capacity to stop at")
    ob.add_argument("--tie-break", default="first", choices=packer.TIE_BREAKS)
    ph = sub.add_parser("philly", help="queueing: event-driven replay of Philly jobs")
    ph.add_argument("--policy", default="TauGrid", choices=queueing.QUEUE_POLICIES)
    ph.add_argument("--start", type=int, default=0)
    ph.add_argument("--jobs", type=int, default=None)
    ph.add_argument("--load", type=float, default=0.9)
    ph.add_argument(
        "--gpu-power",
        type=float,
        default=queueing.TauGridKnobs.gpu_power,
        help="TauGrid: exponent of the GPU count in the rank",
    )
    ph.add_argument(
        "--quantile",
        type=_fraction,
        default=queueing.TauGridKnobs.quantile,
        help="TauGrid: percentile (0-1) of the history's durations past the attained time",
    )
    ph.add_argument(
        "--min-run-s",
        type=float,
        default=queueing.MIN_RUN_S,
        help="TauGrid: seconds a (re)started job runs before it may be preempted (0: none)",
    )
    ph.add_argument(
        "--restart-s",
        type=float,
        default=philly.RESTART.restart_s,
        help="seconds a preempted job spends restarting (0 with --checkpoint-s 0: free)",
    )
    ph.add_argument(
        "--checkpoint-s",
        type=float,
        default=philly.RESTART.checkpoint_s,
        help="seconds of progress between checkpoints; a preempted job loses the rest",
    )
    mr = sub.add_parser("multiregion", help="multi-region placement: generated scenarios")
    mr.add_argument("--policy", default="all", choices=("all", *mr_sim.POLICIES))
    mr.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    mr.add_argument("--regions", type=int, default=4)
    mr.add_argument("--jobs", type=int, default=300)
    mr.add_argument("--datasets", type=int, default=16)
    mr.add_argument("--load", type=float, default=0.8, help="offered GPU load / capacity")
    mr.add_argument(
        "--data-scale", type=float, default=1.0, help="multiplies every dataset size class"
    )
    mr.add_argument(
        "--link-gbps",
        type=float,
        nargs=2,
        default=(0.5, 10.0),
        metavar=("LO", "HI"),
        help="range inter-region links are drawn from, Gbit/s",
    )
    for p in (ob, ph, mr):
        p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return parser


def _openb(args: argparse.Namespace) -> list[dict[str, object]]:
    nodes, tasks = traces.load_openb_nodes(), traces.load_openb_tasks(args.workload)
    out = []
    for seed in args.seeds:
        r = openb.run_inflation(
            nodes, tasks, args.policy, seed, stop=args.stop, tie_break=args.tie_break
        )
        row = {k: v for k, v in dataclasses.asdict(r).items() if k != "curve"}
        out.append(row)
        if args.output == "text":
            print(
                f"{args.workload} {r.policy} seed {seed}: {r.allocated_pct:.2f} % GPU allocated "
                f"at {r.arrived_pct:.1f} % arrived ({r.failed} tasks skipped)"
            )
    return out


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1 (e.g. 0.15)")
    return value


def _philly(args: argparse.Namespace) -> list[dict[str, object]]:
    jobs = philly.window(traces.load_philly(), args.start, args.jobs)
    capacity = philly.size_cluster(jobs, args.load)
    knobs = queueing.TauGridKnobs(args.gpu_power, args.quantile, args.min_run_s)
    cost = philly.RestartCost(args.restart_s, args.checkpoint_s)
    r = philly.simulate(jobs, args.policy, capacity, knobs=knobs, cost=cost)
    if args.output == "text":
        print(
            f"{r.policy}: {r.jobs} jobs on {capacity} GPUs, avg JCT {r.avg_jct / 3600:.2f} h, "
            f"p50 {r.p50_jct / 3600:.2f} h, p99 {r.p99_jct / 3600:.1f} h, "
            f"avg queueing {r.avg_queueing / 3600:.2f} h, utilisation {r.utilisation:.2f}, "
            f"{r.preemptions} preemptions ({r.lost_gpu_hours:,.0f} GPU-h lost to them)"
        )
    return [dataclasses.asdict(r)]


def _multiregion(args: argparse.Namespace) -> list[dict[str, object]]:
    policies = mr_sim.POLICIES if args.policy == "all" else (args.policy,)
    shape = {
        "regions": args.regions,
        "jobs": args.jobs,
        "datasets": args.datasets,
        "load": args.load,
        "data_scale": args.data_scale,
        "link_gbps": tuple(args.link_gbps),
    }
    out: list[dict[str, object]] = []
    for policy, results in mr_sim.compare(args.seeds, policies, **shape).items():
        m = mr_sim.mean(results)
        out.append({"policy": policy, "seeds": args.seeds, **m})
        if args.output == "text":
            print(
                f"{policy}: avg JCT {m['avg_jct'] / 3600:.2f} h (p50 {m['p50_jct'] / 3600:.2f}, "
                f"p99 {m['p99_jct'] / 3600:.1f}), moved {m['bytes_moved'] / 1e12:.2f} TB, "
                f"egress ${m['egress_cost']:,.0f}, GPU utilisation {m['utilisation']:.2f} "
                f"(mean of seeds {' '.join(map(str, args.seeds))})"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run = {"openb": _openb, "philly": _philly, "multiregion": _multiregion}[args.trace]
    try:
        rows = run(args)
    except ValueError as exc:  # e.g. --regions out of range: say so, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except traces.TraceMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

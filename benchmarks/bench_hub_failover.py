"""Hub failover under load: ``kill -9`` the leader of three replicas during 1,000 submissions.

Three real hub daemons on a private PostgreSQL server (``tests/hub/pg_server``), one
real Ray region (one node, 4 emulated GPUs) with the real agent loop, eight concurrent
SDK clients with the replicas' URL list; the leader is SIGKILLed once half the
submissions were accepted (``tests/hub/ha_cluster.kill_leader_run``). Reported: accepted
/ refused (a reset mid-request: never resent) submissions, lost and duplicated ones
(read in the database), the time without a leader (kill → the next ``hub_leader``
takeover event), and — for the runs that executed within the run budget — runs executed
more than once (each job appends its run ID to one file).

    python -m benchmarks.bench_hub_failover [--quick] [--no-write] [--n 1000] [--budget 240]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks import report
from tests.hub import ha_cluster, pg_server

__all__ = ["main"]

QUICK_SKIP = (
    "hub replicas on PostgreSQL with lease waits (about 60 s); "
    "the same scenario is tests/hub/test_hub_kill_leader.py"
)
"""Why ``run_all --quick`` (CI's ``make bench-quick``) leaves this one out."""

HOST = "127.0.26.7"
RAY_IP = "127.0.26.8"
LEASE_S = 10.0


def measure(n: int, clients: int, budget_s: float, lease_s: float) -> ha_cluster.Outcome:
    tmp = tempfile.TemporaryDirectory(prefix="tau-bench-ha-")
    with tmp, pg_server.pg_server(HOST) as pg:
        return _measure_on(Path(tmp.name), pg, n, clients, budget_s, lease_s)


def _measure_on(
    base: Path, pg: pg_server.PgServer, n: int, clients: int, budget_s: float, lease_s: float
) -> ha_cluster.Outcome:
    reps = ha_cluster.Replicas(base, HOST, pg.new_database("bench"), 3, lease_s)
    try:
        with ha_cluster.ray_region(base, RAY_IP, reps):
            return ha_cluster.kill_leader_run(
                reps, base, n, clients, timeout_s=1800, run_budget_s=budget_s
            )
    finally:
        reps.stop()


def _section(out: ha_cluster.Outcome, clients: int, budget_s: float, lease_s: float) -> str:
    ran = [r for r in out.accepted if r in out.executions]
    retried = sum(1 for r in ran if out.attempts.get(r, 0) > 1)
    bound = f"bound: lease + lease/3 = {lease_s * 4 / 3:.1f} s"
    done = sum(1 for r in out.accepted if out.states.get(r) == "succeeded")
    return f"""## Hub failover: kill -9 the leader during {out.submitted:,} submissions

`python -m benchmarks.bench_hub_failover --n {out.submitted} --budget {budget_s:g}` (3 hub
replica processes on PostgreSQL 15,
leader lease {lease_s:g} s, {clients} concurrent SDK clients with the URL list, one Ray
region of 4 emulated GPUs with the real agent; the leader SIGKILLed once half the
submissions were accepted; shared 2-core machine).

| | |
|---|---|
| submissions | {out.submitted:,} in {out.submit_s:.1f} s |
| accepted (201) | {len(out.accepted):,} |
| refused (connection reset by the kill; not resent) | {out.refused} |
| accepted but lost | **{out.lost}** |
| stored twice | **{out.duplicated}** |
| time without a leader (kill → takeover) | **{out.leaderless_s:.1f} s** ({bound}) |
| runs executed within {budget_s:.0f} s after the submissions | {len(ran):,} ({done:,} succeeded) |
| runs executed twice (a token twice, or more executions than attempts) | **{out.executed_twice}** |
| runs retried (a Ray failure on the loaded machine) | {retried} |

Runs execute at the region's pace (4 GPUs, Ray job start-up on a loaded machine), so
only those that ran within the budget are checked for double execution; every
accepted submission is checked for loss and duplication. The same scenario with 16
runs, all executed, is the test `tests/hub/test_hub_kill_leader.py`.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--budget", type=float, default=240.0, help="seconds runs may execute")
    args = parser.parse_args(argv)
    n, clients, budget = (20, 4, 30.0) if args.quick else (args.n, 8, args.budget)
    lease = 2.0 if args.quick else LEASE_S
    out = measure(n, clients, budget, lease)
    section = _section(out, clients, budget, lease)
    print(section)
    if not args.quick and not args.no_write:
        report.write_section(section)


if __name__ == "__main__":
    main()

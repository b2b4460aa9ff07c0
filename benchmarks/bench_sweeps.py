"""Sweep benchmark: what a running sweep costs the hub's scheduling cycle.

An in-process hub (SQLite in a temporary directory, the packaged platform) gets a sweep
of N trials with ``parallel: N`` (every trial submitted at once; no agent, so they stay
queued and count as running for the rules), then M metric points per trial are stored
as an agent would store them. Measured: the cycle that submits the N trials
(``hub.runs.sweeps.advance``: N ``runs.submit`` calls with their records), and the cycle that
judges them (read every trial's points, apply the rule, cancel the laggards), for the
median rule and for asha. That judging cycle is what every scheduling cycle pays while
the sweep runs. Writes "## Sweeps: the hub's cycle per running sweep" in
docs/BENCHMARKS.md.

    python -m benchmarks.bench_sweeps [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import base64
import os
import platform as pyplatform
import tempfile
import time
from pathlib import Path

from benchmarks import report
from taugrid import payloads as wire
from taugrid.hub.core import context
from taugrid.hub.runs import sweeps

__all__ = ["main", "measure"]

_TAU_YAML = """\
schema_version: 1
name: bench-sweep
run:
  entrypoint: train.py
compute:
  gpus: 1
  cpus: 1
  memory: 1Gi
sweep:
  method: random
  trials: {n}
  parallel: {n}
  parameters:
    lr: {{min: 0.0001, max: 1.0, log: true}}
  metric: {{name: loss, mode: min}}
  early_stop: {{rule: {rule}, grace_steps: 4, min_trials: 3}}
"""


def measure(n: int, points: int, rule: str) -> dict[str, float]:
    """Seconds to submit ``n`` trials and to judge them with ``points`` points each."""
    with tempfile.TemporaryDirectory() as tmp:
        hub = context.Hub(context.HubConfig(tau_home=Path(tmp)))
        code = base64.b64encode(b"PK\x05\x06" + b"\x00" * 18).decode()  # an empty zip
        req = wire.SubmitRequest(tau_yaml=_TAU_YAML.format(n=n, rule=rule), code_zip_b64=code)
        sw = sweeps.submit(hub, req, "bench")
        t0 = time.perf_counter()
        sweeps.advance(hub)
        submit_s = time.perf_counter() - t0
        for t in hub.sweeps.trials(sw["id"]):
            slope = 1.0 + (t["idx"] % 7)
            rows = [
                {"attempt": 1, "step": s, "name": "loss", "value": slope / s, "wall_time": 0.0}
                for s in range(1, points + 1)
            ]
            hub.runs.add_metrics(t["run_id"], rows)
        t0 = time.perf_counter()
        sweeps.advance(hub)
        judge_s = time.perf_counter() - t0
        stopped = sum(1 for t in hub.sweeps.trials(sw["id"]) if t["stopped"])
        t0 = time.perf_counter()
        sweeps.advance(hub)
        steady_s = time.perf_counter() - t0
        hub.engine.dispose()
    return {"submit_s": submit_s, "judge_s": judge_s, "steady_s": steady_s, "stopped": stopped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    shapes = [(12, 50)] if args.quick else [(12, 100), (50, 100), (100, 200)]
    rows = []
    for n, m in shapes:
        for rule in ("median", "asha"):
            r = measure(n, m, rule)
            rows.append(
                f"| {n} | {m} | {rule} | {r['submit_s']:.2f} | {r['judge_s'] * 1e3:.0f} "
                f"| {int(r['stopped'])} | {r['steady_s'] * 1e3:.0f} |"
            )
            print(rows[-1], flush=True)
    if args.quick or args.no_write:
        return
    report.write_section(
        "## Sweeps: the hub's cycle per running sweep\n\n"
        f"`python -m benchmarks.bench_sweeps` on {pyplatform.machine()}, {os.cpu_count()} "
        "cores, SQLite, one in-process hub (no agent: the trials stay queued and count as "
        "running). *Submit*: the cycle that submits every trial (`parallel` = N); "
        "*judge*: the next cycle, reading N x M metric points and cancelling the trials "
        "the rule stops; *after*: the cycle after that (the stopped ones are no longer "
        "judged). The judging cycle is what every scheduling cycle pays while a sweep runs "
        "(the hub's cycle is 0.5 s by default).\n\n"
        "| trials N | points per trial M | rule | submit (s) | judge (ms) | stopped "
        "| after (ms) |\n"
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    main()

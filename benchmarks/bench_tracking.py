"""MLflow bridge benchmark: how fast the hub mirrors stored metrics to a real MLflow server.

An in-process hub (SQLite in a temporary directory) whose workspace names a real MLflow
tracking server (``tracking/build.sh``, SQLite behind it, on loopback) has N ended runs
with M metric points each in its store, as agents would have stored them, none mirrored
yet: the backlog after a tracking-server outage. Measured: the rounds of
``hub.runs.tracking.mirror_pending`` (the leader's loop, without its 2 s pause) until nothing
is pending, in seconds and metric points per second, and the hub's own CPU seconds in
those rounds (the rest is MLflow's). Writes "## Tracking: the MLflow bridge's catch-up" in
docs/BENCHMARKS.md.

    python -m benchmarks.bench_tracking [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import platform as pyplatform
import tempfile
import time
from pathlib import Path

from benchmarks import report
from taugrid.hub.core import context
from taugrid.hub.runs import tracking
from taugrid.platform import load as platform_load
from tests import mlflow_server

__all__ = ["QUICK_SKIP", "main", "measure"]

QUICK_SKIP = (
    "starts an MLflow server; tests/hub/test_flow.py::test_a_tracked_workspace_mirrors_"
    "every_metric_to_mlflow_and_catches_up_after_an_outage runs the same path"
)


def _run_row(run_id: str, now: float) -> dict[str, object]:
    return {
        "id": run_id,
        "name": "bench",
        "workspace": "default",
        "team": "research",
        "state": "succeeded",
        "reason": "",
        "priority": 0,
        "gpus": 1,
        "gpu_model": None,
        "spec": {},
        "config_yaml": "",
        "created_at": now,
        "updated_at": now,
    }


def measure(runs: int, points: int) -> dict[str, float]:
    """Seconds and the hub's CPU seconds to mirror ``runs`` x ``points`` metric points."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        mlflow_server.mlflow_server(Path(tmp) / "mlflow") as server,
    ):
        ws = "  - name: default\n    team: research\n"
        text = platform_load.default_platform_text().replace(
            ws, ws + f"    tracking: {{mlflow_uri: '{server.url}', experiment: bench}}\n"
        )
        (Path(tmp) / "platform.yaml").write_text(text)
        config = context.HubConfig(
            tau_home=Path(tmp) / "home", platform_file=Path(tmp) / "platform.yaml"
        )
        hub = context.Hub(config)
        now = time.time()
        for i in range(runs):
            run_id = f"bench-{i:04d}"
            hub.runs.insert_run(_run_row(run_id, now), [])
            hub.runs.add_metrics(
                run_id,
                [
                    {
                        "attempt": 1,
                        "step": s,
                        "name": "loss",
                        "value": 1.0 / s,
                        "wall_time": now + s,
                    }
                    for s in range(1, points + 1)
                ],
            )
        t0, cpu0, rounds = time.perf_counter(), time.process_time(), 0
        while hub.tracking.pending(["default"], 1):
            tracking.mirror_pending(hub)
            rounds += 1
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        mirrored = len(server.runs("bench"))
        hub.engine.dispose()
    return {"seconds": seconds, "cpu": cpu, "rounds": rounds, "mirrored": mirrored}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    shapes = [(5, 100)] if args.quick else [(10, 100), (50, 1000), (200, 200)]
    rows = []
    for n, m in shapes:
        r = measure(n, m)
        rows.append(
            f"| {n} | {m} | {n * m:,} | {r['seconds']:.1f} | {n * m / r['seconds']:,.0f} "
            f"| {r['cpu']:.1f} | {int(r['rounds'])} | {int(r['mirrored'])} |"
        )
        print(rows[-1], flush=True)
    if args.quick or args.no_write:
        return
    report.write_section(
        "## Tracking: the MLflow bridge's catch-up\n\n"
        f"`python -m benchmarks.bench_tracking` on {pyplatform.machine()}, {os.cpu_count()} "
        "cores: an in-process hub (SQLite) with N ended runs of M metric points each, none "
        "mirrored yet (the backlog after a tracking-server outage), and a real MLflow "
        f"server (`tracking/build.sh`, SQLite store) on the same cores. Rounds of "
        f"`hub.runs.tracking.mirror_pending` ({tracking.RUNS_PER_ROUND} runs a round, "
        f"{tracking.BATCH} points a request) until nothing is pending; *hub CPU*: this "
        "process's CPU seconds in them (the rest is MLflow's).\n\n"
        "| runs N | points per run M | points | seconds | points/s | hub CPU (s) | rounds "
        "| MLflow runs |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    main()

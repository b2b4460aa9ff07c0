"""Runtime pre-warm (issue 4 item 7): run startup with and without a prepared runtime.

A real hub, the real agent loop and a real Ray cluster (head on 127.0.0.85 without
GPUs, one emulated GPU on 127.0.0.86 — the node runs land on and the one runtimes are
built on). Every repetition installs a *different* pinned ``termcolor`` version from
PyPI, so each one starts cold. Three ways to start a run with new pip requirements:

- **no pre-warm** (agent ``prewarm=False``): the job is submitted at once and Ray
  builds the virtualenv at job start;
- **prepared on placement**: the agent builds the runtime on the node, then submits;
- **prepared while queued**: the run waits behind a run holding the GPU; the hub's
  hint makes the agent build the runtime meanwhile; the GPU is then freed.

Measured from the hub's event log: *placed → RUNNING* (``attempt_created`` →
``running``) and, where the run did not queue on purpose, *submit → RUNNING*.
``--quick`` (CI smoke, seconds) **skips pip entirely**: one run without requirements
per mode (no pre-warm / prepared on placement), which exercises the harness and the
measurements but not a runtime build; it leaves the documentation alone.

    python -m benchmarks.bench_prewarm [--quick] [--reps N] [--no-write]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import report
from taugrid.backends.ray import ray_local
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

__all__ = ["main"]

QUICK_SKIP = (
    "a Ray cluster and prepared runs (about 50 s); "
    "the same path runs in tests/agent/test_prewarm.py"
)
"""Why ``run_all --quick`` (CI's ``make bench-quick``) leaves this one out."""

HEAD, GPU = "127.0.0.85", "127.0.0.86"
VERSIONS = ["2.0.0", "2.0.1", "2.1.0", "2.1.1", "2.2.0", "2.3.0", "2.4.0", "2.5.0", "3.0.0"]
MODES = ("no pre-warm", "prepared on placement", "prepared while queued")


@dataclasses.dataclass
class Sample:
    mode: str
    pip: str
    placed_to_running_s: float
    submit_to_running_s: float | None
    prepare_s: float | None


def _yaml(pip: str, i: int) -> str:
    text = rg.quickstart_yaml("--steps 3 --checkpoint-every 3", retries=0, name=f"pw-{i}")
    return text + (f'runtime:\n  pip: ["{pip}"]\n' if pip else "")


def _runtime_ready(c: httpx.Client, run_id: str) -> bool:
    return "runtime_ready" in _events(c, run_id)


def _events(c: httpx.Client, run_id: str) -> dict[str, float]:
    """First timestamp of each event kind (and the preparation's duration)."""
    out: dict[str, float] = {}
    for e in c.get(f"/v1/runs/{run_id}/events").json():
        out.setdefault(e["kind"], e["ts"])
        if e["kind"] == "runtime_ready":
            out["prepare_s"] = e["payload"].get("seconds", 0.0)
    return out


def _sample(c: httpx.Client, mode: str, pip: str, run_id: str, submitted: float) -> Sample:
    done = rg.wait_run(c, run_id, rg.finished, timeout=600)
    assert done["state"] == "succeeded", done["reason"]
    ev = _events(c, run_id)
    queued = mode == MODES[2]
    return Sample(
        mode,
        pip,
        ev["running"] - ev["attempt_created"],
        None if queued else ev["running"] - submitted,
        ev.get("prepare_s"),
    )


def _platform(tmp: Path, cluster: ray_local.LocalRayCluster, name: str, prewarm: bool) -> Any:
    engine = db.open_engine(f"sqlite:///{tmp / f'{name}.db'}")
    server = HubServer(make_hub(engine, tmp / f"home-{name}")).start()
    agent = rg.AgentThread(server, cluster, tmp / f"agent-{name}")
    agent.agent.config = dataclasses.replace(agent.agent.config, prewarm=prewarm)
    if not prewarm:
        agent.agent.prewarm = None
    return engine, server, agent.start()


def _run_mode(
    mode: str, pips: list[str], tmp: Path, cluster: ray_local.LocalRayCluster
) -> list[Sample]:
    engine, server, agent = _platform(tmp, cluster, mode.split()[0], mode != MODES[0])
    out = []
    try:
        with server.http() as c:
            for i, pip in enumerate(pips):
                blocker = None
                if mode == MODES[2]:
                    blocker = rg.submit_run(c, rg.quickstart_yaml("--steps 6000 --step-sleep 0.1"))
                    rg.wait_run(c, blocker["id"], lambda r: r["state"] == "running")
                t0 = time.time()
                run = rg.submit_run(c, _yaml(pip, i))
                if blocker is not None:
                    bh.wait_for(
                        functools.partial(_runtime_ready, c, run["id"]),
                        timeout=600,
                        what="the runtime of the queued run",
                    )
                    c.post(f"/v1/runs/{blocker['id']}/cancel")
                out.append(_sample(c, mode, pip, run["id"], t0))
                print(out[-1], flush=True)
    finally:
        agent.stop()
        server.stop()
        engine.dispose()
    return out


def _start(tmp: Path) -> ray_local.LocalRayCluster:
    cluster = ray_local.LocalRayCluster(
        HEAD,
        bh.free_port(HEAD, 6900, 6949),
        bh.free_port(HEAD, 8900, 8949),
        [
            ray_local.NodeShape(ip=HEAD, num_cpus=4, num_gpus=0, accelerator=None),
            ray_local.NodeShape(ip=GPU, num_cpus=4, num_gpus=1),
        ],
        tmp / "ray",
    )
    return cluster.start(timeout_s=120)


def _fmt(xs: list[float | None]) -> str:
    vals = [x for x in xs if x is not None]
    if not vals:
        return "—"
    return f"{statistics.median(vals):.1f} s ({min(vals):.1f}-{max(vals):.1f})"


def _section(samples: list[Sample], cmd: str, reps: int) -> str:
    rows = []
    for mode in MODES:
        got = [s for s in samples if s.mode == mode]
        rows.append(
            f"| {mode} | {_fmt([s.placed_to_running_s for s in got])} | "
            f"{_fmt([s.submit_to_running_s for s in got])} | {_fmt([s.prepare_s for s in got])} |"
        )
    return (
        "## Runtime pre-warm\n\n"
        f"Command: `{cmd}` (2 cores shared with other work; real hub, agent and\n"
        f"Ray cluster: head {HEAD} without GPUs, one emulated GPU on {GPU}). Each of the\n"
        f"{reps} repetitions per row installs a different pinned `termcolor` version from\n"
        "PyPI, so every run starts with new requirements. Median (min-max) over the\n"
        "repetitions. Ray makes each pip virtualenv by cloning the virtualenv Ray runs in\n"
        "(here a 1.3 GB venv), so even a 7 kB package costs 20-30 s to prepare.\n\n"
        "| start | placed → RUNNING | submit → RUNNING | runtime preparation |\n"
        "|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "*No pre-warm*: Ray builds the virtualenv when the job starts. *Prepared on\n"
        "placement*: the agent builds it on the GPU node first, then submits — the same\n"
        "work moved before the submission (its cost is in the preparation column).\n"
        "*Prepared while queued*: the run waited behind a run holding the GPU and the hub's\n"
        "hint had the agent build its runtime meanwhile, so placement starts it on a warm\n"
        "virtualenv (submit → RUNNING is not shown: it includes the queueing on purpose).\n"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    reps = 1 if args.quick else min(args.reps, len(VERSIONS) // len(MODES))
    modes = MODES[:2] if args.quick else MODES
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cluster = _start(tmp)
        samples: list[Sample] = []
        try:
            for m, mode in enumerate(modes):
                pips = (
                    [""] if args.quick else [f"termcolor=={v}" for v in VERSIONS[m * reps :][:reps]]
                )
                samples += _run_mode(mode, pips, tmp, cluster)
        finally:
            cluster.stop()
    cmd = "python -m benchmarks.bench_prewarm" + (" --quick" if args.quick else "")
    section = _section(samples, cmd, reps)
    print(section)
    if not (args.no_write or args.quick):
        report.write_section(section)


if __name__ == "__main__":
    main()

"""Reclaim to resume on real Ray: a spot run whose node is taken back, with and without a
notice it can act on.

Two Ray nodes of one spot pool (``taugrid.io/pool=sp``, 4 emulated A100-80G each), a real
hub and the real agent with its node health checker (a round every 0.5 s). The quickstart
trains 1 step every 0.2 s and checkpoints every 25 steps; when it has logged step 35 (10
steps past its last periodic checkpoint) its node gets a reclaim notice through the
checker's fault-injection seam (what a cloud's metadata service announces). Two ways:

- **notice, 10 s grace** (``reclaim_grace_s=10``): the job reads ``tau.preemption_notice()``,
  checkpoints at once and waits; the agent stops it when the grace ends;
- **no grace** (``reclaim_grace_s=0``): the agent stops the job as soon as it hears, as
  when a provider gives no notice or a job ignores it; the run resumes from its last
  periodic checkpoint.

Times (hub clock, from the run's events and metrics): **notice** = the notice written →
the hub flags the attempt (``reclaim_notice``); **stop** = → the attempt ended and the run
queued again (``retry``); **restart** = → the next attempt runs on the other node
(``attempt_running``); **resume** = → its first metric line (checkpoint loaded). **Lost
steps**: what the hub counted as trained twice (``lost_work``).

    python -m benchmarks.bench_spot_reclaim [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import report
from taugrid.agent.nodes import nodecheck
from taugrid.backends.ray import ray_local
from taugrid.render import naming
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import platform_builders as pb
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

__all__ = ["main"]

QUICK_SKIP = (
    "Ray and two reclaims with a 10 s grace (about 90 s); "
    "the same path runs in tests/hub/test_spot_reclaim.py"
)
"""Why ``run_all --quick`` (CI's ``make bench-quick``) leaves this one out."""

IPS = ("127.0.23.20", "127.0.23.21")
POOL = "sp"
PLATFORM = pb.one_cluster(
    "local",
    [
        f"{{name: {POOL}, gpu_model: A100-80G, gpus_per_node: 4, cpus_per_node: 16,"
        " memory_per_node: 128Gi, nodes: 2, cost_per_gpu_hour: 0.9, capacity: spot,"
        " reclaims_per_hour: 0.1}"
    ],
)
STEPS, EVERY, AT_STEP = 80, 25, 35
ARGS = f"--steps {STEPS} --checkpoint-every {EVERY} --step-sleep 0.2"
WAYS = {"notice, 10 s grace": 10.0, "no grace": 0.0}


def _running_past(c: httpx.Client, run_id: str, step: int) -> dict[str, Any] | None:
    run = c.get(f"/v1/runs/{run_id}").json()
    a = run["attempts"][-1] if run["attempts"] else None
    if not a or a["state"] != "running" or not a["nodes"]:
        return None
    rows = c.get(f"/v1/runs/{run_id}/metrics").json()
    steps = [int(m["step"]) for m in rows if m["name"] == "loss"]
    return dict(a) if steps and max(steps) >= step else None


def _one(c: httpx.Client, inject: Path) -> dict[str, float]:
    tau_yaml = rg.quickstart_yaml(ARGS, retries=0)
    run_id = rg.submit_run(c, tau_yaml.replace("resilience:\n", "resilience:\n  capacity: spot\n"))[
        "id"
    ]
    first = bh.wait_for(
        lambda: _running_past(c, run_id, AT_STEP), timeout=180, what=f"step {AT_STEP}"
    )
    assert first is not None
    node = first["nodes"][0]
    t0 = time.time()
    (inject / f"{node}.json").write_text(json.dumps({"reclaim": "terminating"}))
    done = rg.wait_run(c, run_id, rg.finished, timeout=300)
    (inject / f"{node}.json").unlink()
    assert done["state"] == "succeeded", done["reason"]
    events = c.get(f"/v1/runs/{run_id}/events").json()
    metrics = c.get(f"/v1/runs/{run_id}/metrics").json()

    def ts(kind: str, nth: int = 0) -> float:
        return float([e["ts"] for e in events if e["kind"] == kind][nth])

    lost = next(e["payload"]["lost_steps"] for e in events if e["kind"] == "lost_work")
    first_metric = min(m["wall_time"] for m in metrics if m["attempt"] == 2)
    return {
        "notice": ts("reclaim_notice") - t0,
        "stop": ts("retry") - ts("reclaim_notice"),
        "restart": ts("attempt_running", 1) - ts("retry"),
        "resume": first_metric - ts("attempt_running", 1),
        "lost": float(lost or 0),
    }


def _clear(c: httpx.Client) -> None:
    for n in c.get("/v1/admin/nodes").json():
        if n["marks"]:
            c.post("/v1/admin/nodes/clear", json={"cluster_id": "local", "node_id": n["node_id"]})


def _way(cluster: ray_local.LocalRayCluster, tmp: Path, grace_s: float) -> dict[str, float]:
    (tmp / "platform.yaml").write_text(PLATFORM)
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    hub = make_hub(engine, tmp / "home", tmp / "platform.yaml", reclaim_grace_s=grace_s)
    server = HubServer(hub).start()
    checker = nodecheck.CheckerConfig(every_s=0.5, max_clears=100)
    agent = rg.AgentThread(
        server, cluster, tmp / "agent", expected_nodes=2, health=checker, spot_pools=(POOL,)
    )
    agent.start()
    inject = tmp / "agent" / "health" / "nodes"
    inject.mkdir(parents=True, exist_ok=True)
    try:
        with server.http() as c:
            out = _one(c, inject)
            _clear(c)
            return out
    finally:
        agent.stop()
        server.stop()
        engine.dispose()


def measure() -> dict[str, dict[str, float]]:
    """Each way on a Ray cluster of its own (a reclaimed node's cordon is the cluster's)."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for n, (way, grace) in enumerate(WAYS.items()):
            tmp = Path(d) / f"way-{n}"
            shapes = [ray_local.NodeShape(ip=ip, labels={naming.POOL_LABEL: POOL}) for ip in IPS]
            cluster = rg.start_ray(list(IPS), tmp / "ray", shapes)
            try:
                out[way] = _way(cluster, tmp, grace)
            finally:
                cluster.stop()
            print(way, {k: round(v, 2) for k, v in out[way].items()}, flush=True)
    return out


def _section(r: dict[str, dict[str, float]], cmd: str) -> str:
    rows = []
    for way, t in r.items():
        total = sum(v for k, v in t.items() if k != "lost")
        rows.append(
            f"| {way} | {total:.1f} s | {t['notice']:.1f} s | {t['stop']:.1f} s "
            f"| {t['restart']:.1f} s | {t['resume']:.1f} s | {t['lost']:.0f} |"
        )
    return (
        "## Spot: reclaim to resume on real Ray\n\n"
        f"`{cmd}`: a spot run of the quickstart (a step every 0.2 s, a checkpoint every\n"
        f"{EVERY} steps) reclaimed at step {AT_STEP} on a local Ray cluster of two spot nodes\n"
        "(4 emulated GPUs each), the agent's checker every 0.5 s; on the 2-core development\n"
        f"machine, load average {os.getloadavg()[0]:.1f} at the end. Notice: the notice →\n"
        "the hub flags the attempt; stop: → the attempt ended (the grace included); restart:\n"
        "→ the next attempt runs on the other node; resume: → its first metric line; lost\n"
        "steps: trained twice. See the module docstring.\n\n"
        "| way | notice → resumed | notice | stop | restart | resume | lost steps |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "With a notice the job checkpoints at once and loses nothing, at the price of the\n"
        "grace (the GPUs stay held by a waiting job); without one it loses what it trained\n"
        "since its last periodic checkpoint, as the scheduling core's `RECLAIM_LOSS_S`\n"
        "assumes (half a checkpoint interval on average).\n"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    section = _section(measure(), "python -m benchmarks.bench_spot_reclaim")
    print(section)
    if not args.no_write:
        report.write_section(section)


if __name__ == "__main__":
    main()

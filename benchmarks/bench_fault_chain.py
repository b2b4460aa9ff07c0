"""Detection-to-resume time of the automatic fault chain, per fault kind, on real Ray.

A CPU-only Ray head (127.0.23.10) and two nodes of 4 emulated GPUs (127.0.23.11-12),
a real hub and the real agent with its node health checker (a round every
``CHECK_S``; marks after 2 failing rounds). For each fault kind one run of the
quickstart (checkpoint every 20 steps) is started; once it runs with a checkpoint on
a GPU node the fault is injected:

- ``xid``, ``ecc``, ``disk``: the node's fault-injection file (what NVML or the disk
  check would read);
- ``log-xid`` / ``nccl``: the job prints an Xid line / NCCL's watchdog timeout, then
  hangs (the log monitor);
- ``stall``: the job hangs silently (``resilience.stall``: interval 2 s, restart after 8);
- ``node-loss``: the node's Ray processes are killed (last: it takes a node away).

Times (from the run's events and metrics, hub clock): **detection** = fault → the
attempt is stopped (``attempt_failed``); **replacement** = → the next attempt runs on
another node (includes the retry backoff of 2 s and Ray's job start); **resume** = →
the new attempt's first metric line (it loaded the checkpoint). For ``stall`` and
``log-xid``, ``nccl`` the fault starts at the attempt's last metric line.

    python -m benchmarks.bench_fault_chain [--quick] [--no-write] [--kinds KIND ...]

``--quick`` (CI): the ``xid`` kind only, nothing written.
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
from taugrid.store import db
from tests.backends import backend_helpers as bh
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

__all__ = ["main"]

QUICK_SKIP = (
    "Ray and a fault chain per kind (about 60 s); "
    "the same path runs in tests/hub/test_health_chain.py"
)
"""Why ``run_all --quick`` (CI's ``make bench-quick``) leaves this one out."""

IPS = ["127.0.23.10", "127.0.23.11", "127.0.23.12"]
CHECK_S = 1.0
SLOW = "--steps 150 --checkpoint-every 20 --step-sleep 0.08"
HANG = "--steps 60 --checkpoint-every 20 --fail-at-step 30 --fail-mode hang"
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."
NCCL = (
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
    "OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
)
STALL = "  stall:\n    interval: 2s\n    warn_after: 3\n    restart_after: 8\n"
INJECTED = {
    "xid": {"xid": [79]},
    "ecc": {"ecc_uncorrected": 4},
    "disk": {"disk_free_fraction": 0.005},
}
KINDS = ["xid", "ecc", "disk", "log-xid", "nccl", "stall", "node-loss"]
_LOGGED = {"log-xid": XID, "nccl": NCCL}  # printed by the job, which then hangs


def _yaml(kind: str) -> str:
    if kind in _LOGGED:
        return rg.quickstart_yaml(HANG, env={"FAIL_MESSAGE": _LOGGED[kind]}, name=kind)
    if kind == "stall":
        return rg.quickstart_yaml(HANG, name=kind).replace("resilience:\n", "resilience:\n" + STALL)
    return rg.quickstart_yaml(SLOW, name=kind)


def _gpu_node(run: dict[str, Any], gpu_nodes: list[str]) -> str | None:
    a = run["attempts"][-1] if run["attempts"] else None
    if not a or a["state"] != "running" or (a["checkpoint_step"] or 0) < 20:
        return None
    return next((n for n in a["nodes"] if n in gpu_nodes), None)


def _one(
    c: httpx.Client, kind: str, cluster: ray_local.LocalRayCluster, inject: Path
) -> dict[str, float]:
    ids = cluster.node_ids()
    run = rg.submit_run(c, _yaml(kind))
    bad = bh.wait_for(
        lambda: _gpu_node(c.get(f"/v1/runs/{run['id']}").json(), [ids[1], ids[2]]),
        timeout=240,
        what=f"{kind}: running with a checkpoint",
    )
    t0 = time.time()
    if kind in INJECTED:
        (inject / f"{bad}.json").write_text(json.dumps(INJECTED[kind]))
    elif kind == "node-loss":
        cluster.kill_node(bad)
    done = rg.wait_run(c, run["id"], rg.finished, timeout=400)
    (inject / f"{bad}.json").unlink(missing_ok=True)
    assert done["state"] == "succeeded", (kind, done["reason"])
    events = c.get(f"/v1/runs/{run['id']}/events").json()
    metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
    if kind == "stall" or kind in _LOGGED:
        t0 = max(m["wall_time"] for m in metrics if m["attempt"] == 1)
    failed = next(e["ts"] for e in events if e["kind"] == "attempt_failed")
    running = [e["ts"] for e in events if e["kind"] == "attempt_running"][1]
    last = done["attempts"][-1]["number"]
    first = min((m["wall_time"] for m in metrics if m["attempt"] == last), default=None)
    if first is None:
        seen = sorted({(m["attempt"], m["step"] is not None) for m in metrics})
        raise AssertionError(f"{kind}: no metric of attempt {last}; attempts seen: {seen}")
    return {"detect": failed - t0, "replace": running - failed, "resume": first - running}


def _clear_all(c: httpx.Client) -> None:
    for n in c.get("/v1/admin/nodes").json():
        if n["marks"]:
            c.post("/v1/admin/nodes/clear", json={"cluster_id": "local", "node_id": n["node_id"]})


def measure(kinds: list[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        shapes = [ray_local.NodeShape(ip=IPS[0], num_gpus=0, num_cpus=4)]
        shapes += [ray_local.NodeShape(ip=ip) for ip in IPS[1:]]
        cluster = ray_local.LocalRayCluster(
            IPS[0],
            bh.free_port(IPS[0], 6600, 6699),
            bh.free_port(IPS[0], 8600, 8699),
            shapes,
            tmp / "ray",
            job_start_timeout_s=60,
        ).start(timeout_s=180)
        engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
        server = HubServer(make_hub(engine, tmp / "home")).start()
        checker = nodecheck.CheckerConfig(every_s=CHECK_S, max_clears=100)
        agent = rg.AgentThread(server, cluster, tmp / "agent", report_s=2.0, health=checker).start()
        inject = tmp / "agent" / "health" / "nodes"
        inject.mkdir(parents=True, exist_ok=True)
        try:
            with server.http() as c:
                bh.wait_for(
                    lambda: len(c.get("/v1/admin/nodes").json()) == 3, timeout=120, what="nodes"
                )
                for kind in kinds:
                    out[kind] = _one(c, kind, cluster, inject)
                    print(kind, {k: round(v, 2) for k, v in out[kind].items()}, flush=True)
                    _clear_all(c)
        finally:
            agent.stop()
            server.stop()
            engine.dispose()
            cluster.stop()
    return out


_NOTE = (
    "\n"
    "Detection of the injected kinds is two checker rounds plus the sync that carries the\n"
    "mark and Ray stopping the job; `stall` detection is what `resilience.stall` asks for\n"
    "(8 intervals of 2 s) plus the stop; `log-xid`, `nccl` and `node-loss` are seen at the\n"
    "next log read or job poll. Replacement includes the 2 s retry backoff, placement, the cordon\n"
    "taking the node's GPUs and Ray starting the job; resume is the job's own start-up and\n"
    "checkpoint load.\n"
)


def _section(r: dict[str, dict[str, float]], cmd: str) -> str:
    rows = []
    for kind, t in r.items():
        total = sum(t.values())
        share = " / ".join(f"{100 * t[k] / total:.0f} %" for k in ("detect", "replace", "resume"))
        rows.append(
            f"| {kind} | {total:.1f} s | {t['detect']:.1f} s | {t['replace']:.1f} s "
            f"| {t['resume']:.1f} s | {share} |"
        )
    return (
        "## Fault chain: detection to resume\n\n"
        f"`{cmd}` — one run per fault kind on a local Ray cluster (CPU head + two nodes of\n"
        f"4 emulated GPUs), the agent's checker every {CHECK_S:g} s (mark after 2 failing\n"
        "rounds), retry backoff 2 s; on the 2-core development machine, load average\n"
        f"{os.getloadavg()[0]:.1f} at the end.\n"
        "Detection: fault → attempt stopped; replacement: → next attempt running on another\n"
        "node; resume: → its first metric line (checkpoint loaded). See the module\n"
        "docstring for how each fault is made.\n\n"
        "| fault | fault → resumed | detection | replacement | resume | share (d / r / r) |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n" + _NOTE
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--kinds", nargs="*", choices=KINDS, default=KINDS)
    args = p.parse_args(argv)
    kinds = ["xid"] if args.quick else args.kinds
    result = measure(kinds)
    cmd = "python -m benchmarks.bench_fault_chain" + (" --quick" if args.quick else "")
    if not args.quick and kinds != KINDS:
        cmd += " --kinds " + " ".join(kinds)
    section = _section(result, cmd)
    print(section)
    if not (args.no_write or args.quick):
        report.write_section(section)


if __name__ == "__main__":
    main()

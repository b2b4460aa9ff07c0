"""Hub memory and idle CPU with a large store (issue 32: RSS with 100,000 runs < 300 MiB).

A store (SQLite) is filled with N finished runs (90 % succeeded, the rest failed or
cancelled), each with its nine phases and 20 metric points, written in bulk. The hub
daemon (``python -m taugrid.hub.server.daemon``, the leader of its own store: scheduler, the
results exports' retries and the MLflow bridge all run) starts on it, answers a
1,000-row listing and 100 status reads, then sits for ``SETTLE_S`` (several rounds of
every leader loop). Measured: its resident memory then (VmRSS), its peak (VmHWM), and the
CPU it used while sitting (the leader loops' cost with N runs stored). ``--baseline SRC``
runs the same against the hub code in ``SRC`` (a ``git worktree``'s ``src``). Writes
"## Hub memory and idle CPU with a large store" in docs/BENCHMARKS.md.

    python -m benchmarks.bench_hub_memory [--quick] [--no-write] [--baseline SRC]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from taugrid.lifecycle import phases as ph
from taugrid.sdk.client import client
from taugrid.store import db
from taugrid.store import schema as t
from tests.hub.harness import free_port

__all__ = ["main", "measure", "run_row"]

SETTLE_S = 30.0
_STATES = ["succeeded"] * 9 + ["failed"]


def fill(url: str, n: int) -> None:
    """``n`` finished runs with their phases and 20 metric points each, in bulk."""
    engine = db.open_engine(url)
    now = time.time()
    spec = {"workers": 1, "gpus_per_worker": 1, "name": "b", "outputs": []}
    with engine.begin() as c:
        for lo in range(0, n, 5000):
            ids = [f"bench-{i:06d}" for i in range(lo, min(n, lo + 5000))]
            c.execute(
                t.runs.insert(), [run_row(rid, i, spec, now) for i, rid in enumerate(ids, lo)]
            )
            c.execute(
                t.phases.insert(),
                [
                    {**_phase(p), "run_id": rid}
                    for rid in ids
                    for p in ph.initial_phases(now).values()
                ],
            )
            c.execute(
                t.metrics.insert(),
                [
                    {
                        "run_id": rid,
                        "attempt": 1,
                        "step": s,
                        "name": "loss",
                        "value": 1 / s,
                        "wall_time": now,
                    }
                    for rid in ids
                    for s in range(1, 21)
                ],
            )
    engine.dispose()


def run_row(rid: str, i: int, spec: dict[str, Any], now: float) -> dict[str, Any]:
    """A finished run's row (every tenth failed), created ``10 * i`` seconds ago."""
    return {
        "id": rid,
        "name": "bench",
        "workspace": "default",
        "team": "research",
        "state": _STATES[i % len(_STATES)],
        "reason": "exit code 0",
        "priority": 0,
        "gpus": 1,
        "gpu_model": "A100-80G",
        "spec": spec,
        "config_yaml": "x" * 300,
        "cluster_id": "local",
        "attempts_used": 1,
        "quota_held": False,
        "cancel_requested": False,
        "not_before": 0.0,
        "created_at": now - 10 * i,
        "updated_at": now - 10 * i,
    }


def _phase(rec: ph.PhaseRecord) -> dict[str, Any]:
    return {
        "phase": rec.phase.value,
        "status": "done",
        "source": rec.source,
        "reason": "",
        "ts": rec.ts,
    }


def _proc(pid: int, key: str) -> int:
    line = next(
        ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith(key)
    )
    return int(line.split()[1])


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(n: int, src: str | None = None, settle_s: float = SETTLE_S) -> dict[str, float]:
    """The hub's memory and idle CPU with ``n`` runs stored (its code from ``src``)."""
    with tempfile.TemporaryDirectory(prefix="tau-bench-mem-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {**os.environ, **({"PYTHONPATH": src} if src else {})}
        url = f"sqlite:///{home / 'hub.db'}"  # filled by the code measured (its migrations)
        fill_argv = [sys.executable, "-m", "benchmarks.bench_hub_memory", "--fill", url, str(n)]
        subprocess.run(fill_argv, env=env, check=True, timeout=1200)
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "taugrid.hub.server.daemon",
            "--home",
            str(home),
            "--port",
            str(port),
        ]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            cli = _client(home, port)
            cli.runs(limit=1000)
            for i in range(0, n, max(1, n // 100)):
                cli.run(f"bench-{i:06d}")
            cpu0 = _cpu_s(proc.pid)
            time.sleep(settle_s)
            cpu = _cpu_s(proc.pid) - cpu0
            rss, hwm = _proc(proc.pid, "VmRSS"), _proc(proc.pid, "VmHWM")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {"rss_mib": rss / 1024, "hwm_mib": hwm / 1024, "idle_pct": 100 * cpu / settle_s}


def _client(home: Path, port: int) -> client.Client:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        creds = home / "credentials.json"
        if creds.exists():
            cli = client.Client(
                client.HubConfig(f"http://127.0.0.1:{port}", json.loads(creds.read_text())["token"])
            )
            try:
                cli.health()
                return cli
            except client.HubUnreachable:
                pass
        time.sleep(0.2)
    raise RuntimeError("the hub did not come up in 120 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--baseline", help="a src folder of the code to compare with")
    parser.add_argument("--fill", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        fill(args.fill[0], int(args.fill[1]))
        return
    sizes = [1000] if args.quick else [10_000, 100_000]
    settle = 3.0 if args.quick else SETTLE_S
    rows = []
    for n in sizes:
        for label, src in [
            ("this tree", None),
            *([("before", args.baseline)] if args.baseline else []),
        ]:
            r = measure(n, src, settle)
            mem = f"{r['rss_mib']:.0f} | {r['hwm_mib']:.0f}"
            rows.append(f"| {n:,} | {label} | {mem} | {r['idle_pct']:.1f} |")
            print(rows[-1], flush=True)
    if args.quick or args.no_write:
        return
    base = f" --baseline {args.baseline}" if args.baseline else ""
    report.write_section(
        "## Hub memory and idle CPU with a large store\n\n"
        f"`python -m benchmarks.bench_hub_memory{base}`"
        f" on {os.cpu_count()} cores: the hub daemon (SQLite) on a store of N finished runs "
        "(nine phases and 20 metric points each), after a 1,000-row listing and 100 status "
        f"reads, then {SETTLE_S:g} s with nothing to do (every leader loop runs several "
        "rounds). *RSS*: resident memory at the end; *peak*: VmHWM; *idle CPU*: the hub's "
        "share of one core while it sat. Issue 32's target: RSS < 300 MiB with 100,000 runs.\n\n"
        "| runs stored | code | RSS (MiB) | peak (MiB) | idle CPU (% of a core) |\n"
        "| ---: | --- | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    main()

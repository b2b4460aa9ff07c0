"""Serving (issue 18): time from ``tau serve deploy`` to Ready, and requests/s and
p50/p99 latency through the deployment's endpoint.

The embedded platform through the real ``tau`` script (hub, agent, Ray with 2 nodes x
4 emulated GPUs) on 127.0.28.3: the quickstart is trained, then deployed with its
``serve_app.py`` (1 replica, 1 GPU). Measured:

- deploy → Ready: from the ``tau serve deploy`` call until ``tau serve status`` says
  Ready (admission, placement, the serve driver's job start, Serve's controller and
  proxy start on a fresh cluster, the replica loading the model);
- the same for a second deployment on the cluster where Serve already runs;
- a closed loop of C clients posting one digit each, for D seconds, straight to the
  endpoint (Ray Serve's proxy): requests/s and client-side p50/p99 latency; and what
  ``tau serve status`` reports for the same traffic (the proxy's access log).

``--quick`` (CI) does not start the platform: a deployment needs the platform, a
trained run and Serve (minutes), which tests/cli/test_serve_cli.py already goes through
in CI; the quick pass only checks the benchmark imports and says so.

    python -m benchmarks.bench_serve [--quick] [--clients C] [--seconds D] [--no-write]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from sklearn.datasets import load_digits

from benchmarks import report
from tests.cli import platform_env as pe

__all__ = ["main"]

IP = "127.0.28.3"


def _tau(env: dict[str, str], *args: str, cwd: Path) -> str:
    out = pe.tau(env, *args, cwd=cwd, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"tau {' '.join(args)} failed: {out.stderr}{out.stdout}")
    return out.stdout


@contextlib.contextmanager
def _platform(home: Path, work: Path, tries: int = 3) -> Iterator[dict[str, str]]:
    """``tau up`` (retried: on a loaded host Ray may miss its start timeout), and
    ``tau down`` after every try, failed ones included."""
    for attempt in range(1, tries + 1):
        env = pe.home_env(home, IP)
        up = pe.tau(env, "up", cwd=work, timeout=600)
        try:
            if up.returncode == 0:
                yield env
                return
        finally:
            pe.tau(env, "down", cwd=work)
        print(f"tau up failed (try {attempt}): {up.stderr[-300:]}", flush=True)
    raise RuntimeError("the embedded platform did not start")


def _deploy(env: dict[str, str], work: Path, name: str, run_id: str) -> tuple[float, str]:
    """Seconds from the deploy call to Ready, and the endpoint."""
    t0 = time.perf_counter()
    _tau(env, "serve", "deploy", name, "--from-run", run_id, cwd=work)
    while True:
        dep = json.loads(_tau(env, "serve", "status", name, "-o", "json", cwd=work))
        if dep["phase"] == "Ready":
            return time.perf_counter() - t0, str(dep["endpoint"])
        if dep["phase"] == "Failed" or time.perf_counter() - t0 > 600:
            raise RuntimeError(f"{name}: {dep['phase']} {dep['reason']}")
        time.sleep(0.5)


def load(endpoint: str, clients: int, seconds: float, token: str | None = None) -> dict[str, Any]:
    """``clients`` threads classify one digit in a loop for ``seconds``: requests/s,
    p50/p99 latency of the answered ones, and how many failed."""
    pixels = load_digits().data[0].tolist()
    lat: list[float] = []
    failed = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def client() -> None:
        with httpx.Client(timeout=30, headers=headers) as http:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                ok = http.post(endpoint, json={"pixels": pixels}).status_code == 200
                with lock:
                    lat.append(time.perf_counter() - t) if ok else None
                    failed[0] += 0 if ok else 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    q = statistics.quantiles(lat, n=100)
    return {
        "requests": len(lat),
        "failed": failed[0],
        "rps": len(lat) / wall,
        "p50_ms": q[49] * 1000,
        "p99_ms": q[98] * 1000,
    }


def measure(clients: int, seconds: float, second_deploy: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tau-bench-serve-") as tmp:
        work = Path(tmp) / "quickstart"
        shutil.copytree(pe.ROOT / "examples" / "quickstart", work)
        with _platform(Path(tmp) / "home", work) as env:
            _tau(env, "run", "--watch", cwd=work)
            runs = json.loads(_tau(env, "run", "list", "-o", "json", cwd=work))
            run_id = next(r["id"] for r in runs if r["name"] == "quickstart")
            first, endpoint = _deploy(env, work, "digits", run_id)
            second = _deploy(env, work, "digits2", run_id)[0] if second_deploy else None
            traffic = load(endpoint, clients, seconds)
            time.sleep(6)  # the driver reads the proxy log every 5 s
            status = json.loads(_tau(env, "serve", "status", "digits", "-o", "json", cwd=work))
            for name in ("digits", "digits2") if second_deploy else ("digits",):
                _tau(env, "serve", "delete", name, cwd=work)
    loadavg = os.getloadavg()[0]
    return {
        "first": first,
        "second": second,
        **traffic,
        "status": status["traffic"],
        "load": loadavg,
    }


def _section(r: dict[str, Any], clients: int, seconds: float, cmd: str) -> str:
    st = r["status"] or {}
    second = f"{r['second']:.1f} s" if r["second"] is not None else "-"
    return (
        "## Serving: deploy to Ready, requests/s and latency (`tau serve`)\n\n"
        f"Command: `{cmd}` (2 cores shared with other sessions, load average "
        f"{r['load']:.0f} at the end; embedded platform, quickstart model, 1 replica with 1 "
        "emulated GPU).\n\n"
        "| measure | value |\n| --- | --- |\n"
        f"| deploy → Ready, Serve not yet running on the cluster | {r['first']:.1f} s |\n"
        f"| deploy → Ready, second deployment (Serve running) | {second} |\n"
        f"| requests/s, {clients} clients for {seconds:g} s, straight to the endpoint "
        f"| {r['rps']:.1f} ({r['requests']} requests, {r['failed']} failed) |\n"
        f"| client-side latency p50 / p99 | {r['p50_ms']:.1f} ms / {r['p99_ms']:.1f} ms |\n"
        f"| `tau serve status` (proxy log, last {st.get('window_s', 30):g} s): requests/s, "
        f"p50 / p99 | {st.get('requests_per_s')}, {st.get('p50_ms')} ms / "
        f"{st.get('p99_ms')} ms |\n\n"
        "Deploy → Ready is mostly Ray: the serve driver's job start, Serve's controller and "
        "proxy (first deployment only) and the replica actor. The status line averages over "
        "its 30 s window, so it reads lower than the load's own rate when the load ran for "
        "less than the window. The hub's endpoint versus straight to Serve, and failover: "
        "the section *Serving across regions* (`bench_serve_regions`).\n"
    )


def load_main(
    argv: list[str] | None,
    prog: str,
    quick_note: str,
    section_of: Callable[[int, float], str],
) -> int:
    """The command line of a serving load benchmark: ``--clients``/``--seconds`` for the
    load, ``--quick`` (``make bench-quick``) prints ``quick_note`` and measures nothing,
    ``--no-write`` keeps docs/BENCHMARKS.md as it is; ``section_of`` measures and
    returns the section."""
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{prog}")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        print(f"{prog} --quick: skipped ({quick_note}); run it without --quick to measure")
        return 0
    section = section_of(args.clients, args.seconds)
    print(section)
    if not args.no_write:
        report.write_section(section)
    return 0


def main(argv: list[str] | None = None) -> int:
    return load_main(
        argv,
        "bench_serve",
        "minutes of platform start and training; the same path runs in tests/cli/test_serve_cli.py",
        lambda clients, seconds: _section(
            measure(clients, seconds, second_deploy=True),
            clients,
            seconds,
            "python -m benchmarks.bench_serve",
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())

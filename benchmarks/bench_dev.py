"""Interactive sessions (issue 35 item 1): time from ``tau dev up`` to a notebook that
answers through the hub, a new session and one brought back from its checkpoint.

The embedded platform through the real ``tau`` script (hub, agent, Ray with 2 nodes x
4 emulated GPUs) on 127.0.36.3, JupyterLab from ``jupyter/build.sh``. Each repetition:

- **new**: ``tau dev up NAME --gpus 1 --no-wait`` then, until it answers, ``GET
  /v1/dev/<ws>/<name>/api/status`` through the hub with the bearer token (admission,
  placement, the Ray job's start, the session program's Ray connect, JupyterLab's start);
- **back**: ``tau dev stop`` (saved), then ``tau dev up`` again, timed the same way
  (the resumed attempt also copies the checkpoint back).

``--quick`` (``make bench-quick``) does not start the platform (tests/dev/ goes through a
session in CI) and says so.

    python -m benchmarks.bench_dev [--quick] [--reps N] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import report
from benchmarks.bench_serve import _platform, _tau
from tests.dev import jupyter_env

__all__ = ["main"]

IP = "127.0.36.3"


def _reachable(env: dict[str, str], work: Path, name: str, up: tuple[str, ...]) -> float:
    """Seconds from ``tau dev up`` to ``api/status`` answering 200 through the hub."""
    creds = json.loads((Path(env["TAU_HOME"]) / "credentials.json").read_text())
    url, token = str(creds["hub_url"]).rstrip("/"), str(creds["token"])
    t0 = time.perf_counter()
    s = json.loads(_tau(env, "dev", "up", name, *up, "--no-wait", "-o", "json", cwd=work))
    auth = {"Authorization": f"Bearer {token}"}
    while time.perf_counter() - t0 < 600:
        try:
            r = httpx.get(f"{url}{s['path']}api/status", headers=auth, timeout=10)
            if r.status_code == 200:
                return time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"session {name} not reachable in 600 s")


def _wait_stopped(env: dict[str, str], work: Path, name: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = json.loads(_tau(env, "dev", "list", "-o", "json", cwd=work))
        if any(s["name"] == name and s["state"] == "stopped" for s in rows):
            return
        time.sleep(0.5)
    raise RuntimeError(f"session {name} did not stop")


def measure(reps: int) -> dict[str, Any]:
    new: list[float] = []
    back: list[float] = []
    os.environ["TAU_JUPYTER"] = jupyter_env.jupyter_binary()
    with tempfile.TemporaryDirectory(prefix="tau-bench-dev-") as tmp:
        work = Path(tmp)
        with _platform(work / "home", work) as env:
            for i in range(reps):
                name = f"nb{i}"
                new.append(_reachable(env, work, name, ("--gpus", "1")))
                _tau(env, "dev", "stop", name, cwd=work)
                _wait_stopped(env, work, name)
                back.append(_reachable(env, work, name, ()))
                _tau(env, "dev", "stop", name, cwd=work)
                _wait_stopped(env, work, name)
    return {"new": new, "back": back, "load": os.getloadavg()[0]}


def _cell(xs: list[float]) -> str:
    return (
        f"{statistics.median(xs):.1f} s (min {min(xs):.1f}, max {max(xs):.1f}; "
        + ", ".join(f"{x:.1f}" for x in xs)
        + ")"
    )


def _section(r: dict[str, Any], cmd: str) -> str:
    return (
        "## Interactive sessions: `tau dev up` to a notebook reachable through the hub\n\n"
        f"Command: `{cmd}` (2 cores shared with other work, load average {r['load']:.0f} at "
        "the end; embedded platform, 1 emulated GPU per session, JupyterLab 4.6.6).\n\n"
        "| measure | median (min, max; each) |\n| --- | --- |\n"
        f"| `tau dev up` → `api/status` 200 through the hub, new session | {_cell(r['new'])} |\n"
        f"| the same, brought back after `tau dev stop` | {_cell(r['back'])} |\n\n"
        "It spans admission and placement (the hub's scheduler), the Ray job's start, the "
        "session program's Ray connect (to find its node's address) and JupyterLab's own "
        "start; it is not broken down further here. `tau dev up` without `--no-wait` returns "
        "at about the same time (it polls the session's state every 0.5 s).\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_dev")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        print("bench_dev --quick: skipped (tests/dev/ starts sessions in CI); run it to measure")
        return 0
    cmd = f"python -m benchmarks.bench_dev --reps {args.reps}"
    section = _section(measure(args.reps), cmd)
    print(section)
    if not args.no_write:
        report.write_section(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

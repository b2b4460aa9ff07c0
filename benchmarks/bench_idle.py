"""What an idle embedded platform costs: CPU of the hub, the agent and the supervisor
(and, apart, of Ray's own processes) with nothing running (issue 32 item 2).

``tau up`` under a temporary ``$TAU_HOME`` (hub, agent, a real 2-node Ray cluster on
127.0.23.40 with emulated GPUs), a settling pause, then each process's CPU seconds
(``utime + stime`` from ``/proc/<pid>/stat``) over a window of ``--window`` seconds,
as a share of one core. Ray's processes are every descendant of the agent (head and
worker ``ray start``, GCS, raylets, dashboard, monitors). Target: hub + agent together
under 5 % of a core.

    python -m benchmarks.bench_idle [--window S] [--no-write]

``--quick``: skipped (a platform with Ray takes a minute to start and a minute to
measure).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import cpu_share, report
from tests.cli import platform_env as pe

__all__ = ["main"]

QUICK_SKIP = "a platform with Ray and a minute's window (about 3 min)"
IP = "127.0.23.40"
SETTLE_S = 20.0
_DAEMONS = ("hub", "agent-local", "supervisor")
_cpu_s = cpu_share.cpu_s


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        found += kids
        todo += kids
    return found


def measure(window_s: float) -> dict[str, float]:
    """Per cent of one core per daemon (and Ray's processes together) over the window."""
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        home = Path(tmp) / "home"
        with pe.embedded_platform(home, IP):
            pids = {n: int((home / "run" / f"{n}.pid").read_text()) for n in _DAEMONS}
            time.sleep(SETTLE_S)
            ray = _descendants(pids["agent-local"])
            before = {n: _cpu_s(p) for n, p in pids.items()}
            ray_before = sum(_cpu_s(p) for p in ray)
            time.sleep(window_s)
            got = {n: 100 * (_cpu_s(p) - before[n]) / window_s for n, p in pids.items()}
            got["ray"] = 100 * (sum(_cpu_s(p) for p in ray) - ray_before) / window_s
            got["ray_processes"] = float(len(ray))
    return got


def section(got: dict[str, float], window_s: float, command: str) -> str:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    both = got["hub"] + got["agent-local"]
    return f"""## An idle embedded platform's CPU

`{command}` at {rev.stdout.strip()}, on this 2-core machine: `tau up` (hub, agent, a
real 2-node Ray cluster with emulated GPUs), nothing submitted, {SETTLE_S:.0f} s to settle,
then CPU seconds (user + system, `/proc/<pid>/stat`) over {window_s:.0f} s, as a share of
one core.

| process | % of a core |
| --- | ---: |
| hub | {got["hub"]:.2f} |
| agent | {got["agent-local"]:.2f} |
| supervisor | {got["supervisor"]:.2f} |
| **hub + agent** (issue 32's target: under 5) | **{both:.2f}** |
| Ray's own {got["ray_processes"]:.0f} processes (GCS, raylets, dashboard, ...) | {got["ray"]:.2f} |
"""


def main(argv: list[str] | None = None) -> int:
    def run(window: int, command: str) -> str:
        return section(measure(float(window)), float(window), command)

    return report.sized_main(argv, "bench_idle", ("window", 60), QUICK_SKIP, run)


if __name__ == "__main__":
    raise SystemExit(main())

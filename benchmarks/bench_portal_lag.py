"""Portal benchmark: live-update lag from a metric logged in a job to the page's chart.

A real hub (SQLite), a real Ray region (one node on 127.0.22.20) with the agent at its
production cadence (sync every 1 s, every 0.25 s while a job runs), and headless
Chromium (Debian's /usr/bin/chromium, as in tests/portal) with the run's page open and
never reloaded. The job logs one metric point every ``--period`` seconds with
``taugrid.log`` (the row's ``wall_time`` is the job's clock at logging). Each time the
page's chart gains a point the benchmark takes the time and subtracts the newest
point's ``wall_time``: job → tau.log → agent sync → hub → the page's event stream (polls
the API every second) → the page's refresh → the SVG. Same machine, one clock.
Writes the "## Portal: live-update lag from the job to the chart" section of
docs/BENCHMARKS.md. ``--quick`` skips (it needs Ray and Chromium; CI runs the browser
tests instead).

    python -m benchmarks.bench_portal_lag [--quick] [--points N] [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from taugrid.store import db
from tests import chromium
from tests.hub import region as rg
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, make_hub
from tests.portal import conftest as portal_env

__all__ = ["main"]

IP = "127.0.22.20"
JOB = """\
import time
import taugrid as tau
for step in range(100000):
    tau.log({"tick": float(step)}, step=step)
    time.sleep(PERIOD)
"""
_COUNT = """() => {
  const line = document.querySelector("figure[data-metric='tick'] polyline");
  return line ? line.getAttribute('points').trim().split(' ').length : 0; }"""


def _observe(page: Any, server: HubServer, run_id: str, points: int) -> list[float]:
    """Lag of each new chart point (the first one, which includes the job's start, is not
    counted)."""
    lags: list[float] = []
    seen = 0
    while len(lags) <= points:
        page.wait_for_function(f"() => ({_COUNT})() > {seen}", timeout=300_000)
        shown_at = time.time()
        seen = int(page.evaluate(f"({_COUNT})()"))
        with server.http() as c:
            rows = tb.ok(c.get(f"/v1/runs/{run_id}/metrics"))
        newest = next(r for r in rows if r["name"] == "tick" and r["step"] == seen - 1)
        lags.append(shown_at - float(newest["wall_time"]))
    return lags[1:]


def measure(tmp: Path, points: int, period: float) -> list[float]:
    from playwright import sync_api

    cluster = rg.start_ray([IP], tmp / "ray")
    engine = db.open_engine(f"sqlite:///{tmp / 'hub.db'}")
    server = HubServer(make_hub(engine, tmp / "home")).start()
    agent = rg.AgentThread(server, cluster, tmp / "agent", sync_s=1.0, report_s=10.0).start()
    try:
        code = tmp / "job"
        code.mkdir()
        (code / "train.py").write_text(JOB.replace("PERIOD", str(period)))
        with server.http() as c:
            run = rg.submit_run(c, tb.tau_yaml("lag"), code)
        with sync_api.sync_playwright() as pw:
            b = pw.chromium.launch(executable_path=str(chromium.CHROMIUM), args=chromium.ARGS)
            page = b.new_page(viewport={"width": 1280, "height": 800})
            portal_env.login(page, server.url, server.admin_token)
            page.goto(f"{server.url}/ui/runs/{run['id']}")
            lags = _observe(page, server, run["id"], points)
            b.close()
        with server.http() as c:
            tb.ok(c.post(f"/v1/runs/{run['id']}/cancel"))
            rg.wait_run(c, run["id"], rg.finished, timeout=120)
    finally:
        agent.stop()
        server.stop()
        engine.dispose()
        cluster.stop()
    return lags


def _section(lags: list[float], period: float, cmd: str) -> str:
    s = sorted(lags)
    p90 = s[max(0, int(len(s) * 0.9) - 1)]
    return (
        "## Portal: live-update lag from the job to the chart\n\n"
        f"Command: `{cmd}` (2 cores shared with other sessions; real hub,\n"
        "SQLite, a real Ray region with its agent at the production cadence — sync 1 s,\n"
        "0.25 s while a job runs — and Debian's Chromium with the run's page open, never\n"
        "reloaded).\n\n"
        f"A job logs one point every {period:g} s with `taugrid.log`; for {len(s)} points, the\n"
        "time from the job logging it (its `wall_time`) to the point in the page's SVG chart:\n\n"
        "| p50 | p90 | max |\n|---|---|---|\n"
        f"| {statistics.median(s):.2f} s | {p90:.2f} s | {s[-1]:.2f} s |\n\n"
        "The path: the job appends to its tau.log; the agent reads it at its next sync\n"
        "(≤ 0.25 s while running) and sends it to the hub; the run page's event stream polls\n"
        "the API every second and says `changed`; the page re-fetches itself and swaps in\n"
        "the chart (one run-page load; see the page-load section).\n"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--points", type=int, default=20)
    p.add_argument("--period", type=float, default=2.0)
    args = p.parse_args(argv)
    if args.quick:
        print("bench_portal_lag: skipped with --quick (needs a Ray region and Chromium)")
        return
    with tempfile.TemporaryDirectory() as d:
        lags = measure(Path(d), args.points, args.period)
    section = _section(lags, args.period, "python -m benchmarks.bench_portal_lag")
    print(section)
    if not args.no_write:
        report.write_section(section)


if __name__ == "__main__":
    main()

"""A pipeline that outgrows its cluster: staying capped versus asking the hub to move it.

The two Ray regions of ``tests/elastic/relocation_lab.py``: ``small`` (4 CPUs, where
the run lands) and ``big`` (12 CPUs), a real hub and an agent per region. The pipeline
(two CPU stages of 20 items/s per 1-CPU replica, target 60 items/s) gets 2 CPUs for its
pools on ``small``. The same run of N items is submitted twice, one after the other:
with ``pipeline.relocate: false`` (it stays on ``small``) and with the default (it asks
after two capped windows and moves to ``big``). Reported, hub clock: the wall time from
submission to success, the median items/s of the windows per cluster (the
``pipeline/throughput`` metric), and for the move the seconds from the hub accepting it
to the next attempt running on ``big`` and to its first window.

``--quick`` (CI) skips: minutes of Ray starts and two runs; the same path runs in
tests/elastic/test_elastic_relocation.py.

    python -m benchmarks.bench_relocation [--quick] [--items N] [--no-write]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import report
from tests.elastic import relocation_lab as lab
from tests.hub import region as rg

__all__ = ["main"]


def _one(c: httpx.Client, tmp: Path, name: str, items: int, relocate: bool) -> dict[str, Any]:
    text = lab.tau_yaml(name, relocate)
    started = time.time()
    run = rg.submit_run(c, text, code_dir=lab.code_dir(tmp / name, items, text))
    done = rg.wait_run(c, run["id"], rg.finished, timeout=1800)
    if done["state"] != "succeeded":
        raise SystemExit(f"run {name} {done['state']}: {done['reason']}")
    metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
    events = c.get(f"/v1/runs/{run['id']}/events").json()
    where = {a["number"]: a["cluster_id"] for a in done["attempts"]}
    rates: dict[str, list[float]] = {}
    for m in metrics:
        if m["name"] == "pipeline/throughput":
            rates.setdefault(where[m["attempt"]], []).append(float(m["value"]))
    out: dict[str, Any] = {
        "wall_s": max(a["ended_at"] or 0.0 for a in done["attempts"]) - started,
        "attempts": [where[n] for n in sorted(where)],
        "rate": {k: statistics.median(v) for k, v in rates.items()},
    }
    accepted = [e["ts"] for e in events if e["kind"] == "relocation_accepted"]
    if accepted and len(done["attempts"]) > 1:
        moved = done["attempts"][1]
        first_window = min(m["wall_time"] for m in metrics if m["attempt"] == moved["number"])
        out["to_running_s"] = moved["started_at"] - accepted[0]
        out["to_window_s"] = first_window - accepted[0]
    return out


def measure(items: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="tau-bench-move-") as tmp,
        lab.two_regions(Path(tmp) / "lab") as hub,
        hub.http() as c,
    ):
        stay = _one(c, Path(tmp), "stays", items, relocate=False)
        move = _one(c, Path(tmp), "moves", items, relocate=True)
    return {"stay": stay, "move": move, "load": os.getloadavg()[0]}


def _section(r: dict[str, Any], items: int, cmd: str) -> str:
    stay, move = r["stay"], r["move"]
    rate = move["rate"]
    return (
        "## Pipelines: staying on a cluster too small versus moving (third level)\n\n"
        f"Command: `{cmd}` (2 cores, load average {r['load']:.1f} at the end; two "
        "one-node Ray regions, `small` 4 CPUs and `big` 12 CPUs, a real hub and agents; "
        f"{items} items, two 1-CPU stages of 20 items/s per replica, target 60 items/s).\n\n"
        "| run | attempts | wall time | items/s on small | items/s on big |\n"
        "| --- | --- | ---: | ---: | ---: |\n"
        f"| `relocate: false` | {' → '.join(stay['attempts'])} | {stay['wall_s']:.0f} s | "
        f"{stay['rate'].get('small', 0):.1f} | - |\n"
        f"| default (moves) | {' → '.join(move['attempts'])} | {move['wall_s']:.0f} s | "
        f"{rate.get('small', 0):.1f} | {rate.get('big', 0):.1f} |\n\n"
        f"The move took {move.get('to_running_s', float('nan')):.1f} s from the hub "
        "accepting it to the next attempt running on big (stop, requeue, placement, Ray's "
        f"job start) and {move.get('to_window_s', float('nan')):.1f} s to its first window "
        "(the driver measures its sample again on the new cluster). Items/s are the "
        "medians of the windows' wall-clock rates, actor start-up included; once, on a "
        "shared machine.\n\n"
        "Read it with the host in mind: the third level works (the run moved, resumed and "
        "finished), but here moving did not pay. Each window (`window_s: 1`, 60 items) "
        "starts its stage pools afresh, and big's 12 CPUs are logical: on 2 real cores "
        "its 6-8 actors took about 30 s to start per window, against 2 on small. The "
        "controller sizes from the seconds the stages spend working, not from start-up, "
        "so it cannot see that cost. Where CPUs are real and windows long against "
        "start-up, the move should gain what the target asks; that is not measured here, "
        "and a decision that weighs measured start-up is not built.\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report.sized_main(
        argv,
        "bench_relocation",
        ("items", 1800),
        "minutes of Ray and two runs; the same path runs in "
        "tests/elastic/test_elastic_relocation.py",
        lambda items, cmd: _section(measure(items), items, cmd),
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""A spanning run through the hub: how soon its guest workers join, and its throughput
against the same run on one cluster.

``tests/agent/span_regions.py``'s regions on real Ray, a real hub and agents: (1) two
clusters of 2 emulated GPUs each, so the hub spans the 4-worker run of
``examples/span-data-parallel`` 2 + 2; (2) one cluster of 4 GPUs, where it runs whole.
Reported per run: wall time from submission to success (hub clock), the job's own
shards/s (``result.json``), the shards each region took, and for the span the seconds
from the attempt's creation to the guest node's ``guest_joined`` event (the head's agent
sends the join address, the hub relays it, the guest agent starts ``ray start`` and the
node registers). The regions are on loopback: this measures the live path's overhead,
not a slow link (``bench_span`` does that in the lab's shaped links).

``--quick`` (CI) skips: two Ray setups and two runs; the same path runs in
tests/agent/test_span_guests.py.

    python -m benchmarks.bench_span_live [--quick] [--shards N] [--no-write]
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from taugrid.backends.ray import ray_local
from tests.agent import span_regions as sr
from tests.cli.platform_env import copy_example
from tests.hub import region as rg

__all__ = ["main"]


def _run(tmp: Path, gpus: dict[str, int], shards: int, token: Path) -> dict[str, Any]:
    def edit(doc: dict[str, Any]) -> None:
        doc["run"]["args"] = [
            *("--workers", "4", "--shards", str(shards)),
            *("--shard-mb", "0.05", "--step-s", "0.1"),
        ]

    code = copy_example(sr.EXAMPLE, tmp / "code", edit)
    with sr.regions(tmp, gpus, token) as hub, hub.http() as c:
        started = time.time()
        rid = rg.submit_run(c, (code / "tau.yaml").read_text(), code_dir=code)["id"]
        done = rg.wait_run(c, rid, rg.finished, timeout=1800)
        events = c.get(f"/v1/runs/{rid}/events").json()
    if done["state"] != "succeeded":
        raise SystemExit(f"run {rid} {done['state']}: {done['reason']}")
    result = json.loads(next(Path(done["record_dir"]).rglob("result.json")).read_text())
    ts = {e["kind"]: e["ts"] for e in reversed(events)}  # the first of each kind
    out = {
        "wall_s": max(a["ended_at"] or 0.0 for a in done["attempts"]) - started,
        "shards_per_s": result["shards_per_s"],
        "by_region": result["by_region"],
        "placed": done["attempts"][0]["cluster_id"],
    }
    if "guest_joined" in ts:
        out["join_s"] = ts["guest_joined"] - ts["attempt_created"]
    return out


def measure(shards: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tau-bench-span-") as tmp:
        token = ray_local.write_auth_token(Path(tmp) / "ray-token")  # one per process
        span = _run(Path(tmp) / "span", {"a": 2, "b": 2}, shards, token)
        one = _run(Path(tmp) / "one", {"a": 4}, shards, token)
    return {"span": span, "one": one, "load": os.getloadavg()[0]}


def _section(r: dict[str, Any], shards: int, cmd: str) -> str:
    span, one = r["span"], r["one"]
    join = span.get("join_s", float("nan"))

    def regions(x: dict[str, Any]) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(x["by_region"].items()))

    return (
        "## Spanning through the hub: guest join and throughput (live path)\n\n"
        f"Command: `{cmd}` (2 cores, load average {r['load']:.1f} at the end; "
        "`tests/agent/span_regions.py`: one-node Ray clusters on loopback, a real hub and "
        "agents that may span; `examples/span-data-parallel`, 4 one-GPU workers, "
        f"{shards} shards of 0.05 MiB, 0.1 s of emulated GPU time each).\n\n"
        "| run | placed | wall time | shards/s (job) | shards per region | guest joined after |\n"
        "| --- | --- | ---: | ---: | --- | ---: |\n"
        f"| span over 2 + 2 GPUs | head {span['placed']} | {span['wall_s']:.0f} s | "
        f"{span['shards_per_s']:.1f} | {regions(span)} | {join:.1f} s |\n"
        f"| one cluster of 4 GPUs | {one['placed']} | {one['wall_s']:.0f} s | "
        f"{one['shards_per_s']:.1f} | {regions(one)} | - |\n\n"
        "*Guest joined after*: from the attempt's creation to the `guest_joined` event "
        "(the head's join address relayed through the hub, the guest agent's `ray start "
        "--address`, the node registered with the head). The job's clock starts once its "
        "workers have started, so a guest that joins late delays its start, not its "
        "shards/s. Once, on a shared machine.\n"
    )


def main(argv: list[str] | None = None) -> int:
    return report.sized_main(
        argv,
        "bench_span_live",
        ("shards", 400),
        "two Ray setups and two runs; the same path runs in tests/agent/test_span_guests.py",
        lambda shards, cmd: _section(measure(shards), shards, cmd),
    )


if __name__ == "__main__":
    raise SystemExit(main())

"""Record uploads benchmark: how far the record store lags the job (``agent.records.recordsync``).

On the real SeaweedFS server (``tests/weed_s3.py``, built by ``s3/build.sh``):

- metric lag: a writer appends one ``tau.log``-shaped line every 50 ms to a scratch
  ``metrics.jsonl`` while the real ``RecordSync`` thread uploads it; a reader reads the
  stored object every 20 ms; lag = first seen in the store - written (p50/p99);
- checkpoint upload: a checkpoint committed by the in-job SDK (4 files) uploaded by
  ``RecordSync`` (each file verified by reading back, fence read before and after the
  marker) versus a plain ``s3fs.put`` of the same files; throughput and the ratio;
- cross-region failover (full run only): the scenario of
  ``tests/hub/test_failover_s3.py`` (two one-node Ray regions, a hub, two agents, the
  bucket between them; east's hub link cut past the 12 s grace): seconds from the cut to
  attempt 2's first metric in west, and the steps redone (the last step east's agent
  uploaded before the fence moved, minus the checkpoint step west resumed from: east
  still reaches the store while cut off, so it keeps uploading until it is fenced).

    python -m benchmarks.bench_record_uploads [--quick] [--no-write] [--no-failover]

``--quick`` (seconds): the local-directory store, small sizes, printed only. The full
run writes the "## Record uploads: metric lag and checkpoint throughput" section.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import report
from taugrid import payloads as wire
from taugrid.agent.records import recordsync
from taugrid.record import store as recordstore
from taugrid.sdk.job import injob_checkpoint

__all__ = ["main"]

KEY = "bench/runs/r-bench"
LOADS: list[float] = []
"""1-minute load averages sampled during the run (stated with the numbers)."""


def _assignment(records: dict[str, Any]) -> wire.Assignment:
    return wire.Assignment(
        token=1,
        run_id="r-bench",
        attempt=1,
        workspace="bench",
        spec={},
        run_dir="unused",
        records=records,
        record_key=KEY,
    )


def metric_lag(
    store: recordstore.RecordStore, a: wire.Assignment, work: Path, n: int
) -> list[float]:
    """Seconds from each line's write to its first sight in the store."""
    sync = recordsync.RecordSync(a, work / "lag", store)
    sync.stage()
    sync.start()
    written: dict[int, float] = {}
    seen: dict[int, float] = {}
    done = threading.Event()

    def read() -> None:
        while not done.is_set() or len(seen) < len(written):
            data = store.read(f"{KEY}/metrics/metrics.jsonl") or b""
            now = time.time()
            for line in data.splitlines():
                step = json.loads(line)["step"]
                seen.setdefault(step, now)
            if done.is_set() and time.time() - max(written.values()) > 10:
                return
            time.sleep(0.02)

    reader = threading.Thread(target=read)
    reader.start()
    path = sync.scratch / "metrics" / "metrics.jsonl"
    with path.open("ab") as fh:
        for step in range(n):
            line = {"step": step, "name": "loss", "value": 1.0 / (step + 1), "attempt": 1}
            fh.write((json.dumps(line) + "\n").encode())
            fh.flush()
            written[step] = time.time()
            time.sleep(0.05)
    done.set()
    reader.join()
    sync.stop()
    return [seen[s] - written[s] for s in written if s in seen]


def checkpoint_ratio(
    store: recordstore.RecordStore, a: wire.Assignment, work: Path, mb: int, plain: Any
) -> tuple[float, float]:
    """(seconds through RecordSync, seconds through a plain copy) for one checkpoint."""
    scratch = work / "ckpt"
    os.environ["TAU_OUTPUT_DIR"] = str(scratch)
    os.environ["TAU_FENCING_TOKEN"] = "1"
    with injob_checkpoint.checkpoint(100) as d:
        for i in range(4):
            (d / f"shard-{i}.bin").write_bytes(os.urandom(mb * 2**20 // 4))
    sync = recordsync.RecordSync(a, scratch, store)
    started = time.perf_counter()
    sync._checkpoint(scratch / "checkpoints", True)
    ours = time.perf_counter() - started
    files = sorted((scratch / "checkpoints" / "step-00000100").iterdir())
    started = time.perf_counter()
    plain(files)
    return ours, time.perf_counter() - started


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--no-failover", action="store_true", help="skip the Ray scenario")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tau-bench-up-") as tmp:
        work = Path(tmp)
        if args.quick:
            return _run(work, None, n=20, mb=8, write=False)
        from tests import weed_s3

        server = weed_s3.WeedS3(weed_s3.weed_binary(), work / "weed")
        server.start()
        try:
            server.make_bucket("bench")
            failover = None if args.no_failover else _failover(server, work / "fo")
            return _run(work, server, n=400, mb=256, write=not args.no_write, failover=failover)
        finally:
            server.stop()


Failover = tuple[float, int, str]
"""(seconds from the partition to resumed training, steps redone, the attempts)."""


def _failover(server: Any, work: Path) -> Failover:
    """(seconds from the partition to resumed training, steps redone) on real Ray."""
    from tests import weed_s3
    from tests.hub import region as rg
    from tests.hub import test_failover_s3 as fo

    os.environ["TAU_TEST_S3_KEY"], os.environ["TAU_TEST_S3_SECRET"] = weed_s3.KEY, weed_s3.SECRET
    server.make_bucket(fo.BUCKET)
    clusters = rg.start_regions(fo.IPS, work / "ray")
    try:
        with (
            fo.two_regions(server, work, clusters) as (hub, prefix, proxy, _agents),
            hub.http() as c,
        ):
            text = rg.quickstart_yaml(fo.ARGS)
            run = rg.submit_run(c, text)
            rg.wait_run(c, run["id"], fo._on_east_with_checkpoint, timeout=180)
            cut = time.time()
            LOADS.append(os.getloadavg()[0])
            proxy.cut()
            rg.wait_run(c, run["id"], lambda r: len(r["attempts"]) >= 2, timeout=120)
            time.sleep(5)  # east's agent sees the moved fence in the store
            proxy.open.set()  # east comes back and reports its old attempt ended
            done = rg.wait_run(c, run["id"], rg.finished, timeout=300)
            metrics = c.get(f"/v1/runs/{run['id']}/metrics").json()
        # the hub's metrics of attempt 1 stop at the cut (east reported them through the
        # cut link); east's uploads to the store went on until it read the moved fence
        raw = server.filesystem().cat_file(
            f"{prefix}/default/runs/{run['id']}/metrics/metrics.jsonl"
        )
    finally:
        rg.stop_regions(clusters)
    assert done["state"] == "succeeded", done["reason"]
    first = [m for m in metrics if m["attempt"] == 2 and m["name"] == "loss"]
    resumed_at = min(m["wall_time"] for m in first)
    stored = [json.loads(line) for line in raw.splitlines()]
    last_east = max(m["step"] for m in stored if m["attempt"] == 1 and m["name"] == "loss")
    redone = max(0, last_east - min(m["step"] for m in first) + 1)
    path = " → ".join(
        f"{a['cluster_id']} ({a['failure_kind'] or a['state']})" for a in done["attempts"]
    )
    return resumed_at - cut, redone, path


def _run(
    work: Path,
    server: Any,
    *,
    n: int,
    mb: int,
    write: bool,
    failover: Failover | None = None,
) -> int:
    if server is None:
        records: dict[str, Any] = {"url": str(work / "store")}
        dest = work / "plain"

        def plain(files: list[Path]) -> None:
            for f in files:
                (dest / f.name).parent.mkdir(parents=True, exist_ok=True)
                (dest / f.name).write_bytes(f.read_bytes())

        kind = "local directory"
    else:
        os.environ["BENCH_S3_KEY"], os.environ["BENCH_S3_SECRET"] = server_keys()
        records = {
            "url": "s3://bench/p",
            "endpoint_url": server.endpoint,
            "region": "us-east-1",
            "access_key_env": "BENCH_S3_KEY",
            "secret_key_env": "BENCH_S3_SECRET",
        }
        fs = server.filesystem()

        def plain(files: list[Path]) -> None:
            fs.put([str(f) for f in files], "bench/plain/", recursive=False)

        kind = "SeaweedFS S3 (loopback)"
    a = _assignment(records)
    store = recordsync.open_for(a, None)
    LOADS.append(os.getloadavg()[0])
    lags = metric_lag(store, a, work, n)
    ours, base = checkpoint_ratio(store, a, work, mb, plain)
    p50, p99 = _pct(lags, 0.5), _pct(lags, 0.99)
    line = (
        f"{kind}: metric lag p50 {p50:.2f} s, p99 {p99:.2f} s over {len(lags)} lines "
        f"(UPLOAD_S={recordsync.UPLOAD_S:g}); checkpoint {mb} MiB: RecordSync {ours:.2f} s "
        f"({mb / ours:.0f} MiB/s), plain copy {base:.2f} s ({mb / base:.0f} MiB/s), "
        f"ratio {ours / base:.2f}"
    )
    if failover is not None:
        line += f"; failover {failover[0]:.1f} s, {failover[1]} steps redone ({failover[2]})"
    print(line)
    if write:
        LOADS.append(os.getloadavg()[0])
        load = max(LOADS)
        report.write_section(_section(kind, n, mb, p50, p99, ours, base, failover, load))
    return 0


def server_keys() -> tuple[str, str]:
    from tests import weed_s3

    return weed_s3.KEY, weed_s3.SECRET


def _section(
    kind: str,
    n: int,
    mb: int,
    p50: float,
    p99: float,
    ours: float,
    base: float,
    failover: Failover | None,
    load: float,
) -> str:
    fo = (
        f"| cross-region failover, partition to resumed training (lease 3 s, grace 12 s) | "
        f"{failover[0]:.1f} s, {failover[1]} steps redone; attempts {failover[2]} |\n"
        if failover
        else ""
    )
    return f"""## Record uploads: metric lag and checkpoint throughput

`python -m benchmarks.bench_record_uploads` ({time.strftime("%Y-%m-%d")}, {kind}, the
shared 2-core machine at a 1-minute load average of up to {load:.1f}). The agent's
`RecordSync` (`agent/records/recordsync.py`) uploads a job's scratch into the record store.

| measure | value |
|---|---|
| metric lag p50 ({n} lines, 1 per 50 ms, `UPLOAD_S` {recordsync.UPLOAD_S:g} s) | {p50:.2f} s |
| metric lag p99 | {p99:.2f} s |
| checkpoint upload, {mb} MiB in 4 files, `RecordSync` | {ours:.2f} s ({mb / ours:.0f} MiB/s) |
| same files, plain `s3fs.put` | {base:.2f} s ({mb / base:.0f} MiB/s) |
| ratio `RecordSync` / plain | {ours / base:.2f} |
{fo}
The lag is the upload interval plus one whole-file upload of `metrics.jsonl` (objects
cannot be appended to) plus the reader's 20 ms poll. `RecordSync` reads every file back
to verify its sha256 against the checkpoint's marker and reads `FENCE` twice around the
marker; that read-back is most of the ratio's excess over 1. The failover time is the
hub's grace (12 s in the scenario) plus the lease it waits on, placement in west, the
newest complete checkpoint's download into west's scratch and the job's start; the
steps redone are those east's agent uploaded past the checkpoint west resumed from
(checkpoint every 20 steps of 0.1 s, plus the upload lag): east still reaches the store
while cut off from the hub, so it keeps uploading until it reads the moved fence.
"""


if __name__ == "__main__":
    raise SystemExit(main())

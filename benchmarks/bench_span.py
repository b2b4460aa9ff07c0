"""Throughput of one Ray cluster spanning two regions over a shaped link, against the
same job in one region (issue 19, item 2).

The lab of tests/lab/test_span_cluster.py: regions ``a`` and ``b`` in their own network
namespaces, joined by a veth pair shaped with kernel ``tbf``; one Ray cluster, its head
and 2 emulated GPUs in ``a``, a node with 2 more in ``b``. The job is
``examples/span-data-parallel/train.py`` (asynchronous data-parallel SGD; each step a
worker pulls a 2 MiB shard from the driver's object store in ``a`` and spends 0.2 s of
emulated GPU time). Runs, N shards each, one after the other on the same cluster:

1. one region: 2 workers pinned to ``a``;
2. spanning: 4 workers, 2 in ``a`` and 2 in ``b``, over the link at 200 Mbit/s;
3. spanning over a degraded link: the same, with the link re-shaped to 20 Mbit/s.

Reported: shards/s, the shards each region's workers took, and the ratio to one region.
``--quick`` (CI) skips: about two minutes of Ray starts inside namespaces and three
runs; the spanning path runs in tests/lab/test_span_cluster.py.

    python -m benchmarks.bench_span [--quick] [--shards N] [--no-write]
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import report
from taugrid.backends.ray import ray_local
from taugrid.lab import net, span
from tests import ray_auth
from tests.lab import span_jobs

__all__ = ["main"]

SHAPE = ray_local.NodeShape(num_cpus=3, num_gpus=2, accelerator="A100", memory=4 * 2**30)
FAST, SLOW = 200.0, 20.0


@contextlib.contextmanager
def _lab(tmp: Path) -> Iterator[tuple[net.Net, ray_local.LocalRayCluster]]:
    link = net.LinkSpec("a", "b", FAST)
    n = net.Net(
        f"bs{secrets.token_hex(2)}", ("a", "b"), (link,), octet=219, mgmt=True, peer_routes=True
    )
    cluster = span.span_cluster(n, "a", {"a": SHAPE, "b": SHAPE}, tmp / "ray", tmp / "token")
    assert cluster.auth_token_file is not None
    with n.running():
        try:
            cluster.start(timeout_s=240)
            with ray_auth.token_env(cluster.auth_token_file):
                yield n, cluster
        finally:
            cluster.stop()


def measure(shards: int) -> dict[str, Any]:
    common = ["--shards", str(shards)]
    with tempfile.TemporaryDirectory(prefix="tau-bench-span-") as tmp, _lab(Path(tmp)) as lab:
        n, cluster = lab
        out = Path(tmp)
        one = span_jobs.train(
            cluster, out / "one.json", ["--workers", "2", "--regions", "a", *common], timeout_s=1800
        )
        both = span_jobs.train(
            cluster,
            out / "span.json",
            ["--workers", "4", "--regions", "a,b", *common],
            timeout_s=1800,
        )
        n.set_rate("a", "b", SLOW)
        slow = span_jobs.train(
            cluster,
            out / "slow.json",
            ["--workers", "4", "--regions", "a,b", *common],
            timeout_s=1800,
        )
    return {"one": one, "span": both, "slow": slow, "load": os.getloadavg()[0]}


def _row(name: str, r: dict[str, Any], base: float) -> str:
    by = r["by_region"]
    return (
        f"| {name} | {r['workers_start']} | {r['shards_per_s']:.2f} | {by.get('a', 0)} | "
        f"{by.get('b', 0)} | {r['shards_per_s'] / base:.2f} |\n"
    )


def _section(r: dict[str, Any], shards: int, cmd: str) -> str:
    base = r["one"]["shards_per_s"]
    return (
        "## One Ray cluster across two regions versus one region\n\n"
        f"Command: `{cmd}` (2 cores, load average {r['load']:.1f} at the end). Two lab "
        "regions in network namespaces, one Ray cluster (head + 2 emulated GPUs in a, a "
        "node with 2 in b) joined over a veth pair shaped with kernel `tbf`; the job is "
        "examples/span-data-parallel (asynchronous data-parallel SGD, a 2 MiB shard "
        f"pulled from a's object store and 0.2 s of emulated GPU time per step), {shards} "
        "shards per run.\n\n"
        "| run | workers | shards/s | shards by a | shards by b | vs one region |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: |\n"
        + _row("one region (a)", r["one"], base)
        + _row(f"spanning a+b, link {FAST:.0f} Mbit/s", r["span"], base)
        + _row(f"spanning a+b, link {SLOW:.0f} Mbit/s", r["slow"], base)
        + "\nOnce each, on a shared machine. b's workers pay the link for every shard; an "
        "asynchronous job only gets fewer of their steps when the link slows, and the "
        "per-region shard counts (the job's `shards.<region>` metrics) show where the "
        "throughput went.\n"
    )


def _run(shards: int, cmd: str) -> str:
    if os.geteuid() != 0:
        raise SystemExit("bench_span needs root (network namespaces and tc)")
    return _section(measure(shards), shards, cmd)


def main(argv: list[str] | None = None) -> int:
    return report.sized_main(
        argv,
        "bench_span",
        ("shards", 300),
        "Ray started inside network namespaces and three runs; the spanning path runs in "
        "tests/lab/test_span_cluster.py",
        _run,
    )


if __name__ == "__main__":
    raise SystemExit(main())

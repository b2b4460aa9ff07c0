"""Asynchronous data-parallel training that may span regions, and shrinks when one goes.

One driver owns the model (linear regression, numpy) and a queue of data shards. Each
worker is a Ray actor holding one (emulated) GPU; it takes the current parameters and
one shard, computes the shard's gradient and hands it back. The driver applies each
gradient as it arrives (asynchronous SGD: workers never wait for each other), so a
worker behind a slow inter-region link only contributes less often; nothing
synchronises every step, which is what ``placement.communication: async`` declares.

Workers are spread over the nodes with a free GPU, whatever region they are in
(``--regions a,b`` pins them round-robin to those regions through the nodes' custom
resource ``region:<name>``). Shards live in the driver's object store, so a worker in
another region pulls each shard over the inter-region link (``--shard-mb`` is the bytes
moved per step). The GPU work is emulated: a fixed ``--step-s`` seconds per shard
(docs/multi-region.md), plus the real numpy gradient.

A worker that dies (its node, or its whole region cut off) is dropped, its shard goes
back on the queue, and training goes on with the workers left: the job shrinks instead
of failing. It fails only when no worker is left.

Per region, shards done are logged as metrics (``shards.<region>``) with the workers
left, so a slow or lost region shows in the run's metrics. ``--out`` gets a JSON
summary: shards done, seconds, the loss before and after, workers at the start and
end, the shards each region took and a timeline (every 10 shards).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import ray

import taugrid as tau

DIM = 64
WORKERS_START_S = 300


@ray.remote(num_gpus=1, max_restarts=0)
class Worker:
    """One data-parallel worker (one emulated GPU)."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s

    def where(self) -> str:
        return str(ray.util.get_node_ip_address())

    def gradient(self, w: np.ndarray, shard: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        x, y = shard
        time.sleep(self.step_s)  # the emulated GPU's fixed cost per shard
        return np.asarray(2.0 * x.T @ (x @ w - y) / len(y))


def _data(n: int, shard_mb: float, seed: int) -> tuple[list[Any], tuple[np.ndarray, np.ndarray]]:
    """``n`` shards in the object store and a held-out set, from one true model."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=DIM)
    rows = max(8, int(shard_mb * 2**20 / (8 * (DIM + 1))))

    def make() -> tuple[np.ndarray, np.ndarray]:
        x = rng.normal(size=(rows, DIM))
        return x, x @ truth + 0.01 * rng.normal(size=rows)

    return [ray.put(make()) for _ in range(n)], make()


def _loss(w: np.ndarray, held_out: tuple[np.ndarray, np.ndarray]) -> float:
    x, y = held_out
    return float(np.mean((x @ w - y) ** 2))


def _region_of() -> dict[str, str]:
    """Node IP → region, from each node's ``region:<name>`` resource ("" when none).

    A node restarted on the same IP is listed twice, its dead entry without resources:
    that entry must not hide the region of the live one."""
    out: dict[str, str] = {}
    for node in ray.nodes():
        names = [k.split(":", 1)[1] for k in node["Resources"] if k.startswith("region:")]
        if names or not out.get(node["NodeManagerAddress"]):
            out[node["NodeManagerAddress"]] = names[0] if names else ""
    return out


def _start_workers(count: int, step_s: float, regions: list[str]) -> dict[Any, str]:
    """``count`` workers (spread, or round-robin over ``regions``) → their node IPs."""
    workers = []
    for i in range(count):
        if regions:
            opts: dict[str, Any] = {"resources": {f"region:{regions[i % len(regions)]}": 1}}
        else:
            opts = {"scheduling_strategy": "SPREAD"}
        workers.append(Worker.options(**opts).remote(step_s))  # type: ignore[attr-defined]
    # every worker's process must start on its node: minutes on a busy or distant one
    ips = ray.get([w.where.remote() for w in workers], timeout=WORKERS_START_S)
    return dict(zip(workers, ips, strict=True))


@dataclasses.dataclass
class _Loop:
    """The driver's state: parameters, shard queue, what runs where, what each region did."""

    workers: dict[Any, str]
    region: dict[str, str]
    shards: list[Any]
    w: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(DIM))
    queue: list[int] = dataclasses.field(default_factory=list)
    running: dict[Any, tuple[Any, int]] = dataclasses.field(default_factory=dict)
    taken: Counter[str] = dataclasses.field(default_factory=Counter)
    timeline: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    done: int = 0
    lost: int = 0

    def hand_out(self) -> None:
        busy = {worker for worker, _ in self.running.values()}
        for worker in self.workers:
            if worker not in busy and self.queue:
                i = self.queue.pop(0)
                self.running[worker.gradient.remote(self.w, self.shards[i])] = (worker, i)

    def collect(self, lr: float) -> None:
        """Apply the next gradient that arrives; drop a worker that died with its shard."""
        (ref,), _ = ray.wait(list(self.running), num_returns=1)
        worker, i = self.running.pop(ref)
        try:
            grad = ray.get(ref)
        except ray.exceptions.RayActorError:  # its node or its region is gone: shrink
            ip = self.workers.pop(worker)
            self.queue.insert(0, i)
            self.lost += 1
            print(f"worker in {self.region.get(ip) or ip} lost; {len(self.workers)} left")
            return
        self.w -= lr * grad
        self.done += 1
        self.taken[self.region.get(self.workers[worker]) or self.workers[worker]] += 1


def _report(loop: _Loop, t0: float, held_out: tuple[np.ndarray, np.ndarray]) -> None:
    loss = _loss(loop.w, held_out)
    point = {"t": round(time.monotonic() - t0, 3), "workers": len(loop.workers)}
    loop.timeline.append({**point, "shards": dict(loop.taken)})
    metrics = {"loss": loss, "workers": float(len(loop.workers))}
    tau.log(metrics | {f"shards.{r}": float(n) for r, n in loop.taken.items()}, step=loop.done)
    print(f"progress shards={loop.done} workers={len(loop.workers)} loss={loss:.4g}", flush=True)


def train(args: argparse.Namespace) -> dict[str, Any]:
    shards, held_out = _data(args.shards, args.shard_mb, args.seed)
    regions = [r for r in args.regions.split(",") if r]
    loop = _Loop(_start_workers(args.workers, args.step_s, regions), _region_of(), shards)
    loop.queue = list(range(len(shards)))
    start_loss, t0 = _loss(loop.w, held_out), time.monotonic()
    while loop.done < len(shards):
        loop.hand_out()
        if not loop.running:
            raise RuntimeError("every worker is gone: no region is left to train in")
        before = loop.done
        loop.collect(args.lr)
        if loop.done != before and loop.done % 10 == 0:
            _report(loop, t0, held_out)
    seconds = time.monotonic() - t0
    return {
        "shards": loop.done,
        "seconds": round(seconds, 3),
        "shards_per_s": round(loop.done / seconds, 3),
        "loss_start": start_loss,
        "loss_end": _loss(loop.w, held_out),
        "workers_start": args.workers,
        "workers_end": len(loop.workers),
        "workers_lost": loop.lost,
        "by_region": dict(loop.taken),
        "timeline": loop.timeline,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--shards", type=int, default=200)
    p.add_argument("--shard-mb", type=float, default=2.0, help="bytes moved per step (MiB)")
    p.add_argument("--step-s", type=float, default=0.2, help="emulated GPU seconds per shard")
    p.add_argument("--regions", default="", help="pin workers round-robin to these regions")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("result.json"))
    args = p.parse_args()
    ray.init()
    result = train(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    tau.save_artifact(args.out, "result.json")  # the run's artifact (./.tau-local outside one)
    print(json.dumps({k: v for k, v in result.items() if k != "timeline"}), flush=True)


if __name__ == "__main__":
    main()

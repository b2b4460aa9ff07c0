"""Multi-worker launcher run as a Ray Job's entrypoint: one command, N ranked workers.

    python -m taugrid.backends.programs.launch --workers 2 --gpus-per-worker 4 \\
        --cpus-per-worker 8 [--accelerator A100-80G] [--nodes ID,ID] -- python train.py

Inside the job's driver it reserves a placement group of N bundles
(``{CPU: c, GPU: g, accelerator_type:<model>: 0.001}``; STRICT_SPREAD when enough
nodes can each hold a bundle, else SPREAD; ``--strategy`` forces one; ``--nodes``, the
node ID of each worker as the hub bound them, pins bundle i to node i with a label
selector on Ray's ``ray.io/node-id`` label, strategy PACK), starts one
``RankWorker`` actor per bundle and runs the command in each as a subprocess with

    RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TAU_WORKER_INDEX,
    MASTER_ADDR, MASTER_PORT, plus every TAU_* and CHECKPOINT_PATH of the driver.

Each worker line is printed as ``[rank R] line`` and reaches the job log through Ray's
log forwarding. Exit status: 0 when every rank exits 0; otherwise the first failing
rank's exit code (1 when it died without one, e.g. its node died; 2 when the placement
group cannot be reserved in ``--pg-timeout``), after stopping the other ranks. A worker
subprocess dies with its actor (``PR_SET_PDEATHSIG``), so nothing outlives the job.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taugrid.lifecycle import node_ids
from taugrid.record import jobenv

__all__ = ["LaunchConfig", "RankWorker", "bundle", "main", "parse_args", "worker_env"]

_PASSTHROUGH = (jobenv.CHECKPOINT_PATH,)
_NODE_ID_LABEL = "ray.io/node-id"  # render.command.NODE_ID_LABEL (this runs inside the job)
_PR_SET_PDEATHSIG = 1
_STRATEGIES = ("auto", "STRICT_SPREAD", "SPREAD", "PACK", "STRICT_PACK")


@dataclass(frozen=True)
class LaunchConfig:
    """What to launch, parsed from the command line."""

    workers: int
    gpus_per_worker: float
    cpus_per_worker: float
    accelerator: str | None
    strategy: str
    pg_timeout_s: float
    command: tuple[str, ...]
    nodes: tuple[str, ...] = ()


def parse_args(argv: Sequence[str] | None = None) -> LaunchConfig:
    """Parse ``--workers ... -- command args``; exits 2 with usage on bad input."""
    p = argparse.ArgumentParser(prog="python -m taugrid.backends.programs.launch")
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--gpus-per-worker", type=float, default=0.0)
    p.add_argument("--cpus-per-worker", type=float, default=1.0)
    p.add_argument("--accelerator", default=None, help="GPU model, e.g. A100-80G")
    p.add_argument("--strategy", default="auto", choices=_STRATEGIES)
    p.add_argument("--pg-timeout", type=float, default=300.0, dest="pg_timeout_s")
    p.add_argument("--nodes", default="", help="node ID of each worker, comma-separated")
    p.add_argument("command", nargs=argparse.REMAINDER)
    ns = p.parse_args(argv)
    command = list(ns.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        p.error("give the command to run after '--'")
    if ns.workers < 1:
        p.error("--workers must be at least 1")
    nodes = tuple(n for n in ns.nodes.split(",") if n)
    if nodes and len(nodes) != ns.workers:
        p.error(f"--nodes names {len(nodes)} nodes for {ns.workers} workers")
    return LaunchConfig(
        workers=ns.workers,
        gpus_per_worker=ns.gpus_per_worker,
        cpus_per_worker=ns.cpus_per_worker,
        accelerator=ns.accelerator,
        strategy=ns.strategy,
        pg_timeout_s=ns.pg_timeout_s,
        command=tuple(command),
        nodes=nodes,
    )


def bundle(cfg: LaunchConfig) -> dict[str, float]:
    """One worker's placement-group bundle."""
    out: dict[str, float] = {"CPU": cfg.cpus_per_worker}
    if cfg.gpus_per_worker:
        out["GPU"] = cfg.gpus_per_worker
    if cfg.accelerator:
        # 0.001: fits both conventions (1 unit per node, or 1 unit per GPU).
        out[f"accelerator_type:{cfg.accelerator}"] = 0.001
    return out


def worker_env(
    rank: int, world: int, local_rank: int, local_world: int, master: tuple[str, int]
) -> dict[str, str]:
    """The rendezvous variables of one rank, plus the driver's TAU_* passthrough."""
    env = {k: v for k, v in os.environ.items() if k.startswith("TAU_") or k in _PASSTHROUGH}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(local_rank),
        LOCAL_WORLD_SIZE=str(local_world),
        TAU_WORKER_INDEX=str(rank),
        MASTER_ADDR=master[0],
        MASTER_PORT=str(master[1]),
    )
    return env


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: SIGKILL it when the actor process dies.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class RankWorker:
    """Actor body: runs one rank's subprocess; ``stop`` may be called concurrently."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def where(self) -> tuple[str, str, int]:
        """(node id, node IP, a free TCP port on it) of this actor."""
        import ray

        ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        with socket.socket() as s:
            s.bind((ip, 0))
            port = int(s.getsockname()[1])
        return ray.get_runtime_context().get_node_id(), ip, port

    def run(self, command: list[str], env: dict[str, str], rank: int) -> int:
        """Run the command to completion, echoing ``[rank R]``-prefixed output."""
        with self._lock:
            self._proc = subprocess.Popen(
                command,
                env={**os.environ, **env},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                preexec_fn=_die_with_parent,
            )
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            print(f"[rank {rank}] {line}", end="", flush=True)
        return self._proc.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        """Terminate the subprocess (SIGTERM, SIGKILL after ``grace_s``)."""
        with self._lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def _strategy(cfg: LaunchConfig, need: dict[str, float]) -> str:
    import ray

    if cfg.strategy != "auto":
        return cfg.strategy
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    fits = len(
        [
            n
            for n in nodes
            if n.get("Alive") and all(n["Resources"].get(k, 0) >= v for k, v in need.items())
        ]
    )
    return "STRICT_SPREAD" if fits >= cfg.workers else "SPREAD"


def _start_workers(cfg: LaunchConfig, pg: Any) -> list[Any]:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    need = bundle(cfg)
    extra = {k: v for k, v in need.items() if k not in ("CPU", "GPU")}
    cls = ray.remote(RankWorker)
    return [
        cls.options(
            num_cpus=cfg.cpus_per_worker,
            num_gpus=cfg.gpus_per_worker,
            resources=extra,
            max_concurrency=2,  # run() blocks; stop() must still get in
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=i
            ),
        ).remote()
        for i in range(cfg.workers)
    ]


def _envs(places: list[tuple[str, str, int]]) -> list[dict[str, str]]:
    by_node: dict[str, list[int]] = {}
    for rank, (node_id, _, _) in enumerate(places):
        by_node.setdefault(node_id, []).append(rank)
    master = (places[0][1], places[0][2])
    return [
        worker_env(rank, len(places), by_node[nid].index(rank), len(by_node[nid]), master)
        for rank, (nid, _, _) in enumerate(places)
    ]


def _wait(refs: dict[Any, int], actors: list[Any]) -> int:
    """Wait for every rank; on the first failure stop the rest and return its code."""
    import ray

    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        rank = refs[done[0]]
        try:
            code = int(ray.get(done[0]))
            why = f"exit code {code}"
        except Exception as exc:  # ActorDiedError, NodeDiedError, ... (node or actor died)
            code, why = 1, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        if code != 0:
            _log(f"rank {rank} failed ({why}); stopping the other ranks")
            for other in (r for r in refs.values() if r != rank):
                actors[other].stop.remote()
            ray.wait([actors[r].stop.remote() for r in refs.values() if r != rank], timeout=10)
            return code if 0 < code < 256 else 1
    return 0


def _log(msg: str) -> None:
    print(f"taugrid.launch: {msg}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    cfg = parse_args(argv)
    # Ray's driver folds lines that differ only in numbers ("[rank 0] up", "[rank 1]
    # up") into one "[repeated 2x]"; every rank's line must reach the job log.
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    ray.init(log_to_driver=True)
    need = bundle(cfg)
    strategy = "PACK" if cfg.nodes else _strategy(cfg, need)
    pinned = [{_NODE_ID_LABEL: n} for n in cfg.nodes] or None
    pg = placement_group([need] * cfg.workers, strategy=strategy, bundle_label_selector=pinned)
    try:
        ray.get(pg.ready(), timeout=cfg.pg_timeout_s)
    except ray.exceptions.GetTimeoutError:
        on = f" on nodes {', '.join(node_ids.short(n) for n in cfg.nodes)}" if cfg.nodes else ""
        _log(f"{cfg.workers} x {need} ({strategy}){on} not placeable in {cfg.pg_timeout_s:.0f}s")
        remove_placement_group(pg)
        return 2
    _log(f"{cfg.workers} workers x {need} placed ({strategy})")
    actors = _start_workers(cfg, pg)
    try:
        places = ray.get([a.where.remote() for a in actors])
        for rank, (node_id, ip, _) in enumerate(places):
            _log(f"rank {rank} on node {node_ids.short(node_id)} ({ip})")
        envs = _envs(places)
        refs = {a.run.remote(list(cfg.command), envs[i], i): i for i, a in enumerate(actors)}
        code = _wait(refs, actors)
    finally:
        for a in actors:
            ray.kill(a)
        remove_placement_group(pg)
    _log("all ranks succeeded" if code == 0 else f"failed with exit code {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())

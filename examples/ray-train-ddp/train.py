"""Data-parallel (DDP-style) training on Ray with CPU workers and no torch, as a TauGrid run.

Two launchers run the same ``train_loop`` on ``--workers`` processes:

- ``ray-train``: Ray Train's ``DataParallelTrainer`` (v2 API, the default in Ray 2.60).
  Torch is not needed: the trainer's default backend only forms the worker group. It
  needs the ``ray[train]`` extras (fsspec, pandas, pyarrow).
- ``actors``: one plain Ray actor per rank. Used by ``--backend auto`` when ``ray.train``
  cannot be imported (the script says so), e.g. with only ``ray[default]`` installed.

The model is the quickstart's numpy MLP (``examples/quickstart/train.py``, loaded from
there). Each rank computes gradients on its shard of the digits training set; the
gradients are averaged (allreduce) before every update, so all ranks hold identical
weights. The allreduce goes through ``Rendezvous``, a small asyncio Ray actor:
``ray.train.collective`` only offers ``broadcast_from_rank_zero``/``barrier`` for small
objects, and ``ray.util.collective``'s CPU backend (gloo) needs torch.

TauGrid in-job API: rank 0 logs metrics (``tau.log`` is a no-op on other ranks), every
rank writes heartbeats, ``tau.checkpoint`` commits on rank 0 only, all ranks resume from
the checkpoint rank 0 found with ``tau.latest_checkpoint()``, and rank 0 saves
``model.npz``/``metrics.json`` as artifacts. Workers are separate processes, so the
driver forwards the run's ``TAU_*``/``CHECKPOINT_PATH`` variables to them (inside a
TauGrid Ray job they are set job-wide already; this keeps hand runs working).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray

import taugrid as tau

QUICKSTART = Path(__file__).resolve().parent.parent / "quickstart" / "train.py"  # working_dir: ..
BATCH_PER_WORKER = 64


def load_quickstart() -> Any:
    """The quickstart module: model, data and optimizer shared with this example."""
    spec = importlib.util.spec_from_file_location("tau_quickstart_model", QUICKSTART)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@ray.remote(num_cpus=0)
class Rendezvous:
    """Gathers one value per rank under a key; every rank gets all values in rank order."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.rounds: dict[str, dict[str, Any]] = {}

    async def gather(self, key: str, rank: int, value: Any) -> list[Any]:
        slot = self.rounds.setdefault(key, {"values": {}, "served": 0, "done": asyncio.Event()})
        slot["values"][rank] = value
        if len(slot["values"]) == self.world_size:
            slot["done"].set()
        await slot["done"].wait()
        slot["served"] += 1
        if slot["served"] == self.world_size:
            del self.rounds[key]
        return [slot["values"][r] for r in range(self.world_size)]


class Collective:
    """What a rank needs from its peers: allreduce, broadcast and progress reports."""

    def __init__(self, rank: int, world_size: int, rendezvous: Any, ray_train: bool) -> None:
        self.rank, self.world_size = rank, world_size
        self.rendezvous, self.ray_train = rendezvous, ray_train

    def allreduce_mean(self, key: str, vector: np.ndarray) -> np.ndarray:
        parts = ray.get(self.rendezvous.gather.remote(key, self.rank, vector))
        return np.mean(parts, axis=0)

    def broadcast_from_rank_zero(self, key: str, value: Any) -> Any:
        if self.ray_train:
            from ray.train.collective import broadcast_from_rank_zero

            return broadcast_from_rank_zero(value)
        return ray.get(self.rendezvous.gather.remote(key, self.rank, value))[0]

    def report(self, metrics: dict[str, float]) -> None:
        if self.ray_train:  # every rank must call it the same number of times
            import ray.train

            ray.train.report(metrics)


def flatten(grads: dict[str, np.ndarray], names: tuple[str, ...]) -> np.ndarray:
    return np.concatenate([grads[k].ravel() for k in names])


def unflatten(
    vector: np.ndarray, like: dict[str, np.ndarray], names: tuple[str, ...]
) -> dict[str, np.ndarray]:
    out, offset = {}, 0
    for k in names:
        out[k] = vector[offset : offset + like[k].size].reshape(like[k].shape)
        offset += like[k].size
    return out


def resume(coll: Collective, state: dict[str, np.ndarray]) -> int:
    """Every rank loads the checkpoint rank 0 picked; returns its step (0: fresh start)."""
    picked = None
    if coll.rank == 0:
        ckpt = tau.latest_checkpoint()
        picked = None if ckpt is None else str(ckpt)
    picked = coll.broadcast_from_rank_zero("resume", picked)  # a short path: < 1 kB
    if picked is None:
        return 0
    with np.load(Path(picked) / "state.npz") as saved:
        state.update({k: saved[k] for k in saved.files})
    if coll.rank == 0:
        print(f"attempt {tau.attempt()}: resuming from {picked}", flush=True)
    return tau.checkpoint_info(picked).step


def train_loop(config: dict[str, Any], coll: Collective) -> None:
    """One rank's training: shard, resume, allreduce every step, checkpoint, finish."""
    os.environ.update(config["tau_env"])
    os.environ.update(RANK=str(coll.rank), WORLD_SIZE=str(coll.world_size))
    qs = load_quickstart()
    x_tr, x_va, y_tr, y_va = qs.load_data(config["seed"])
    x_shard, y_shard = x_tr[coll.rank :: coll.world_size], y_tr[coll.rank :: coll.world_size]
    state = qs.init_state(config["seed"], x_tr.shape[1], 10)  # same seed: same weights
    start = resume(coll, state)
    tau.log({"shard_examples": float(len(y_shard))}, step=start, all_ranks=True)
    for step in range(start + 1, config["steps"] + 1):
        rng = np.random.default_rng((config["seed"], step, coll.rank))
        idx = rng.choice(len(y_shard), size=BATCH_PER_WORKER, replace=False)
        loss, acc, grads = qs.gradients(state, x_shard[idx], y_shard[idx])
        mean = coll.allreduce_mean(f"grad-{step}", flatten(grads, qs.PARAMS))
        qs.apply(state, unflatten(mean, state, qs.PARAMS))
        tau.log({"loss": loss, "train_accuracy": acc}, step=step)  # rank 0 only
        if step % config["checkpoint_every"] == 0 or step == config["steps"]:
            val = qs.accuracy(state, x_va, y_va)
            tau.log({"val_accuracy": val}, step=step)
            with tau.checkpoint(step) as d:  # committed by rank 0 only
                np.savez(d / "state.npz", **state)
            tau.heartbeat(step)
            coll.report({"step": step, "loss": loss, "val_accuracy": val})
    tau.heartbeat(config["steps"])
    if coll.rank == 0:
        save_outputs(qs, state, {"val_accuracy": qs.accuracy(state, x_va, y_va)})


def save_outputs(qs: Any, state: dict[str, np.ndarray], summary: dict[str, float]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        np.savez(out / "model.npz", **{k: state[k] for k in qs.PARAMS})
        doc = {**summary, "workers": tau.world_size(), "attempt": tau.attempt()}
        (out / "metrics.json").write_text(json.dumps(doc, indent=2) + "\n")
        tau.save_artifact(out / "model.npz")
        tau.save_artifact(out / "metrics.json")


def ray_train_loop(config: dict[str, Any]) -> None:
    """Entry point of each Ray Train worker."""
    import ray.train

    ctx = ray.train.get_context()
    coll = Collective(ctx.get_world_rank(), ctx.get_world_size(), config["rendezvous"], True)
    train_loop(config, coll)


@ray.remote(num_cpus=1)
class TrainWorker:
    """One rank of the ``actors`` launcher."""

    def run(self, rank: int, world_size: int, config: dict[str, Any]) -> int:
        train_loop(config, Collective(rank, world_size, config["rendezvous"], False))
        return os.getpid()


def launch_ray_train(args: argparse.Namespace, config: dict[str, Any]) -> Any:
    import ray.train
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    trainer = DataParallelTrainer(
        ray_train_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(num_workers=args.workers, use_gpu=False),
        run_config=ray.train.RunConfig(
            name=f"tau-{tau.run_id()}-attempt-{tau.attempt()}",
            storage_path=str((tau.output_dir() / "logs" / "ray-train").resolve()),
            failure_config=ray.train.FailureConfig(max_failures=0),  # TauGrid retries
        ),
    )
    return trainer.fit().metrics


def launch_actors(args: argparse.Namespace, config: dict[str, Any]) -> Any:
    workers = [TrainWorker.remote() for _ in range(args.workers)]
    try:
        pids = ray.get([w.run.remote(r, args.workers, config) for r, w in enumerate(workers)])
    finally:
        for w in workers:
            ray.kill(w)
    return {"worker_pids": pids}


def pick_backend(requested: str) -> str:
    if requested != "auto":
        return requested
    try:
        import ray.train  # noqa: F401  (needs the ray[train] extras)
    except ImportError as exc:
        print(f"ray.train is not usable ({exc}); using the 'actors' launcher", flush=True)
        return "actors"
    return "ray-train"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=int(env("TRAIN_WORKERS", "2")))
    p.add_argument("--steps", type=int, default=int(env("TRAIN_STEPS", "200")))
    p.add_argument("--checkpoint-every", type=int, default=int(env("CHECKPOINT_EVERY", "50")))
    p.add_argument("--seed", type=int, default=int(env("SEED", "0")))
    p.add_argument("--backend", choices=("auto", "ray-train", "actors"), default="auto")
    p.add_argument("--ray-address", default=env("RAY_ADDRESS"), help="default: the job's")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not ray.is_initialized():
        ray.init(address=args.ray_address)
    backend = pick_backend(args.backend)
    rendezvous = Rendezvous.remote(args.workers)
    config = {
        "tau_env": {k: v for k, v in os.environ.items() if k.startswith("TAU_")},
        "rendezvous": rendezvous,
        "seed": args.seed,
        "steps": args.steps,
        "checkpoint_every": args.checkpoint_every,
    }
    if os.environ.get("CHECKPOINT_PATH"):
        config["tau_env"]["CHECKPOINT_PATH"] = os.environ["CHECKPOINT_PATH"]
    t0 = time.perf_counter()
    launch = launch_ray_train if backend == "ray-train" else launch_actors
    try:
        result = launch(args, config)
    finally:
        ray.kill(rendezvous)
    wall = round(time.perf_counter() - t0, 2)
    print(json.dumps({"backend": backend, "result": result, "wall_s": wall}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

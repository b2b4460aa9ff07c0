"""Quickstart: a one-hidden-layer MLP in numpy on scikit-learn's digits, as a TauGrid run.

What it shows of the in-job API (``import taugrid as tau``):

- ``tau.log`` of loss and accuracy every step (the portal's loss curve);
- ``tau.checkpoint`` every ``--checkpoint-every`` steps (weights, optimizer state, step);
- resume from ``tau.latest_checkpoint()``: a retried attempt continues from the last
  checkpoint instead of step 0;
- ``tau.preemption_notice()``: warned that it will be stopped (a spot reclaim), it
  checkpoints at once and waits; the run goes on elsewhere from that step;
- ``tau.save_artifact`` of ``model.npz`` and ``metrics.json`` at the end.

Knobs for recovery tests: ``--fail-at-step K`` makes the first ``--fail-attempts``
attempts die (exit 3) or hang right after step K (printing ``--fail-message`` first, to
emulate a device error in the log); ``--step-sleep S`` slows every step so a node can
be killed mid-run. Every flag also reads an environment variable
(``TRAIN_STEPS``, ``CHECKPOINT_EVERY``, ``FAIL_AT_STEP``, ``FAIL_ATTEMPTS``,
``FAIL_MODE``, ``FAIL_MESSAGE``, ``STEP_SLEEP``, ``SEED``).

The data split, initialisation and every minibatch are functions of the seed and the
step, so a resumed run trains on exactly the batches the uninterrupted run would have.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import taugrid as tau

HIDDEN = 64
BATCH = 128
LR = 0.1
MOMENTUM = 0.9
PARAMS = ("w1", "b1", "w2", "b2")

Arrays = dict[str, np.ndarray]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=int(env("TRAIN_STEPS", "300")))
    p.add_argument("--checkpoint-every", type=int, default=int(env("CHECKPOINT_EVERY", "50")))
    p.add_argument("--fail-at-step", type=int, default=int(env("FAIL_AT_STEP", "0")))
    p.add_argument("--fail-attempts", type=int, default=int(env("FAIL_ATTEMPTS", "1")))
    p.add_argument("--fail-mode", choices=("exit", "hang"), default=env("FAIL_MODE", "exit"))
    p.add_argument("--fail-message", default=env("FAIL_MESSAGE", ""))
    p.add_argument("--step-sleep", type=float, default=float(env("STEP_SLEEP", "0")))
    p.add_argument("--seed", type=int, default=int(env("SEED", "0")))
    p.add_argument("--lr", type=float, default=LR, help="learning rate (sweep.yaml varies it)")
    return p.parse_args(argv)


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float64)  # pixel values are 0..16
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return x_tr, x_va, y_tr, y_va


def init_state(seed: int, n_in: int, n_out: int) -> Arrays:
    rng = np.random.default_rng(seed)
    state: Arrays = {
        "w1": rng.normal(0, np.sqrt(2.0 / n_in), (n_in, HIDDEN)),
        "b1": np.zeros(HIDDEN),
        "w2": rng.normal(0, np.sqrt(1.0 / HIDDEN), (HIDDEN, n_out)),
        "b2": np.zeros(n_out),
    }
    state.update({f"v_{k}": np.zeros_like(state[k]) for k in PARAMS})
    return state


def forward(state: Arrays, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hidden = np.maximum(x @ state["w1"] + state["b1"], 0.0)
    logits = hidden @ state["w2"] + state["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    return hidden, probs


def gradients(state: Arrays, x: np.ndarray, y: np.ndarray) -> tuple[float, float, Arrays]:
    """Cross-entropy loss, accuracy and parameter gradients on one batch."""
    hidden, probs = forward(state, x)
    n = len(y)
    loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())
    acc = float((probs.argmax(axis=1) == y).mean())
    d_logits = probs.copy()
    d_logits[np.arange(n), y] -= 1.0
    d_logits /= n
    d_hidden = (d_logits @ state["w2"].T) * (hidden > 0)
    grads = {
        "w2": hidden.T @ d_logits,
        "b2": d_logits.sum(axis=0),
        "w1": x.T @ d_hidden,
        "b1": d_hidden.sum(axis=0),
    }
    return loss, acc, grads


def apply(state: Arrays, grads: Arrays, lr: float = LR) -> None:
    """SGD with momentum, in place."""
    for k in PARAMS:
        state[f"v_{k}"] = MOMENTUM * state[f"v_{k}"] - lr * grads[k]
        state[k] = state[k] + state[f"v_{k}"]


def batch_for(step: int, seed: int, n: int) -> np.ndarray:
    return np.random.default_rng((seed, step)).choice(n, size=min(BATCH, n), replace=False)


def accuracy(state: Arrays, x: np.ndarray, y: np.ndarray) -> float:
    return float((forward(state, x)[1].argmax(axis=1) == y).mean())


def restore(state: Arrays) -> int:
    """Load the latest complete checkpoint into ``state``; returns its step (0 if none)."""
    ckpt = tau.latest_checkpoint()
    if ckpt is None:
        return 0
    info = tau.checkpoint_info(ckpt)
    with np.load(ckpt / "state.npz") as saved:
        state.update({k: saved[k] for k in saved.files})
    print(f"attempt {tau.attempt()}: resuming from {ckpt.name} (step {info.step})", flush=True)
    return info.step


def maybe_fail(args: argparse.Namespace, step: int) -> None:
    if args.fail_at_step != step or tau.attempt() > args.fail_attempts:
        return
    print(f"attempt {tau.attempt()}: failing at step {step} ({args.fail_mode})", flush=True)
    if args.fail_message:
        print(args.fail_message, file=sys.stderr, flush=True)
    if args.fail_mode == "hang":
        while True:
            time.sleep(3600)
    os._exit(3)  # like a crash: no cleanup, no final checkpoint


def train(args: argparse.Namespace) -> tuple[dict[str, float], Arrays]:
    x_tr, x_va, y_tr, y_va = load_data(args.seed)
    state = init_state(args.seed, x_tr.shape[1], 10)
    start = restore(state)
    loss = float("nan")
    for step in range(start + 1, args.steps + 1):
        idx = batch_for(step, args.seed, len(y_tr))
        loss, batch_acc, grads = gradients(state, x_tr[idx], y_tr[idx])
        apply(state, grads, args.lr)
        val_acc = accuracy(state, x_va, y_va)
        tau.log({"loss": loss, "train_accuracy": batch_acc, "val_accuracy": val_acc}, step=step)
        notice = tau.preemption_notice()  # e.g. its spot node is being reclaimed
        if step % args.checkpoint_every == 0 or step == args.steps or notice:
            with tau.checkpoint(step) as d:
                np.savez(d / "state.npz", **state)
        if notice:  # saved: wait to be stopped (exiting now would end the run as done)
            time.sleep(notice.seconds_left + 600)
        maybe_fail(args, step)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
    return {
        "val_accuracy": accuracy(state, x_va, y_va),
        "train_accuracy": accuracy(state, x_tr, y_tr),
        "final_loss": loss,
        "steps": float(args.steps),
        "resumed_from_step": float(start),
    }, state


def save_outputs(summary: dict[str, float], state: Arrays) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.npz"
        np.savez(model, **{k: state[k] for k in PARAMS})
        metrics = Path(tmp) / "metrics.json"
        metrics.write_text(json.dumps({**summary, "attempt": tau.attempt()}, indent=2) + "\n")
        tau.save_artifact(model)
        tau.save_artifact(metrics)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    summary, state = train(args)
    summary["wall_s"] = round(time.perf_counter() - t0, 3)
    save_outputs(summary, state)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Single-controller RL on a tiny numpy policy: one driver owns the loop; roles are Ray actors.

Roles (resources and restart policies in tau.yaml ``roles``):

- ``actor`` (rollout): samples actions of a softmax policy for a batch of contexts;
- ``reference``: the frozen initial policy; log-probs of the sampled actions (KL term);
- ``reward``: scores each (context, action) — 1 when the action is the best arm of a
  hidden linear model, else 0;
- ``critic``: a linear value baseline of the context, fitted to the rewards.

The driver holds the authoritative state (policy and critic weights, step, RNG) and
sends the weights with each call, so a role actor that dies and is restarted by Ray
(``max_restarts``) loses nothing: the call is retried on the new actor
(``max_task_retries``). It checkpoints every ``--checkpoint-every`` steps through
``tau.checkpoint`` and resumes from ``tau.latest_checkpoint()``.

Fault injection (for tests and demos): ``--kill-role ROLE --kill-at-step N`` kills that
role's actor with ``ray.kill`` (Ray restarts it) before step N; ``--fail-at-step N``
exits 1 at step N in the first attempt (the platform retries and the retry resumes).

    python driver.py [--steps 40] [--batch 64] [--checkpoint-every 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import ray

import taugrid as tau
from taugrid.sdk.job import roles

ARMS, DIM, BETA, LR = 4, 6, 0.02, 0.5


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


class Rollout:
    def __init__(self) -> None:
        self.pid = os.getpid()

    def generate(self, theta: np.ndarray, contexts: np.ndarray, seed: int) -> np.ndarray:
        probs = _softmax(contexts @ theta)
        rng = np.random.default_rng(seed)
        return np.array([rng.choice(ARMS, p=p) for p in probs])

    def info(self) -> int:
        return self.pid


class Reference:
    def __init__(self, theta0: np.ndarray) -> None:
        self.theta0, self.pid = theta0, os.getpid()

    def logp(self, contexts: np.ndarray, actions: np.ndarray) -> np.ndarray:
        probs = _softmax(contexts @ self.theta0)
        return np.log(probs[np.arange(len(actions)), actions])

    def info(self) -> int:
        return self.pid


class Reward:
    def __init__(self) -> None:
        self.w = np.random.default_rng(1234).normal(size=(DIM, ARMS))  # the hidden model
        self.pid = os.getpid()

    def score(self, contexts: np.ndarray, actions: np.ndarray) -> np.ndarray:
        best = (contexts @ self.w).argmax(axis=1)
        return (best == actions).astype(float)

    def info(self) -> int:
        return self.pid


class Critic:
    def __init__(self) -> None:
        self.pid = os.getpid()

    def value(self, v: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        return contexts @ v

    def fit(self, v: np.ndarray, contexts: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        grad = contexts.T @ (contexts @ v - rewards) / len(rewards)
        return v - 0.5 * grad

    def info(self) -> int:
        return self.pid


def _start(cls: type, role: str, *args: object) -> object:
    return ray.remote(cls).options(**roles.actor_options(role)).remote(*args)


def _state(start_step: int) -> dict[str, object]:
    found = tau.latest_checkpoint()
    if found is None:
        theta = np.random.default_rng(0).normal(scale=0.01, size=(DIM, ARMS))
        return {"step": 0, "theta": theta, "theta0": theta.copy(), "v": np.zeros(DIM)}
    with np.load(found / "state.npz") as s:
        print(f"resumed from {found.name} (step {int(s['step'])})", flush=True)
        return {k: (int(s[k]) if k == "step" else s[k].copy()) for k in s.files}


def _step(a: dict[str, object], state: dict[str, object], step: int, batch: int) -> float:
    rng = np.random.default_rng(10_000 + step)
    x = rng.normal(size=(batch, DIM))
    theta, v = state["theta"], state["v"]
    actions = ray.get(a["actor"].generate.remote(theta, x, step))  # type: ignore[attr-defined]
    rewards_ref = a["reward"].score.remote(x, actions)  # type: ignore[attr-defined]
    ref_ref = a["reference"].logp.remote(x, actions)  # type: ignore[attr-defined]
    value_ref = a["critic"].value.remote(v, x)  # type: ignore[attr-defined]
    rewards, logp_ref, values = ray.get([rewards_ref, ref_ref, value_ref])
    probs = _softmax(x @ theta)  # type: ignore[operator]
    logp = np.log(probs[np.arange(batch), actions])
    advantage = rewards - BETA * (logp - logp_ref) - values
    onehot = np.eye(ARMS)[actions]
    grad = x.T @ ((onehot - probs) * advantage[:, None]) / batch
    state["theta"] = theta + LR * grad  # type: ignore[operator]
    state["v"] = ray.get(a["critic"].fit.remote(v, x, rewards))  # type: ignore[attr-defined]
    return float(rewards.mean())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--kill-role", default=None)
    p.add_argument("--kill-at-step", type=int, default=-1)
    p.add_argument("--fail-at-step", type=int, default=-1)
    args = p.parse_args(argv)
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
    state = _state(0)
    a = {
        "actor": _start(Rollout, "actor"),
        "reference": _start(Reference, "reference", state["theta0"]),
        "reward": _start(Reward, "reward"),
        "critic": _start(Critic, "critic"),
    }
    pids = {k: ray.get(h.info.remote()) for k, h in a.items()}  # type: ignore[attr-defined]
    recent: list[float] = []
    for step in range(int(state["step"]) + 1, args.steps + 1):  # type: ignore[call-overload]
        if step == args.kill_at_step and args.kill_role:
            ray.kill(a[args.kill_role], no_restart=False)
            print(f"killed role {args.kill_role} (pid {pids[args.kill_role]}) at step {step}")
        reward = _step(a, state, step, args.batch)
        recent = [*recent, reward][-10:]
        tau.log({"reward": reward}, step=step)
        state["step"] = step
        if step % args.checkpoint_every == 0:
            with tau.checkpoint(step=step) as d:
                np.savez(d / "state.npz", **state)  # type: ignore[arg-type]
        if step == args.fail_at_step and tau.attempt() == 1:
            print(f"failing on purpose at step {step}", flush=True)
            return 1
    after = {k: ray.get(h.info.remote()) for k, h in a.items()}  # type: ignore[attr-defined]
    summary = {
        "steps": args.steps,
        "reward_last10": sum(recent) / len(recent),
        "restarted_roles": sorted(k for k in pids if pids[k] != after[k]),
        "attempt": tau.attempt(),
    }
    with open("summary.json", "w") as f:
        json.dump(summary, f)
    tau.save_artifact("summary.json")
    print(f"done: {json.dumps(summary)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""AKS GPU quickstart: the digits MLP in torch on the GPU, or numpy where torch is absent.

On the documented AKS image (``tau.yaml``: Ray 2.56, CUDA 13, ``pip: torch>=2.4.0``)
this trains with torch on ``cuda`` (or the CPU if the node has no GPU). Without torch
(a laptop, CI) it says so and runs the numpy quickstart (``examples/quickstart``)
instead, so the example always runs end to end.

Both paths use the in-job API the same way: ``tau.log`` every step, ``tau.checkpoint``
every ``--checkpoint-every`` steps, resume from ``tau.latest_checkpoint()``, and
``model`` + ``metrics.json`` saved with ``tau.save_artifact``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import taugrid as tau

QUICKSTART = Path(__file__).resolve().parent.parent / "quickstart" / "train.py"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=int(env("TRAIN_STEPS", "300")))
    p.add_argument("--checkpoint-every", type=int, default=int(env("CHECKPOINT_EVERY", "50")))
    p.add_argument("--seed", type=int, default=int(env("SEED", "0")))
    return p.parse_args(argv)


def numpy_fallback(args: argparse.Namespace) -> int:
    spec = importlib.util.spec_from_file_location("tau_quickstart", QUICKSTART)
    assert spec is not None and spec.loader is not None
    quickstart = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quickstart)
    argv = ["--steps", str(args.steps), "--checkpoint-every", str(args.checkpoint_every)]
    return int(quickstart.main([*argv, "--seed", str(args.seed)]))


def load_digits_tensors(torch: Any, seed: int, device: Any) -> tuple[Any, ...]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    parts = train_test_split(x / 16.0, y, test_size=0.2, random_state=seed, stratify=y)
    x_tr, x_va, y_tr, y_va = parts
    as_x = lambda a: torch.tensor(a, dtype=torch.float32, device=device)  # noqa: E731
    as_y = lambda a: torch.tensor(a, dtype=torch.long, device=device)  # noqa: E731
    return as_x(x_tr), as_x(x_va), as_y(y_tr), as_y(y_va)


def torch_restore(torch: Any, model: Any, opt: Any) -> int:
    ckpt = tau.latest_checkpoint()
    if ckpt is None:
        return 0
    saved = torch.load(ckpt / "state.pt", map_location="cpu")
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    print(f"attempt {tau.attempt()}: resuming from {ckpt.name}", flush=True)
    return int(tau.checkpoint_info(ckpt).step)


def torch_train(torch: Any, args: argparse.Namespace) -> int:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"torch {torch.__version__} on {device}", flush=True)
    torch.manual_seed(args.seed)
    x_tr, x_va, y_tr, y_va = load_digits_tensors(torch, args.seed, device)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start, t0, val = torch_restore(torch, model, opt), time.perf_counter(), float("nan")
    for step in range(start + 1, args.steps + 1):
        gen = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        idx = torch.randperm(len(y_tr), generator=gen)[:128].to(device)
        loss = nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            val = (model(x_va).argmax(1) == y_va).float().mean().item()
        tau.log({"loss": loss.item(), "val_accuracy": val}, step=step)
        if step % args.checkpoint_every == 0 or step == args.steps:
            with tau.checkpoint(step) as d:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, d / "state.pt")
    summary = {"val_accuracy": val, "device": str(device), "wall_s": time.perf_counter() - t0}
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(model.state_dict(), Path(tmp) / "model.pt")
        (Path(tmp) / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
        tau.save_artifact(Path(tmp) / "model.pt")
        tau.save_artifact(Path(tmp) / "metrics.json")
    print(json.dumps(summary), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch is not installed: running the numpy version of this example", flush=True)
        return numpy_fallback(args)
    return torch_train(torch, args)


if __name__ == "__main__":
    sys.exit(main())

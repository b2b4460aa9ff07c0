"""Stages of the multimodal example: decode → resize → embed (emulated GPU) → filter → write.

Synthetic data, no download. Each stage takes a list of items (dicts) and returns the
items that go on. Costs are fixed and documented so that the example measures the
same on any machine (they are sleeps, not CPU work, so a loaded laptop does not change
them):

- ``decode``: 2 ms + 1 ms per 10,000 pixels per item. The data mix (``MM_MIX``) sets
  the image sizes: ``small`` 64-128 px a side (about 3 ms per item), ``large``
  256-512 px (about 17 ms per item), ``shift`` small for the first half, large after.
  Every item whose id is 13 mod 97 is "corrupt": decode raises on it (dead letter).
- ``resize``: 2 ms per item, to 32x32 (nearest neighbour).
- ``embed``: the emulated GPU stage, 100 ms per batch + 2 ms per item (a model call
  pays a fixed launch cost, so batches pay off); a 16-number embedding.
- ``filter``: keeps items whose embedding's first number is at least its median (about
  half), 0.2 ms per item.
- ``write``: appends one JSON line per item to ``$TAU_OUTPUT_DIR/embeddings/``.

``MM_ITEMS`` sets how many items the source gives (default 1,200).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

Item = dict[str, Any]
_SIDES = {"small": (64, 128), "large": (256, 512)}


def _mix(index: int, total: int) -> str:
    mix = os.environ.get("MM_MIX", "small")
    if mix == "shift":
        return "small" if index < total // 2 else "large"
    return mix


def source() -> list[Item]:
    total = int(os.environ.get("MM_ITEMS", "1200"))
    rng = np.random.default_rng(0)
    items = []
    for i in range(total):
        low, high = _SIDES[_mix(i, total)]
        h, w = int(rng.integers(low, high)), int(rng.integers(low, high))
        items.append({"id": i, "h": h, "w": w})
    return items


def decode(items: list[Item]) -> list[Item]:
    out = []
    for item in items:
        pixels = item["h"] * item["w"]
        time.sleep(0.002 + 1e-3 * pixels / 10_000)
        if item["id"] % 97 == 13:
            raise ValueError(f"corrupt image {item['id']}")
        rng = np.random.default_rng(item["id"])
        image = rng.integers(0, 256, size=(item["h"], item["w"], 3), dtype=np.uint8)
        out.append({"id": item["id"], "image": image})
    return out


def resize(items: list[Item]) -> list[Item]:
    time.sleep(2e-3 * len(items))
    out = []
    for item in items:
        image = item["image"]
        rows = np.linspace(0, image.shape[0] - 1, 32).astype(int)
        cols = np.linspace(0, image.shape[1] - 1, 32).astype(int)
        out.append({"id": item["id"], "image": image[rows][:, cols]})
    return out


def embed(items: list[Item]) -> list[Item]:
    time.sleep(0.100 + 2e-3 * len(items))
    out = []
    for item in items:
        pixels = item["image"].astype(np.float32) / 255.0
        vector = pixels.reshape(16, -1).mean(axis=1)
        out.append({"id": item["id"], "embedding": vector})
    return out


def filter(items: list[Item]) -> list[Item]:
    time.sleep(0.2e-3 * len(items))
    return [i for i in items if float(i["embedding"][0]) >= 0.5]


def write(items: list[Item]) -> list[Item]:
    root = Path(os.environ.get("TAU_OUTPUT_DIR", ".tau-local")) / "embeddings"
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"part-{os.getpid()}.jsonl").open("a") as f:
        for item in items:
            vector = [float(x) for x in item["embedding"]]
            f.write(json.dumps({"id": int(item["id"]), "embedding": vector}) + "\n")
    return [{"id": item["id"]} for item in items]

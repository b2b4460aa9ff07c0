"""Serve the quickstart's digit classifier with Ray Serve (``tau serve deploy``).

``TAU_MODEL_PATH`` (set by TauGrid) is what ``tau serve deploy`` chose from the
training run: its ``artifacts/`` folder (default: ``model.npz`` inside), one artifact
file (``--artifact model.npz``) or a checkpoint folder (``--checkpoint latest``:
``state.npz`` inside). Run by hand: ``TAU_MODEL_PATH=... serve run serve_app:app``.

Request: ``POST /digits`` with JSON ``{"pixels": [64 numbers 0..16]}`` (one 8x8 image,
row by row, as in scikit-learn's digits) or ``{"pixels": [[...], [...]]}`` (a batch).
Answer: ``{"class": 3, "probability": 0.98}``, or ``{"classes": [...]}`` for a batch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve
from starlette import requests, responses

PARAMS = ("w1", "b1", "w2", "b2")


def load_weights(path: Path) -> dict[str, np.ndarray]:
    """The MLP's weights from a .npz file or a folder holding model.npz / state.npz."""
    if path.is_dir():
        path = next((path / n for n in ("model.npz", "state.npz") if (path / n).is_file()), path)
    with np.load(path) as saved:
        return {k: saved[k] for k in PARAMS}


def predict(w: dict[str, np.ndarray], pixels: np.ndarray) -> np.ndarray:
    """Class probabilities for rows of 64 pixel values (0..16), as train.py's forward."""
    hidden = np.maximum((pixels / 16.0) @ w["w1"] + w["b1"], 0.0)
    logits = hidden @ w["w2"] + w["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    return probs / probs.sum(axis=1, keepdims=True)


@serve.deployment
class DigitClassifier:
    def __init__(self) -> None:
        self.weights = load_weights(Path(os.environ["TAU_MODEL_PATH"]))

    async def __call__(self, request: requests.Request) -> Any:
        try:
            body = await request.json()
            pixels = np.asarray(body["pixels"], dtype=np.float64)
            batch = pixels.reshape(-1, 64)
        except (ValueError, KeyError, TypeError) as exc:
            return responses.JSONResponse(
                {"error": f"expected JSON {{'pixels': [64 numbers]}}: {exc}"}, status_code=400
            )
        probs = predict(self.weights, batch)
        classes = probs.argmax(axis=1)
        if pixels.ndim == 1:
            return {"class": int(classes[0]), "probability": float(probs[0, classes[0]])}
        return {"classes": [int(c) for c in classes]}


app = DigitClassifier.bind()

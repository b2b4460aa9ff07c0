"""examples/quickstart and examples/aks-gpu-quickstart run as a TauGrid attempt would.

The scripts run as subprocesses with the platform's environment (TAU_OUTPUT_DIR,
TAU_RUN_ID, TAU_ATTEMPT, TAU_FENCING_TOKEN) pointing at a temporary run record.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from taugrid.spec.models import TauConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = EXAMPLES / "quickstart" / "train.py"


def _run(
    script: Path, record: Path, *args: str, attempt: int = 1
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TAU_OUTPUT_DIR": str(record),
        "TAU_RUN_ID": "r-quick",
        "TAU_ATTEMPT": str(attempt),
        "TAU_FENCING_TOKEN": str(attempt),
    }
    for var in ("CHECKPOINT_PATH", "RANK", "WORLD_SIZE", "TRAIN_STEPS", "FAIL_AT_STEP"):
        env.pop(var, None)
    return subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        cwd=record.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _metric_rows(record: Path) -> list[dict[str, Any]]:
    lines = (record / "metrics" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("example", ["quickstart", "ray-train-ddp", "aks-gpu-quickstart"])
def test_example_tau_yaml_is_valid(example: str) -> None:
    doc = yaml.safe_load((EXAMPLES / example / "tau.yaml").read_text())
    config = TauConfig.model_validate(doc)
    assert config.name == example and config.run.entrypoint.endswith("train.py")
    assert (EXAMPLES / example / "README.md").is_file()


def test_quickstart_trains_checkpoints_and_saves_artifacts(tmp_path: Path) -> None:
    record = tmp_path / "r-quick"
    proc = _run(QUICKSTART, record)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((record / "artifacts" / "metrics.json").read_text())
    assert summary["val_accuracy"] > 0.9 and summary["steps"] == 300
    rows = _metric_rows(record)
    assert {r["name"] for r in rows} == {"loss", "train_accuracy", "val_accuracy"}
    assert [r["step"] for r in rows if r["name"] == "loss"] == list(range(1, 301))
    ckpts = record / "checkpoints"
    assert (ckpts / "latest").read_text().strip() == "step-00000300"
    assert sorted(p.name for p in ckpts.glob("step-*")) == [
        f"step-{s:08d}" for s in (50, 100, 150, 200, 250, 300)
    ]
    assert all((p / "_CHECKPOINT.json").is_file() for p in ckpts.glob("step-*"))
    model = record / "artifacts" / "model.npz"
    with np.load(model) as weights:
        assert sorted(weights.files) == ["b1", "b2", "w1", "w2"]
    manifest = json.loads((record / "artifacts" / "MANIFEST.json").read_text())
    assert (
        manifest["artifacts"]["model.npz"]["sha256"]
        == hashlib.sha256(model.read_bytes()).hexdigest()
    )


def test_quickstart_resumes_after_a_crash(tmp_path: Path) -> None:
    record = tmp_path / "r-quick"
    args = ("--steps", "200", "--checkpoint-every", "50", "--fail-at-step", "120")
    crashed = _run(QUICKSTART, record, *args)
    assert crashed.returncode == 3, crashed.stderr
    assert (record / "checkpoints" / "latest").read_text().strip() == "step-00000100"
    assert max(r["step"] for r in _metric_rows(record)) == 120
    assert not (record / "artifacts" / "model.npz").exists()

    resumed = _run(QUICKSTART, record, *args, attempt=2)  # --fail-at-step only hits attempt 1
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from step-00000100" in resumed.stdout
    second = [r["step"] for r in _metric_rows(record) if r["attempt"] == 2 and r["name"] == "loss"]
    assert second == list(range(101, 201))  # continued, not restarted
    summary = json.loads((record / "artifacts" / "metrics.json").read_text())
    assert summary["resumed_from_step"] == 100 and summary["attempt"] == 2
    assert summary["val_accuracy"] > 0.9

    # Batches are a function of (seed, step) and the optimizer state is checkpointed,
    # so the resumed run ends with exactly the weights of an uninterrupted one.
    clean = tmp_path / "clean" / "r-quick"
    clean.parent.mkdir()
    assert _run(QUICKSTART, clean, "--steps", "200").returncode == 0
    with (
        np.load(record / "artifacts" / "model.npz") as a,
        np.load(clean / "artifacts" / "model.npz") as b,
    ):
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])


def test_quickstart_refuses_to_checkpoint_when_fenced(tmp_path: Path) -> None:
    record = tmp_path / "r-quick"
    record.mkdir()
    (record / "FENCE").write_text("2")  # attempt 1 (token 1) is already revoked
    proc = _run(QUICKSTART, record, "--steps", "60", "--checkpoint-every", "50")
    assert proc.returncode != 0
    assert "FencedError" in proc.stderr and "revoked" in proc.stderr
    assert not list((record / "checkpoints").glob("step-*"))


def test_aks_example_falls_back_to_numpy_without_torch(tmp_path: Path) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed: the fallback path is not taken")
    record = tmp_path / "r-quick"
    proc = _run(EXAMPLES / "aks-gpu-quickstart" / "train.py", record, "--steps", "150")
    assert proc.returncode == 0, proc.stderr
    assert "torch is not installed" in proc.stdout
    assert json.loads((record / "artifacts" / "metrics.json").read_text())["val_accuracy"] > 0.9

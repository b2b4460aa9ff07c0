"""Fixtures of the in-job SDK tests: a run record wired into the environment."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run record directory wired into the environment like the platform does."""
    out = tmp_path / "runs" / "r-1"
    monkeypatch.setenv("TAU_OUTPUT_DIR", str(out))
    monkeypatch.setenv("TAU_RUN_ID", "r-1")
    monkeypatch.setenv("TAU_ATTEMPT", "1")
    monkeypatch.setenv("TAU_FENCING_TOKEN", "1")
    for var in ("CHECKPOINT_PATH", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    return out

"""The pipeline driver's side of a move: it asks once the cluster's CPUs have capped it
for ``RELOCATE_AFTER`` windows (and again every ``RELOCATE_EVERY``), and a resumed
attempt starts after the last window the earlier one checkpointed, with its dead letters.
In-process, against a run record wired like the platform's (no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import taugrid as tau
from taugrid.elastic import controller, sizing
from taugrid.sdk.job import pipeline_job


def _capped() -> controller.Controller:
    decode = sizing.StageProfile("decode", sizing.CostModel(0.0, 0.05), cpus=1.0)
    resize = sizing.StageProfile("resize", sizing.CostModel(0.0, 0.05), cpus=1.0)
    return controller.Controller([decode, resize], 60, cpu_budget=3)  # wants 6 CPUs


def test_the_driver_asks_after_two_capped_windows_then_every_tenth(record: Path) -> None:
    control, ask = _capped(), record / "relocate.json"
    capped = pipeline_job._ask_to_move(control, 0)
    assert capped == 1 and not ask.exists()  # one window may be noise
    capped = pipeline_job._ask_to_move(control, capped)
    doc = json.loads(ask.read_text())
    assert doc["cpus"] == 7 and doc["attempt"] == 1  # 6 for the pools, 1 for Ray Data
    assert doc["reason"].startswith("stage ") and "7 free CPUs would meet it" in doc["reason"]
    first = doc["wall_time"]
    for _ in range(pipeline_job.RELOCATE_EVERY - 1):
        capped = pipeline_job._ask_to_move(control, capped)
    assert json.loads(ask.read_text())["wall_time"] == first
    capped = pipeline_job._ask_to_move(control, capped)
    assert json.loads(ask.read_text())["wall_time"] > first
    roomy = controller.Controller(list(control.profiles), 60, cpu_budget=6)
    assert pipeline_job._ask_to_move(roomy, capped) == 0  # the cap is gone: count again


def test_a_resumed_attempt_starts_after_the_last_checkpointed_window(
    record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = tmp_path / "dead-1"
    dead.mkdir()
    assert pipeline_job._resume(dead) == {"items_done": 0, "items_out": 0, "windows": 0}
    (dead / "decode.1.jsonl").write_text('{"stage": "decode", "item_id": 3}\n')
    pipeline_job._checkpoint({"items_done": 120, "items_out": 117, "windows": 2}, dead)
    assert tau.latest_checkpoint() == record / "checkpoints" / "step-00000002"
    monkeypatch.setenv("TAU_ATTEMPT", "2")  # the next attempt, on another cluster
    again = tmp_path / "dead-2"
    again.mkdir()
    assert pipeline_job._resume(again) == {"items_done": 120, "items_out": 117, "windows": 2}
    assert (again / "decode.1.jsonl").read_text().startswith('{"stage": "decode"')

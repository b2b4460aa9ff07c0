"""examples/multimodal-pipeline end to end through the real ``tau`` script, hub, agent and
Ray: ``tau run plan`` (a configuration; an unreachable target names its limiting stage),
the run on Ray Data with the controller resizing decode when the data mix turns to
large images, per-stage throughput in ``tau run status``, corrupt items in the
dead-letter output, and ``on_error: fail`` failing the run with the stage's error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli import platform_env as pe

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

IP = "127.0.29.10"
EXAMPLE = pe.ROOT / "examples" / "multimodal-pipeline"
tau = pe.tau


env = pe.platform_fixture(IP)


def _project(root: Path, items: int, window_s: float, **pipeline: object) -> Path:
    def edit(doc: dict[str, Any]) -> None:
        doc["runtime"]["env"]["MM_ITEMS"] = str(items)
        doc["pipeline"].update(window_s=window_s, **pipeline)

    return pe.copy_example(EXAMPLE, root, edit)


@pytest.mark.long
def test_plan_recommends_a_configuration_and_names_the_limit(tmp_path: Path) -> None:
    work = _project(tmp_path / "work", 240, 1)
    plan = tau({}, "run", "plan", str(work), "-o", "json")  # nothing submitted: no platform
    assert plan.returncode == 0, plan.stderr + plan.stdout
    doc = json.loads(plan.stdout)
    assert [s["name"] for s in doc["stages"]] == ["decode", "resize", "embed", "filter", "write"]
    assert doc["reachable"] and doc["expected_throughput"] >= 120 and doc["gpus"] >= 1
    by = {s["name"]: s for s in doc["stages"]}
    assert by["decode"]["measured"]["dead"] == 1  # item 13 of the 64-item sample is corrupt
    assert by["embed"]["batch_size"] > 8  # its fixed cost per batch favours big batches
    assert 0.3 < by["filter"]["measured"]["selectivity"] < 0.7
    far = tau({}, "run", "plan", str(work), "--target", "100000")
    assert far.returncode == 1, far.stderr + far.stdout
    assert "target unreachable: stage embed limits the pipeline" in far.stdout
    assert "short of the target 100000" in far.stdout
    assert not (work / ".tau-local").exists()  # the write stage wrote to scratch


@pytest.mark.long
def test_pipeline_runs_resizes_reports_stages_and_dead_letters(
    env: dict[str, str], tmp_path: Path
) -> None:
    work = _project(tmp_path / "work", 240, 1)  # windows of 120: small images, then large
    run = tau(env, "run", str(work), "--watch", cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stderr + run.stdout
    run_id = next(w for w in run.stdout.split() if w.startswith("multimodal-pipeline-"))
    status = tau(env, "run", "status", run_id, "-o", "json", cwd=tmp_path)
    stages = json.loads(status.stdout)["pipeline"]["stages"]
    assert set(stages) == {"decode", "resize", "embed", "filter", "write"}
    assert all(s["items_per_s"] > 0 for s in stages.values()), stages
    text = tau(env, "run", "status", run_id, cwd=tmp_path).stdout
    assert "pipeline (window 2)" in text and "ITEMS/S" in text, text
    got = tau(env, "run", "get", run_id, "-d", str(tmp_path / "got"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr + got.stdout
    summary = json.loads((tmp_path / "got" / "pipeline.json").read_text())
    assert summary["dead_letters"] == 3  # ids 13, 110 and 207 are corrupt
    assert 80 < summary["items_out"] < 160  # about half pass the filter
    assert len(summary["windows"]) == 2
    plan_decode = summary["plan"]["stages"][0]["replicas"]
    assert summary["windows"][1]["next_replicas"]["decode"] > plan_decode  # large images
    dead = [
        json.loads(line)
        for path in sorted((tmp_path / "got" / "dead-letter").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert sorted(d["item_id"] for d in dead) == ["110", "13", "207"]
    assert all(d["stage"] == "decode" and "corrupt image" in d["error"] for d in dead)


@pytest.mark.long
def test_fail_fast_pipeline_fails_with_the_stage_error(env: dict[str, str], tmp_path: Path) -> None:
    work = _project(tmp_path / "work", 40, 1, on_error="fail")
    run = tau(env, "run", str(work), "--watch", cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stderr + run.stdout
    run_id = next(w for w in run.stdout.split() if w.startswith("multimodal-pipeline-"))
    logs = tau(env, "run", "logs", run_id, cwd=tmp_path).stdout
    assert "stage decode raised ValueError('corrupt image 13')" in logs, logs[-3000:]
    assert "pipeline.on_error is fail" in logs

"""elastic.stages and elastic.profile: loading stage references, dead-lettering the items a
stage raises on (the rest go on), fail-fast, user errors naming the stage, and the
sample measurement that `tau run plan` uses (real callables in a temporary module)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from taugrid.elastic import profile, ray_exec, stages
from taugrid.spec import load

MODULE = """\
import time

def source():
    return [{"id": i} for i in range(40)]

def double(items):
    time.sleep(0.002 + 0.001 * len(items))
    out = []
    for item in items:
        if item["id"] % 10 == 3:
            raise ValueError(f"bad item {item['id']}")
        out.append({"id": item["id"], "x": item["id"] * 2})
    return out

def keep_even(items):
    return [i for i in items if i["x"] % 4 == 0]

def not_a_list(items):
    return 42

def nothing():
    return []
"""

PIPELINE = """\
name: p
run:
  entrypoint: python -m taugrid.sdk.job.pipeline_job
  workload_kind: pipeline
pipeline:
  source: {source}
  target_throughput: 100
  sample_size: 20
  stages:
    - name: double
      fn: stagemod_t:double
      batch_size: {{min: 2, max: 8}}
    - name: keep
      fn: stagemod_t:keep_even
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "stagemod_t.py").write_text(MODULE)
    yield tmp_path
    sys.modules.pop("stagemod_t", None)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


def test_failing_items_are_set_aside_and_the_rest_go_on(workdir: Path) -> None:
    fn = stages.load("stagemod_t:double", where="stage double", search=str(workdir))
    result = stages.run_batch("double", fn, [{"id": i} for i in range(8)], fail_fast=False)
    assert [i["id"] for i in result.items] == [0, 1, 2, 4, 5, 6, 7]
    assert [d.item_id for d in result.dead] == ["3"]
    record = result.dead[0].record()
    assert record["stage"] == "double" and "bad item 3" in record["error"]
    assert result.busy_s > 0


def test_fail_fast_raises_the_stage_error(workdir: Path) -> None:
    fn = stages.load("stagemod_t:double", where="stage double", search=str(workdir))
    with pytest.raises(stages.StageFailed, match=r"stage double raised ValueError\('bad item 3'\)"):
        stages.run_batch("double", fn, [{"id": 3}], fail_fast=True)


def test_user_errors_name_the_stage_and_the_fix(workdir: Path) -> None:
    with pytest.raises(stages.StageError, match="cannot import module 'nosuchmod'") as exc:
        stages.load("nosuchmod:f", where="pipeline.stages[0].fn", search=str(workdir))
    assert "importable from run.working_dir" in exc.value.hint
    with pytest.raises(stages.StageError, match="has no callable 'missing'"):
        stages.load("stagemod_t:missing", where="pipeline.stages[0].fn", search=str(workdir))
    bad = stages.load("stagemod_t:not_a_list", where="x", search=str(workdir))
    with pytest.raises(stages.StageError, match="stage odd returned int, not a list"):
        stages.run_batch("odd", bad, [{"id": 1}], fail_fast=False)


def test_profile_measures_each_stage_on_the_sample(workdir: Path) -> None:
    config = load.parse_tau_yaml(PIPELINE.format(source="stagemod_t:source"))
    assert config.pipeline is not None
    measured = profile.measure(config.pipeline, search=str(workdir))
    double, keep = measured
    assert (double.items_in, double.items_out, double.dead) == (20, 18, 2)
    assert {size for size, _ in double.timings} == {2, 8} | {4}  # 20 items: last batch of 4
    assert 0 < double.profile.cost.rate(8) < float("inf")  # timed, not asserted on speed
    assert keep.items_in == 18 and keep.profile.selectivity == pytest.approx(10 / 18)
    empty = load.parse_tau_yaml(PIPELINE.format(source="stagemod_t:nothing"))
    assert empty.pipeline is not None
    with pytest.raises(stages.StageError, match=r"pipeline\.source gave no items"):
        profile.measure(empty.pipeline, search=str(workdir))


def test_numpy_batches_round_trip_ragged_arrays() -> None:
    items = [{"id": 1, "img": np.zeros((2, 3))}, {"id": 2, "img": np.ones((4, 3))}]
    batch = ray_exec.columns(items, [])
    assert batch["id"].dtype != object and batch["img"].dtype == object
    back = ray_exec.rows(batch)
    assert back[0]["id"] == 1 and isinstance(back[0]["id"], int)
    assert back[1]["img"].shape == (4, 3)
    empty = ray_exec.columns([], ["id"])  # a filter that keeps nothing: same columns, no rows
    assert list(empty) == ["id"] and len(empty["id"]) == 0

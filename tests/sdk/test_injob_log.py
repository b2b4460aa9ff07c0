"""tau.log (and its TensorBoard mirror), tau.heartbeat, the run environment accessors and
the package-root API."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import taugrid as tau
from taugrid.record import jobenv
from taugrid.sdk.job import injob, injob_env
from tests.sdk import tensorboard_events


def _lines(record: Path) -> list[dict[str, object]]:
    text = (record / "metrics" / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_log_writes_one_line_per_metric_visible_immediately(record: Path) -> None:
    tau.log({"loss": 0.5, "acc": 0.75}, step=3)
    rows = _lines(record)  # read while the writer still holds the file open
    assert [(r["name"], r["value"], r["step"]) for r in rows] == [
        ("loss", 0.5, 3),
        ("acc", 0.75, 3),
    ]
    for row in rows:
        assert row["attempt"] == 1 and row["rank"] == 0 and row["run_id"] == "r-1"
        assert isinstance(row["wall_time"], float)


def test_log_step_defaults_to_one_past_the_last(record: Path) -> None:
    tau.log({"x": 1.0}, step=10)
    tau.log({"x": 2.0})
    tau.log({"x": 3.0})
    assert [r["step"] for r in _lines(record)] == [10, 11, 12]


def test_log_accepts_numpy_scalars_and_ints(record: Path) -> None:
    np = pytest.importorskip("numpy")
    tau.log({"a": np.float32(0.25), "b": 7}, step=0)
    assert [r["value"] for r in _lines(record)] == [0.25, 7.0]


def test_log_nonfinite_values_stay_strict_json(record: Path) -> None:
    tau.log({"n": float("nan"), "p": float("inf"), "m": float("-inf")}, step=1)
    text = (record / "metrics" / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert [(r["value"], r["nonfinite"]) for r in _lines(record)] == [
        (None, "nan"),
        (None, "inf"),
        (None, "-inf"),
    ]


def test_log_rejects_non_numbers(record: Path) -> None:
    with pytest.raises(TypeError, match="'loss' must be a number"):
        tau.log({"loss": "low"}, step=0)  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="step must be an int"):
        tau.log({"loss": 1.0}, step=1.5)  # type: ignore[arg-type]


def test_only_rank_zero_logs_by_default(record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    tau.log({"loss": 1.0}, step=0)
    assert not (record / "metrics" / "metrics.jsonl").exists()
    tau.log({"loss": 1.0}, step=0, all_ranks=True)
    assert [r["rank"] for r in _lines(record)] == [1]


def _log_many(out: str, rank: int) -> None:
    os.environ.update(TAU_OUTPUT_DIR=out, RANK=str(rank))
    for i in range(300):
        injob.log({"padding-" + "x" * 200: float(i)}, step=i, all_ranks=True)


def test_concurrent_writers_never_interleave_lines(record: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_log_many, args=(str(record), r)) for r in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = _lines(record)  # json.loads would fail on a torn line
    assert len(rows) == 1200
    assert sorted({int(str(r["rank"])) for r in rows}) == [0, 1, 2, 3]


def test_log_reopens_a_removed_metrics_file(record: Path) -> None:
    tau.log({"x": 1.0}, step=0)
    (record / "metrics" / "metrics.jsonl").unlink()
    tau.log({"x": 2.0}, step=1)
    assert [r["step"] for r in _lines(record)] == [1]


def test_outside_a_run_writes_to_tau_local_and_warns_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("TAU_OUTPUT_DIR", "TAU_RUN_ID", "TAU_ATTEMPT", "CHECKPOINT_PATH", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(injob_env, "_warned_local", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tau.log({"loss": 1.0}, step=0)
        tau.log({"loss": 0.5}, step=1)
        assert tau.checkpoint_dir().is_relative_to(tmp_path / ".tau-local" / "checkpoints")
    assert [w.category for w in caught] == [tau.LocalRunWarning]
    rows = (tmp_path / ".tau-local" / "metrics" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 2 and json.loads(rows[0])["run_id"] == "local"


def test_heartbeat_records_liveness_per_rank(record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tau.log({"x": 1.0}, step=41)
    tau.heartbeat()
    monkeypatch.setenv("RANK", "3")
    tau.heartbeat(step=7)
    beat0 = json.loads((record / "metrics" / "heartbeat-rank-0.json").read_text())
    beat3 = json.loads((record / "metrics" / "heartbeat-rank-3.json").read_text())
    assert beat0["step"] == 41 and beat0["pid"] == os.getpid() and beat0["run_id"] == "r-1"
    assert beat3["step"] == 7 and beat3["rank"] == 3


def test_environment_accessors(record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAU_ATTEMPT", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (tau.run_id(), tau.attempt(), tau.rank(), tau.world_size()) == ("r-1", 3, 0, 4)
    assert tau.output_dir() == record
    monkeypatch.setenv("TAU_ATTEMPT", "two")
    with pytest.raises(tau.InJobEnvError, match="TAU_ATTEMPT='two' is not an integer"):
        tau.attempt()
    monkeypatch.setenv("TAU_ATTEMPT", "0")
    with pytest.raises(tau.InJobEnvError, match="not a valid attempt"):
        tau.attempt()
    monkeypatch.delenv("TAU_ATTEMPT")
    assert tau.attempt() == 1


def test_label_selector_is_the_pools_the_hub_placed_the_run_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TAU_LABEL_SELECTOR", raising=False)
    assert tau.label_selector() == {}  # any node
    monkeypatch.setenv("TAU_LABEL_SELECTOR", '{"taugrid.io/pool": "in(a-spot)"}')
    assert tau.label_selector() == {"taugrid.io/pool": "in(a-spot)"}
    monkeypatch.setenv("TAU_LABEL_SELECTOR", "in(a-spot)")
    with pytest.raises(tau.InJobEnvError, match="TAU_LABEL_SELECTOR is not JSON"):
        tau.label_selector()


def test_package_root_reexports_the_injob_api() -> None:
    assert sorted(tau.__all__) == sorted(injob.__all__)
    for name in injob.__all__:
        assert getattr(tau, name) is getattr(injob, name)
    with pytest.raises(AttributeError):
        _ = tau.no_such_thing


def test_import_taugrid_stays_light() -> None:
    code = (
        "import sys, taugrid as tau; tau.log; tau.checkpoint;"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('ray', 'fastapi', 'sqlalchemy', 'numpy', 'pydantic', 'httpx')];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_tensorboard_scalars_mirror_what_tau_log_writes_when_asked(
    record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tau.log({"loss": 1.0})  # not asked: no event file
    assert not (record / "artifacts" / "tensorboard").exists()
    monkeypatch.setenv(jobenv.TENSORBOARD, "1")
    tau.log({"loss": 0.5, "acc": 0.25}, step=3)
    tau.log({"loss": float("nan")}, step=4)  # non-finite: JSONL only
    tau.log({"loss": 0.125}, step=5)
    got = tensorboard_events.scalars(record / "artifacts" / "tensorboard")
    assert sorted(got) == [("acc", 3, 0.25), ("loss", 3, 0.5), ("loss", 5, 0.125)]

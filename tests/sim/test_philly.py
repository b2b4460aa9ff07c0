"""Event-driven queueing replay: known answers on two jobs, determinism."""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

import pytest

from taugrid.scheduling import queueing
from taugrid.sim import __main__ as cli
from taugrid.sim import philly, traces


def job(i: int, submit: float, duration: float, gpus: int) -> traces.PhillyJob:
    return traces.PhillyJob(i, submit, duration, gpus, "vc")


TWO = [job(0, 0.0, 100.0, 2), job(1, 1.0, 1.0, 2)]


def test_fifo_makes_the_short_job_wait() -> None:
    r = philly.simulate(TWO, "FIFO", 2)
    assert r.avg_jct == pytest.approx((100 + 100) / 2)
    assert r.preemptions == 0


FREE = philly.RestartCost.free()


def test_srtf_preempts_for_the_short_job() -> None:
    r = philly.simulate(TWO, "SRTF", 2, cost=FREE)
    assert r.avg_jct == pytest.approx((101 + 1) / 2)
    assert r.preemptions == 1
    assert r.avg_queueing == pytest.approx(0.5)
    assert r.lost_gpu_hours == 0.0


def test_a_preemption_costs_the_restart_and_the_work_since_the_last_checkpoint() -> None:
    # Job 0 (2 GPUs, 1,000 s) runs 0-250, is preempted by job 1 (250-251): it keeps the
    # 200 s up to its last checkpoint (every 100 s), loses 50, restarts for 30 s from 251
    # and has 800 s left: done at 251 + 30 + 800 = 1,081.
    jobs = [job(0, 0.0, 1000.0, 2), job(1, 250.0, 1.0, 2)]
    cost = philly.RestartCost(restart_s=30.0, checkpoint_s=100.0)
    r = philly.simulate(jobs, "SRTF", 2, cost=cost)
    assert r.avg_jct == pytest.approx((1081 + 1) / 2)
    assert r.preemptions == 1
    assert r.lost_gpu_hours == pytest.approx(2 * (50 + 30) / 3600)
    # free, it would have finished at 1,001
    assert philly.simulate(jobs, "SRTF", 2, cost=FREE).avg_jct == pytest.approx((1001 + 1) / 2)


def test_taugrid_guard_keeps_a_job_that_started_recently_running() -> None:
    # TauGrid knows nothing yet (no history): a running job's estimate is 'as long
    # again' (at least 60 s), so the fresh 2-GPU job at t=100 outranks job 0 (ran 100 s).
    jobs = [job(0, 0.0, 1000.0, 2), job(1, 100.0, 50.0, 2)]
    off = queueing.TauGridKnobs(min_run_s=0.0)
    unguarded = philly.simulate(jobs, "TauGrid", 2, knobs=off, cost=FREE)
    assert unguarded.preemptions >= 1
    # guarded for 1,200 s: job 0 is never preempted, job 1 waits for it
    guarded = philly.simulate(jobs, "TauGrid", 2, knobs=queueing.TauGridKnobs(min_run_s=1200.0))
    assert guarded.preemptions == 0
    assert guarded.avg_jct == pytest.approx((1000 + 950) / 2)
    # guarded for 600 s: preempted at the first re-rank past it (t = 600), not at t = 100
    short = philly.simulate(jobs, "TauGrid", 2, knobs=queueing.TauGridKnobs(min_run_s=600.0))
    assert short.preemptions == 1 and short.avg_jct > unguarded.avg_jct


def test_sjf_does_not_preempt() -> None:
    assert philly.simulate(TWO, "SJF", 2).avg_jct == pytest.approx(100.0)


def test_small_jobs_backfill_around_a_big_one() -> None:
    jobs = [job(0, 0, 10, 3), job(1, 0, 10, 4), job(2, 0, 10, 1)]
    r = philly.simulate(jobs, "FIFO", 4)
    assert r.avg_jct == pytest.approx((10 + 20 + 10) / 3)


def test_same_input_same_result() -> None:
    jobs = [job(i, float(i * 7 % 13), float(1 + i * 37 % 101), 1 + i % 3) for i in range(60)]
    for name in ("2D-LAS", "TauGrid"):
        assert philly.simulate(jobs, name, 4) == philly.simulate(jobs, name, 4)


def test_window_and_sizing() -> None:
    jobs = [job(i, 100.0 + i, 10.0, 1) for i in range(10)]
    w = philly.window(jobs, 2, 5)
    assert [j.submit for j in w] == [0, 1, 2, 3, 4]
    assert philly.size_cluster(w, load=0.5) == 32  # 50 GPU-s / 4 s / 0.5 = 25, whole 8-GPU nodes


def write_trace(root: Path, n: int = 80) -> None:
    """A Philly-format CSV of ``n`` jobs, one every 5 min, mixed sizes (seeded)."""
    rng = random.Random(3)
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    t0 = datetime.datetime(2017, 10, 9, 7)
    for i in range(n):
        gpus = rng.choice([1, 1, 2, 4, 8])
        duration = rng.choice([60, 600, 3600, 20000]) * rng.uniform(0.5, 1.5)
        when = t0 + datetime.timedelta(seconds=300 * i)
        rows.append(f"{when:%Y-%m-%d %H:%M:%S},{duration:.0f},{gpus},{duration * gpus:.0f},vc")
    (root / "philly").mkdir()
    (root / "philly" / "philly.csv").write_text("\n".join(rows) + "\n")


def test_cli_passes_taugrid_knobs_and_rejects_a_bad_percentile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_trace(tmp_path)
    monkeypatch.setenv("TAU_TRACES_DIR", str(tmp_path))
    jobs = traces.load_philly()
    capacity = philly.size_cluster(jobs, 3.0)  # overloaded: the order matters
    knobs = queueing.TauGridKnobs(gpu_power=3.0, quantile=0.9, min_run_s=0.0)
    want = philly.simulate(jobs, "TauGrid", capacity, knobs=knobs, cost=FREE).avg_jct
    default = philly.simulate(jobs, "TauGrid", capacity).avg_jct
    args = ["philly", "--load", "3", "--gpu-power", "3", "--quantile", "0.9", "-o", "json"]
    args += ["--min-run-s", "0", "--restart-s", "0", "--checkpoint-s", "0"]
    assert cli.main(args) == 0
    (got,) = json.loads(capsys.readouterr().out)
    assert got["avg_jct"] == pytest.approx(want) and want != pytest.approx(default)
    with pytest.raises(SystemExit):
        cli.main(["philly", "--quantile", "15"])
    assert "15 is not between 0 and 1" in capsys.readouterr().err

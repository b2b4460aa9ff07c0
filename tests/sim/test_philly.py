"""Event-driven queueing replay: known answers on two jobs, determinism."""

from __future__ import annotations

import pytest

from taugrid.sim import philly, traces


def job(i: int, submit: float, duration: float, gpus: int) -> traces.PhillyJob:
    return traces.PhillyJob(i, submit, duration, gpus, "vc")


TWO = [job(0, 0.0, 100.0, 2), job(1, 1.0, 1.0, 2)]


def test_fifo_makes_the_short_job_wait() -> None:
    r = philly.simulate(TWO, "FIFO", 2)
    assert r.avg_jct == pytest.approx((100 + 100) / 2)
    assert r.preemptions == 0


def test_srtf_preempts_for_the_short_job() -> None:
    r = philly.simulate(TWO, "SRTF", 2)
    assert r.avg_jct == pytest.approx((101 + 1) / 2)
    assert r.preemptions == 1
    assert r.avg_queueing == pytest.approx(0.5)


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

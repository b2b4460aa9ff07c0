"""Queue-order policies and GPU selection on tiny hand-built job sets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from taugrid.scheduling import queueing as q


def jobs(
    submit: list[float],
    gpus: list[int],
    executed: list[float],
    duration: list[float] | None = None,
    running: list[bool] | None = None,
) -> q.ActiveJobs:
    n = len(submit)
    return q.ActiveJobs(
        index=np.arange(n, dtype=np.int64),
        submit=np.array(submit, dtype=float),
        gpus=np.array(gpus, dtype=np.int64),
        executed=np.array(executed, dtype=float),
        duration=np.array(duration if duration else [math.nan] * n, dtype=float),
        group=np.zeros(n, dtype=np.int64),
        running=np.array(running if running else [False] * n),
        family=np.zeros(n, dtype=np.int64),
    )


def test_select_is_greedy_and_lets_small_jobs_pass() -> None:
    chosen = q.select(np.array([4, 8, 2, 1, 4]), 8)
    assert chosen.tolist() == [True, False, True, True, False]
    assert q.select(np.array([], dtype=np.int64), 8).tolist() == []


def test_fifo_sjf_srtf_orders() -> None:
    j = jobs([0, 1, 2], [1, 1, 1], [50, 0, 0], duration=[100, 30, 60])
    assert q.order(q.Fifo(), j, 0).tolist() == [0, 1, 2]
    assert q.order(q.ShortestJobFirst(), j, 0).tolist() == [1, 2, 0]
    assert q.order(q.ShortestRemainingFirst(), j, 0).tolist() == [1, 0, 2]


def test_two_dimensional_las_demotes_by_attained_gpu_seconds() -> None:
    las = q.LeastAttained2D(thresholds=(100.0,))
    j = jobs([0, 5, 9], [4, 1, 1], [30, 90, 0], running=[True, True, False])
    # job 0 attained 120 GPU-s (queue 1); jobs 1 (90) and 2 (0) stay in queue 0, FIFO
    assert q.order(las, j, 0).tolist() == [1, 2, 0]
    assert las.next_change(j) == pytest.approx(10.0)  # job 1 crosses 100 GPU-s in 10 s


def test_history_learns_conditional_quantiles() -> None:
    h = q.DurationHistory(1, quantile=0.5, min_samples=3, refresh=1)
    for d in [10, 20, 30, 1000, 2000, 3000]:
        h.record(0, float(d))
    group = np.zeros(2, dtype=np.int64)
    left = h.remaining(group, np.array([0.0, 100.0]))
    assert left[0] == pytest.approx(1000.0)  # median of all six
    assert left[1] == pytest.approx(1900.0)  # median of those above 100 s, minus 100
    empty = q.DurationHistory(1)
    assert empty.remaining(np.zeros(1, dtype=np.int64), np.array([500.0]))[0] == 500.0


def test_history_keeps_only_the_recent_window_and_falls_back_to_the_family() -> None:
    h = q.DurationHistory(2, 1, quantile=0.5, min_samples=3, window=3)
    for d in [1000.0, 1000.0, 1000.0, 10.0, 20.0, 30.0]:  # group 0: the last three are short
        h.record(0, d, family=0)
    left = h.remaining(np.array([0, 1]), np.zeros(2), np.array([0, 0]))
    assert left[0] == pytest.approx(20.0)  # median of 10, 20, 30: the 1000 s jobs are gone
    # group 1 has no history: its family (the same three recent jobs) answers
    assert left[1] == pytest.approx(20.0)


def test_taugrid_ranks_by_gpus_times_estimate() -> None:
    policy = q.make_policy("TauGrid", groups=1)
    assert isinstance(policy, q.TauGridQueue)
    j = jobs([0, 1], [8, 1], [100, 100])
    assert q.order(policy, j, 0).tolist() == [1, 0]  # same estimate, fewer GPUs first


def test_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown queue policy"):
        q.make_policy("LIFO")


def test_taugrid_knobs_set_the_gpu_exponent_and_the_percentile() -> None:
    def rank(knobs: q.TauGridKnobs) -> float:
        policy = q.make_policy("TauGrid", groups=1, knobs=knobs)
        assert isinstance(policy, q.TauGridQueue)
        for d in range(100, 2001, 100):  # 20 finished jobs: 100 s, 200 s, ..., 2000 s
            policy.history.record(0, float(d))
        return float(policy.rank(jobs([0], [2], [0]), 0)[0])

    assert rank(q.TauGridKnobs()) == pytest.approx(2**1.35 * 400.0)  # 15th pct: 4th of 20
    assert rank(q.TauGridKnobs(gpu_power=1.0, quantile=0.5)) == pytest.approx(2 * 1100.0)

"""Spanning runs in the multi-region simulator: an async job no one pool holds now runs
across pools when starting now (its data copied into every member region) beats waiting
for one; a sync job never spans. Known answers on hand-built 2-region scenarios."""

from __future__ import annotations

import dataclasses

import pytest

from taugrid.scheduling import policies_baseline
from taugrid.sim import mr_scenario as sc
from taugrid.sim import mr_sim
from tests.sim.test_multiregion import GB, job, placed, scenario

POOLS = [sc.Pool("r1", "A100", 2, 2.0), sc.Pool("r2", "A100", 2, 2.0)]
# 12 GPUs busy in each region until t=100 and t=200: 4 + 4 GPUs stay free
BUSY = [job(0, 0, 4, 100, None, workers=3), job(1, 0, 4, 200, None, workers=3)]


def _span_policy() -> object:
    order = tuple(p.cluster_id for p in POOLS)
    policy = policies_baseline.make_policy("TauGrid", order)
    return dataclasses.replace(policy, span_min_bps=100e6 / 8)


def _run(jobs: list[sc.Job], datasets: list[sc.Dataset] = ()) -> mr_sim.Result:  # type: ignore[assignment]
    s = scenario(POOLS, list(datasets), BUSY + jobs)
    return mr_sim.simulate(s, "TauGrid+span", _span_policy())  # type: ignore[arg-type]


def test_an_async_job_spans_both_regions_and_frees_both_pools_at_its_end() -> None:
    r = _run([job(2, 1, 4, 50, None, workers=2, comm=sc.Comm.ASYNC)])
    p = placed(r)["j2"]
    assert (p.placed, p.start, p.finish) == pytest.approx((1, 1, 51))  # no wait for j0
    # both pools got their GPUs back: a later 2x4 job fits as soon as j0 and j2 are done
    later = _run(
        [
            job(2, 1, 4, 50, None, workers=2, comm=sc.Comm.ASYNC),
            job(3, 60, 4, 10, None, workers=2, comm=sc.Comm.SYNC),
        ]
    )
    assert placed(later)["j3"].placed == pytest.approx(100)  # j0's pool, whole


def test_a_span_waits_for_its_data_in_every_member_region() -> None:
    # 4 GB in r1 over 1 Gbit/s: 32 s into r2, sooner than the 99 s wait for one pool
    data = [sc.Dataset("d", 4 * GB, "r1")]
    r = _run([job(2, 1, 4, 50, "d", workers=2, comm=sc.Comm.ASYNC)], data)
    p = placed(r)["j2"]
    assert p.placed == pytest.approx(1) and p.start == pytest.approx(33)
    assert r.bytes_moved == 4 * GB


def test_it_waits_when_the_copy_would_take_longer_than_the_wait() -> None:
    # 40 GB: 320 s into r2, later than one pool frees its GPUs (99 s): no span. Then the
    # move-vs-wait rule keeps it near its data, in r1, whose GPUs come back at t=200.
    data = [sc.Dataset("d", 40 * GB, "r1")]
    r = _run([job(2, 1, 4, 50, "d", workers=2, comm=sc.Comm.ASYNC)], data)
    p = placed(r)["j2"]
    assert p.region == "r1" and p.placed == pytest.approx(200) and p.start == pytest.approx(200)
    assert r.bytes_moved == 0


def test_a_sync_job_still_never_spans_with_spanning_on() -> None:
    r = _run([job(2, 1, 4, 50, None, workers=2, comm=sc.Comm.SYNC)])
    assert placed(r)["j2"].placed == pytest.approx(100)

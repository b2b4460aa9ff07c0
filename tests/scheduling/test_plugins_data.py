"""Data-aware placement plugins with answers computed by hand (see each test's comment)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from taugrid.platform import models as pm
from taugrid.scheduling import cycle, plugins, plugins_data
from taugrid.scheduling import snapshot as snap

MB = 10**6
GB = 10**9


def node(gpus_free: float = 4, total: float = 4, model: str = "A100") -> snap.NodeView:
    return snap.NodeView("n", model, total, gpus_free, 64, 512 * 2**30)


def cluster(
    cid: str,
    region: str | None = None,
    *,
    free: float = 4,
    links: tuple[snap.LinkView, ...] = (),
    releases: tuple[tuple[float, float], ...] = (),
    cost: float = 1.0,
    warm: tuple[str, ...] = (),
) -> snap.ClusterView:
    return snap.ClusterView(
        cid,
        region or cid,
        True,
        (node(free),),
        cost_per_gpu_hour=cost,
        links=links,
        releases=releases,
        warm_runtimes=warm,
    )


def run(*needs: snap.DataNeed, gpus: int = 2, **kw: object) -> snap.PendingRun:
    base = snap.PendingRun("r", "t", 0, 0.0, 1, gpus, 1, 1, "A100", admitted=True, datasets=needs)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def link(src: str, mbit: float, rtt_ms: float = 0.0, egress: float = 0.0) -> snap.LinkView:
    return snap.LinkView(src, mbit * 1e6 / 8, rtt_ms / 1000, 0.0, egress)


def test_transfer_time_is_rtt_plus_size_over_measured_throughput() -> None:
    # 200 MB at 100 Mbit/s (12.5 MB/s) = 16 s, plus one 40 ms round trip.
    assert plugins_data.transfer_time_s(200 * MB, link("a", 100, 40), 1.0) == pytest.approx(16.04)
    # never measured: the default 12.5 MB/s, no RTT
    assert plugins_data.transfer_time_s(25 * MB, None, plugins_data.DEFAULT_BPS) == 2.0


def test_estimate_picks_fastest_source_and_adds_datasets() -> None:
    # ds1 (200 MB) is in a (100 Mbit/s: 16 s) and b (400 Mbit/s: 4 s) -> 4 s from b;
    # ds2 (50 MB) only in a -> 4 s; total 8 s, 250 MB; egress 0.2 GB*$1 + 0.05 GB*$2.
    c = cluster("c", links=(link("a", 100, egress=2.0), link("b", 400, egress=1.0)))
    r = run(
        snap.DataNeed("ds1", 200 * MB, ("a", "b")),
        snap.DataNeed("ds2", 50 * MB, ("a",)),
    )
    est = plugins_data.estimate(r, c)
    assert est.seconds == 8.0
    assert est.bytes_to_move == 250 * MB
    assert est.moves == (("ds1", "b", 4.0), ("ds2", "a", 4.0))
    assert est.egress_cost == pytest.approx(0.2 + 0.1)


def test_data_in_region_costs_nothing_and_missing_is_reported() -> None:
    r = run(snap.DataNeed("here", 10 * GB, ("c",)), snap.DataNeed("nowhere", 1, ()))
    est = plugins_data.estimate(r, cluster("c"))
    assert (est.seconds, est.bytes_to_move, est.missing) == (0.0, 0, ("nowhere",))


def test_data_score_is_half_at_ref_seconds() -> None:
    # 100 * 60 / (60 + t): local 100; 60 s away 50; 20 s away 75.
    score = plugins_data.DataAffinityScore(ref_s=60)
    need = snap.DataNeed("ds", 250 * MB, ("a",))  # 250 MB at 100 Mbit/s = 20 s
    assert score.score(run(need), cluster("a")) == 100.0
    assert score.score(run(need), cluster("c", links=(link("a", 100),))) == 75.0
    assert score.score(run(need), cluster("c", links=(link("a", 33.3333333333),))) == (
        pytest.approx(50.0)
    )
    assert score.score(run(), cluster("c")) == 100.0  # no data: neutral everywhere


def test_expected_wait_from_releases() -> None:
    # needs 4 GPUs, 1 free; releases at 30 s (+1) and 100 s (+2) -> 4 free at 100 s.
    r = run(gpus=4)
    c = cluster("c", free=1, releases=((100.0, 2.0), (30.0, 1.0)))
    assert plugins_data.expected_wait_s(r, c) == 100.0
    assert plugins_data.expected_wait_s(r, cluster("c", free=4)) == 0.0
    assert plugins_data.expected_wait_s(run(gpus=8), cluster("c")) == math.inf
    # wait score: 100 * 300 / (300 + 100) = 75
    assert plugins_data.ExpectedWaitScore().score(r, c) == 75.0


def test_small_dataset_may_move() -> None:
    r = run(snap.DataNeed("ds", 200 * MB, ("a",)), wait_near_data_s=0.0)
    st = plugins_data.DataMoveFilter().filter(r, cluster("c"))
    assert st.ok


def test_big_dataset_waits_near_its_data_unless_moving_is_faster() -> None:
    # 8 GB over 1 Gbit/s (125 MB/s) = 64 s to move.
    need = snap.DataNeed("big", 8 * GB, ("a",))
    far = cluster("c", links=(link("a", 1000),))
    f = plugins_data.DataMoveFilter()
    st = f.filter(run(need, wait_near_data_s=30.0), far)  # wait 30 s < move 64 s: wait
    assert st.code is plugins.Code.UNSCHEDULABLE and "threshold" in st.reason
    assert f.filter(run(need, wait_near_data_s=600.0), far).ok  # 64 s < 600 s: move
    assert f.filter(run(need, wait_near_data_s=None), far).ok  # nobody near the data
    # the threshold is a parameter: 10 GB makes 8 GB "small"
    assert (
        plugins_data.DataMoveFilter(threshold_bytes=10 * GB)
        .filter(run(need, wait_near_data_s=30.0), far)
        .ok
    )


def test_wait_near_data_takes_best_ready_holder() -> None:
    need = snap.DataNeed("ds", GB, ("a", "b"))
    r = run(need, gpus=4)
    a = cluster("a", free=0, releases=((50.0, 4.0),))
    b = cluster("b", free=0, releases=((20.0, 4.0),))
    c = cluster("c")
    assert plugins_data.wait_near_data(r, (a, b, c)) == 20.0
    assert plugins_data.wait_near_data(r, (c,)) is None
    assert plugins_data.wait_near_data(run(gpus=4), (a, b, c)) is None  # no data needs


def test_warm_runtime_score() -> None:
    s = plugins_data.WarmRuntimeScore()
    assert s.score(run(runtime_key="k1"), cluster("c", warm=("k1",))) == 100.0
    assert s.score(run(runtime_key="k1"), cluster("c")) == 0.0
    assert s.score(run(), cluster("c")) == 100.0


def test_the_seeds_weights_place_by_estimated_transfer_time() -> None:
    # The seed's weights (data .5, idle .3, cost .2). a holds the data but is pricier and
    # busier; c is 20 s away (250 MB, 100 Mbit/s). Idle: free GPUs x speed over that + 2.
    # a: data 100, idle 2/4 = 50, cost (1 - 3/10) = 70 -> .5*100 + .3*50 + .2*70 = 79
    # c: data  75, idle 4/6 = 66.7, cost (1 - 1/10) = 90 -> .5*75 + .3*66.7 + .2*90 = 75.5
    seed = cycle.policy_from(
        pm.Scheduling(presets={"balanced": {"data": 0.5, "idle_gpu": 0.3, "cost": 0.2}})
    )
    need = snap.DataNeed("ds", 250 * MB, ("a",))
    a = cluster("a", free=2, cost=3.0)
    c = cluster("c", links=(link("a", 100),), cost=1.0)
    s = snap.Snapshot(0.0, (a, c), ())
    (d,) = cycle.schedule(s, [run(need, wait_near_data_s=0.0)], seed)
    totals = {v.cluster_id: v.total for v in d.verdicts}
    assert totals == {"a": 79.0, "c": 75.5}
    assert d.cluster_id == "a"
    # at 100 Mbit/s the data score of c is 75; at 400 Mbit/s (5 s) 92.3 -> c
    fast = dataclasses.replace(c, links=(link("a", 400),))
    (d,) = cycle.schedule(
        snap.Snapshot(0.0, (a, fast), ()), [run(need, wait_near_data_s=0.0)], seed
    )
    assert d.cluster_id == "c"
    assert {v.cluster_id: v.total for v in d.verdicts}["c"] == pytest.approx(84.154, abs=1e-3)


def test_default_policy_weighs_the_transfer_into_the_finish_time() -> None:
    # Default (finish .8, data .2), both clusters at reference speed, a 1 h run:
    # a: finish 3600 s -> 50, data 100 -> 60; c: 20 s + 3600 s -> 49.86, data 75 -> 54.89.
    need = snap.DataNeed("ds", 250 * MB, ("a",))
    a = cluster("a", free=2, cost=3.0)
    c = cluster("c", links=(link("a", 100),), cost=1.0)
    (d,) = cycle.schedule(
        snap.Snapshot(0.0, (a, c), ()),
        [run(need, wait_near_data_s=0.0, runtime_s=3600.0)],
        cycle.default_policy(),
    )
    assert {v.cluster_id: v.total for v in d.verdicts} == {"a": 60.0, "c": 54.889}
    assert d.cluster_id == "a"
    # c's GPUs twice as fast: 20 s + 1800 s -> 66.42, .8*66.42 + .2*75 = 68.14 -> c
    fast_gpus = dataclasses.replace(c, gpu_speed=2.0)
    (d,) = cycle.schedule(
        snap.Snapshot(0.0, (a, fast_gpus), ()),
        [run(need, wait_near_data_s=0.0, runtime_s=3600.0)],
        cycle.default_policy(),
    )
    assert d.cluster_id == "c"

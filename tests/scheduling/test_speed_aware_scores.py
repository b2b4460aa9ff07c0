"""Speed-aware placement scores on small hand-made snapshots: free GPUs x speed
(``idle_gpu``) and expected finish time (``finish``). Each test changes one thing of the
snapshot and checks that the deciding cluster changes, and why; numbers by hand in
the comments.
"""

from __future__ import annotations

import dataclasses

import pytest

from taugrid.platform import models as pm
from taugrid.scheduling import cycle, plugins, plugins_data
from taugrid.scheduling import snapshot as snap

GB = 10**9


def cluster(
    cid: str, model: str, speed: float, free: float, *, region: str = "r1", price: float = 2.0
) -> snap.ClusterView:
    node = snap.NodeView(f"{cid}-0", model, 8, free, 64, 1e12)
    return snap.ClusterView(
        cid, region, True, (node,), cost_per_gpu_hour=price, gpu_speed=speed, links=()
    )


def run(gpus: int = 1, runtime_s: float | None = 3600.0, **kw: object) -> snap.PendingRun:
    base = snap.PendingRun("r", "t", 0, 0.0, 1, gpus, 1, 1, admitted=True, runtime_s=runtime_s)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def pick(r: snap.PendingRun, *clusters: snap.ClusterView, policy: cycle.Policy) -> str | None:
    quotas = (snap.QuotaView("t", "H100", 100, 0), snap.QuotaView("t", "L4", 100, 0))
    (d,) = cycle.schedule(snap.Snapshot(0.0, clusters, quotas), [r], policy)
    return d.cluster_id


def only(score: str) -> cycle.Policy:
    return cycle.policy_from(pm.Scheduling(presets={"balanced": {score: 1.0}}))


# 4 free H100s (2x an A100) against 8 free L4s (0.4x), both otherwise idle.
H100 = cluster("h100", "H100", 2.0, free=4)
L4 = cluster("l4", "L4", 0.4, free=8, price=0.7)


def test_idle_score_counts_free_gpus_times_speed_not_the_idle_share() -> None:
    # 1 GPU asked. h100: W = 4 x 2 = 8 -> 100 * 8 / 9 = 88.9; l4: W = 8 x 0.4 = 3.2 ->
    # 100 * 3.2 / 4.2 = 76.2. (The old idle share: h100 50 %, l4 100 % -> l4.)
    idle = plugins.IdleGpuScore()
    assert idle.score(run(), H100) == pytest.approx(800 / 9)
    assert idle.score(run(), L4) == pytest.approx(320 / 4.2)
    assert pick(run(), H100, L4, policy=only("idle_gpu")) == "h100"
    # Same GPUs, but the H100s no faster than the L4s: now the 8 free GPUs win.
    slow_h100 = dataclasses.replace(H100, gpu_speed=0.4)
    assert pick(run(), slow_h100, L4, policy=only("idle_gpu")) == "l4"


def test_finish_score_is_the_run_time_over_run_time_plus_finish_time() -> None:
    # 1 h run, data local, fits now: h100 finishes in 1800 s -> 100 * 3600 / 5400 = 66.7;
    # l4 in 9000 s -> 100 * 3600 / 12600 = 28.6.
    finish = plugins_data.FinishTimeScore()
    assert plugins_data.finish_time_s(run(), H100) == pytest.approx(1800.0)
    assert finish.score(run(), H100) == pytest.approx(200 / 3)
    assert finish.score(run(), L4) == pytest.approx(100 / 3.5)
    # a run declaring no run time is scored as a 1 h run
    assert finish.score(run(runtime_s=None), L4) == pytest.approx(100 / 3.5)


def test_default_policy_sends_any_model_work_to_the_faster_gpus() -> None:
    # The L4 pool is cheaper per GPU-hour and emptier, but does 0.4 of the work per hour:
    # the default preset (finish-first) sends the run where it finishes soonest.
    assert pick(run(), H100, L4, policy=cycle.default_policy()) == "h100"
    # Only when the H100s are busy does it go to the L4s.
    busy = dataclasses.replace(H100, nodes=(dataclasses.replace(H100.nodes[0], gpus_free=0),))
    assert pick(run(), busy, L4, policy=cycle.default_policy()) == "l4"


def test_finish_time_trades_a_transfer_against_faster_gpus_by_run_length() -> None:
    # 4 GB in r1 (under the 5 GB move threshold). "near": A100s (1x) in r1;
    # "far": H100s (2x) in r2, the data 2,000 s away over 16 Mbit/s.
    need = snap.DataNeed("d", 4 * GB, ("r1",))
    near = cluster("near", "H100", 1.0, free=8)
    far = dataclasses.replace(
        cluster("far", "H100", 2.0, free=8, region="r2"), links=(snap.LinkView("r1", 2e6),)
    )
    assert plugins_data.estimate(run(datasets=(need,)), far).seconds == pytest.approx(2000.0)
    # 4 h run: near finishes in 14,400 s, far in 2,000 + 7,200 = 9,200 s -> far.
    long = run(runtime_s=4 * 3600.0, datasets=(need,), wait_near_data_s=0.0)
    assert pick(long, near, far, policy=only("finish")) == "far"
    # 30 min run: near 1,800 s, far 2,000 + 900 = 2,900 s -> near.
    short = dataclasses.replace(long, runtime_s=1800.0)
    assert pick(short, near, far, policy=only("finish")) == "near"


def test_finish_time_counts_the_expected_wait() -> None:
    # 8 GPUs asked; h100 has 4 free and 4 coming back in 2 h: wait 7,200 + 1,800 run =
    # 9,000 s, the same finish as l4 now (9,000 s): a tie, broken on cluster ID ("l4").
    # Sooner release (1 h): 5,400 s -> h100 scores higher, but it does not fit now,
    # so the run still goes to l4 (placement only picks among clusters that fit now).
    r = run(gpus=8)
    slow_release = dataclasses.replace(H100, releases=((7200.0, 4.0),))
    assert plugins_data.finish_time_s(r, slow_release) == pytest.approx(9000.0)
    assert plugins_data.finish_time_s(r, L4) == pytest.approx(9000.0)
    fast_release = dataclasses.replace(H100, releases=((3600.0, 4.0),))
    finish = plugins_data.FinishTimeScore()
    assert finish.score(r, fast_release) > finish.score(r, L4)
    assert pick(r, fast_release, L4, policy=only("finish")) == "l4"

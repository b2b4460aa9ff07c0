"""Baseline placement plugins on hand-built cluster views: known scores and choices."""

from __future__ import annotations

import dataclasses

import pytest

from taugrid.scheduling import cycle, plugins
from taugrid.scheduling import policies_baseline as pb
from taugrid.scheduling import snapshot as snap

GB = 10**9


def cluster(
    cid: str, region: str, price: float, model: str = "A100", free: float = 8
) -> snap.ClusterView:
    node = snap.NodeView(f"{cid}-0", model, 8, free, 64, 1e12)
    links = tuple(
        snap.LinkView(src, 1e6, egress_cost_per_gb=0.1)
        for src in ("r1", "r2", "r3")
        if src != region
    )
    return snap.ClusterView(cid, region, True, (node,), cost_per_gpu_hour=price, links=links)


def run(gpus: int = 8, data: tuple[snap.DataNeed, ...] = ()) -> snap.PendingRun:
    return snap.PendingRun("r", "t", 0, 0.0, 1, gpus, 1, 1, datasets=data)


def pick(policy: cycle.Policy, clusters: list[snap.ClusterView], r: snap.PendingRun) -> str | None:
    quotas = (snap.QuotaView("t", "A100", 10**6, 0),)
    (d,) = cycle.schedule(snap.Snapshot(0.0, tuple(clusters), quotas), [r], policy)
    return d.cluster_id


def test_sky_cost_bills_transfer_at_10_gbps_and_egress_not_the_measured_link() -> None:
    need = snap.DataNeed("d", 100 * GB, ("r1",))
    c = cluster("c2", "r2", 2.0)
    # 100 GB at 1.25 GB/s = 80 s of 8 GPUs at $2/h on top of an hour, plus $0.1/GB.
    assert pb.sky_cost(run(data=(need,)), c) == pytest.approx(8 * 2.0 * (3600 + 80) / 3600 + 10)
    assert pb.sky_cost(run(data=(need,)), cluster("c1", "r1", 2.0)) == pytest.approx(16.0)


def test_first_to_admit_follows_the_order_among_clusters_that_fit() -> None:
    cs = [cluster("a", "r1", 3.0, free=0), cluster("b", "r2", 3.0), cluster("c", "r3", 1.0)]
    assert pick(pb.first_to_admit(("a", "b", "c")), cs, run()) == "b"
    assert pick(pb.first_to_admit(("c", "b", "a")), cs, run()) == "c"


def test_static_weights_score_data_as_all_or_nothing() -> None:
    need = snap.DataNeed("d", 1, ("r1",))
    assert pb.LocalityScore().score(run(data=(need,)), cluster("a", "r1", 1.0)) == 100.0
    assert pb.LocalityScore().score(run(data=(need,)), cluster("b", "r2", 1.0)) == 0.0


def test_cost_prices_a_slow_cheap_gpu_per_unit_of_work() -> None:
    l4 = dataclasses.replace(cluster("l4", "r1", 0.9, model="L4"), gpu_speed=0.4)
    cs, any_model = [cluster("a100", "r1", 2.0), l4], run(gpus=1)
    assert pick(cycle.default_policy(), cs, any_model) == "a100"  # $2.25 vs $2 per A100-hour
    assert plugins.CostScore().score(any_model, l4) == pytest.approx(100 * (1 - 2.25 / 10))
    fast_l4 = dataclasses.replace(l4, gpu_speed=1.0)  # the same price for an A100's work
    assert pick(cycle.default_policy(), [cs[0], fast_l4], any_model) == "l4"


def test_unknown_policy_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="first-to-admit, cheapest, static-weights, TauGrid"):
        pb.make_policy("nope")

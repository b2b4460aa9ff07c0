"""Spot capacity in the scheduling core: which nodes a run's capacity lets it take, the
spot price after expected reclaims, and the choice a run of capacity ``any`` gets."""

from __future__ import annotations

import dataclasses

import pytest

from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap


def _node(name: str, spot: bool, free: float = 8) -> snap.NodeView:
    return snap.NodeView(name, "A100", 8, free, 64, 512, spot=spot)


def _cluster(
    cid: str,
    *,
    on_demand: int = 1,
    spot: int = 1,
    price: float = 4.0,
    spot_price: float | None = 1.2,
    reclaims: float = 0.0,
) -> snap.ClusterView:
    nodes = [_node(f"{cid}-od{i}", False) for i in range(on_demand)]
    nodes += [_node(f"{cid}-spot{i}", True) for i in range(spot)]
    return snap.ClusterView(
        cid,
        "r",
        True,
        tuple(nodes),
        cost_per_gpu_hour=price,
        spot_cost_per_gpu_hour=spot_price if spot else None,
        reclaims_per_hour=reclaims,
    )


def _run(capacity: str, workers: int = 1, max_price: float | None = None) -> snap.PendingRun:
    return snap.PendingRun(
        f"run-{capacity}",
        "t",
        0,
        0.0,
        workers,
        8,
        8,
        64,
        "A100",
        admitted=True,
        objective="cost",
        capacity=capacity,
        max_price=max_price,
    )


def _place(run: snap.PendingRun, *clusters: snap.ClusterView) -> cycle.Decision:
    snapshot = snap.Snapshot(now=0.0, clusters=clusters, quotas=())
    (d,) = cycle.schedule(snapshot, [run], cycle.default_policy())
    return d


@pytest.mark.parametrize(("capacity", "kind"), [("spot", "spot"), ("on-demand", "od")])
def test_a_run_takes_only_nodes_of_its_capacity(capacity: str, kind: str) -> None:
    c = _cluster("c", on_demand=2, spot=2)
    d = _place(_run(capacity, workers=2), c)
    assert d.outcome is cycle.Outcome.PLACED and d.capacity == capacity
    assert all(f"-{kind}" in n for n in d.nodes) and len(set(d.nodes)) == 2
    # a third worker does not fit on the two nodes of its capacity, whatever else is free
    assert _place(_run(capacity, workers=3), c).outcome is cycle.Outcome.ADMITTED


def test_a_spot_run_never_goes_where_there_is_no_spot_pool_or_spot_costs_too_much() -> None:
    none = _cluster("a", spot=0)
    dear = _cluster("b", spot_price=2.5)
    d = _place(_run("spot", max_price=2.0), none, dear)
    assert d.outcome is cycle.Outcome.ADMITTED and d.unresolvable
    assert "a (spot): capacity: cluster a has no spot pool" in d.reason
    assert "above max_price $2" in d.reason
    assert _place(_run("spot", max_price=3.0), none, dear).cluster_id == "b"


def test_the_spot_price_counts_the_work_its_expected_reclaims_lose() -> None:
    c = _cluster("c", reclaims=0.4)
    one, four = _run("spot"), _run("spot", workers=4)
    # 0.4 reclaims per node-hour, each losing RECLAIM_LOSS_S (15 min) of work: +10 % per node
    assert snap.spot_overhead(one, c) == pytest.approx(1.1)
    assert snap.spot_overhead(four, c) == pytest.approx(1.4)
    assert c.price(one) == pytest.approx(1.2 * 1.1)
    assert c.price(_run("on-demand")) == 4.0
    assert snap.spot_overhead(one, dataclasses.replace(c, reclaims_per_hour=0)) == 1.0


def test_capacity_any_takes_spot_while_it_is_cheaper_after_its_reclaims() -> None:
    calm = _place(_run("any"), _cluster("c", reclaims=0.1))
    assert calm.capacity == "spot" and calm.nodes == ("c-spot0",)
    assert "on spot" in calm.reason
    # 4 reclaims per node-hour: $1.2 x (1 + 4 x 0.25) = $2.4 ... still cheaper than $4
    assert _place(_run("any"), _cluster("c", reclaims=4)).capacity == "spot"
    # 12 per hour: $1.2 x 4 = $4.8 > $4: on-demand
    stormy = _place(_run("any"), _cluster("c", reclaims=12))
    assert stormy.capacity == "on-demand" and stormy.nodes == ("c-od0",)
    # both kinds judged per cluster, and explain-placement shows both
    assert {(v.cluster_id, v.capacity) for v in stormy.verdicts} == {
        ("c", "spot"),
        ("c", "on-demand"),
    }


def test_capacity_any_falls_back_to_on_demand_when_the_spot_nodes_are_taken() -> None:
    c = _cluster("c")
    first = _run("any")
    second = dataclasses.replace(first, run_id="second", created_at=1.0)
    snapshot = snap.Snapshot(now=0.0, clusters=(c,), quotas=())
    a, b = cycle.schedule(snapshot, [first, second], cycle.default_policy())
    assert (a.capacity, b.capacity) == ("spot", "on-demand")
    assert (a.nodes, b.nodes) == (("c-spot0",), ("c-od0",))

"""Spot pools in the multi-region simulator: reclaims end attempts, work survives to the
last checkpoint, every attempt is paid for, and the three ways of using spot compare."""

from __future__ import annotations

import dataclasses

from taugrid.scheduling import snapshot as snap
from taugrid.sim import mr_scenario as sc
from taugrid.sim import mr_sim

HOUR = 3600.0
ON_DEMAND = sc.Pool("r1", "A100", 1, 2.0)
STORMY = sc.Pool("r1", "A100", 1, 0.6, spot=True, reclaims_per_hour=1.0)


def _scenario(*pools: sc.Pool, capacity: str, duration: float = 4 * HOUR) -> sc.Scenario:
    job = sc.Job("j0", 0.0, 1, 8, duration, "A100", capacity=capacity)
    return sc.Scenario(("r1",), pools, (), (), (), (job,), seed=7)


def test_spot_twins_leave_the_rest_of_the_scenario_as_it_was() -> None:
    plain, spot = sc.generate(3, jobs=40), sc.generate(3, jobs=40, spot=True)
    twins = spot.pools[len(plain.pools) :]
    assert spot.pools[: len(plain.pools)] == plain.pools and spot.jobs == plain.jobs
    assert [t.cluster_id for t in twins] == [f"{p.cluster_id}-spot" for p in plain.pools]
    for p, t in zip(plain.pools, twins, strict=True):
        assert t.spot and t.nodes == p.nodes and 0.3 * p.price - 0.01 <= t.price <= 0.5 * p.price
        assert 0.02 <= t.reclaims_per_hour <= 0.5


def test_a_reclaimed_job_keeps_its_checkpointed_work_and_pays_for_every_attempt() -> None:
    r = mr_sim.simulate(_scenario(STORMY, capacity="spot"), "TauGrid", restart_in_place=True)
    (p,) = r.placements
    assert r.reclaims >= 2  # seeded: one reclaim an hour over a 4-hour job
    # each reclaim costs a restart, the work since the last checkpoint and the node's return
    least = 4 * HOUR + r.reclaims * snap.RESTART_S
    most = least + r.reclaims * (snap.CHECKPOINT_EVERY_S + sc.NODE_RETURN_S)
    assert least <= p.finish - p.submit <= most
    assert r.reclaim_cost > 0
    last = 8 * (p.finish - p.placed) / HOUR * STORMY.price
    assert abs(r.gpu_cost - (last + r.reclaim_cost)) < 0.02
    assert (
        mr_sim.simulate(_scenario(STORMY, capacity="spot"), "TauGrid", restart_in_place=True) == r
    )


def test_an_on_demand_job_never_touches_spot_and_a_spot_job_never_on_demand() -> None:
    both = (ON_DEMAND, STORMY)
    od = mr_sim.simulate(_scenario(*both, capacity="on-demand"), "TauGrid")
    assert [p.cluster_id for p in od.placements] == ["r1-a100"] and od.reclaims == 0
    spot = mr_sim.simulate(_scenario(*both, capacity="spot"), "TauGrid")
    assert [p.cluster_id for p in spot.placements] == ["r1-a100-spot"] and spot.reclaims > 0


def test_capacity_any_leaves_a_pool_whose_reclaims_cost_more_than_its_discount() -> None:
    calm = dataclasses.replace(STORMY, reclaims_per_hour=0.01)
    assert [
        p.cluster_id
        for p in mr_sim.simulate(_scenario(ON_DEMAND, calm, capacity="any"), "TauGrid").placements
    ] == ["r1-a100-spot"]
    storm = dataclasses.replace(STORMY, reclaims_per_hour=20.0)  # x6 the work: $3.6 > $2
    r = mr_sim.simulate(_scenario(ON_DEMAND, storm, capacity="any"), "TauGrid")
    assert [p.cluster_id for p in r.placements] == ["r1-a100"] and r.reclaims == 0


def test_compare_spot_plays_the_three_ways_on_the_same_scenarios() -> None:
    out = mr_sim.compare_spot([5], jobs=40)
    assert tuple(out) == mr_sim.SPOT_WAYS
    od, in_place, ours = (out[w][0] for w in mr_sim.SPOT_WAYS)
    assert od.jobs == in_place.jobs == ours.jobs == 40
    assert od.reclaims == 0 and od.reclaim_cost == 0
    assert in_place.reclaims > ours.reclaims
    assert ours.policy == "TauGrid (capacity any)"
    assert mr_sim.compare_spot([5], jobs=40) == out
